"""benchmarks/openbox_compare.py's host table on hand-made records (no OpenBox search is run here)."""

from __future__ import annotations


def _records():
    out = []
    # (host alone, host search + optdiv's final model, diversity search + optdiv's final model) per seed
    for seed, (alone, final, diverse) in enumerate([(10.0, 9.0, 9.5), (12.0, 11.0, 10.0), (11.0, 10.0, 10.5)]):
        out.append({"dataset": "d", "seed": seed, "method": "openbox", "test_error": alone,
                    "optdiv_test_error": final, "optdiv_unrefitted_test_error": alone})
        out.append({"dataset": "d", "seed": seed, "method": "optdivbo", "test_error": alone,
                    "optdiv_test_error": diverse, "optdiv_unrefitted_test_error": alone})
    return out


def test_the_diversity_column_is_paired_with_the_final_model_alone(script):
    table = script("openbox_compare").host_table(_records())
    assert "| d | 3 | 11 +- 1 | 11 +- 1 | 10 +- 1 | 10 +- 0.5 |" in table
    assert "OpenBox + optdiv's final model vs OpenBox alone over 3 pairs: 3 lower / 0 level / 0 higher" in table
    # 9.5 vs 9.0 higher, 10.0 vs 11.0 lower, 10.5 vs 10.0 higher
    assert ("OpenBox + optdivbo + optdiv's final model vs OpenBox + optdiv's final model over 3 pairs: 1 lower / "
            "0 level / 2 higher") in table
