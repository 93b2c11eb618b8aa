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


def _variant_record(seed, alone, unguarded, guarded, kept):
    variants = {"guard z1.0": guarded, "guard z1.64": guarded, "guard z2.58": unguarded, "own metric": guarded}
    verdict = {"z": 2.0 if kept == "own" else 0.5, "threshold": 1.645, "kept": kept}
    return {"dataset": "d", "seed": seed, "method": "openbox", "test_error": alone, "optdiv_test_error": unguarded,
            "optdiv_variants": variants, "optdiv_guard": {name: verdict for name in variants}}


def test_the_unguarded_variant_is_read_from_the_default(script):
    compare = script("openbox_compare")
    old = _variant_record(0, 2.0, unguarded=3.0, guarded=1.5, kept="own")
    now = compare.with_unguarded(old)
    assert now["optdiv_test_error"] == 3.0 and now["optdiv_variants"]["no guard"] == 3.0
    assert "no guard" not in old["optdiv_variants"]  # the record itself is left as written
    assert compare.with_unguarded(now) == now


def test_the_variants_table_pairs_each_variant_with_the_host_and_the_unguarded_selection(script):
    compare = script("openbox_compare")
    records = [_variant_record(0, 2.0, 3.0, 1.5, "own"), _variant_record(1, 2.0, 1.8, 1.8, "smooth"),
               {"dataset": "d", "seed": 2, "method": "openbox", "test_error": 2.0, "optdiv_test_error": 1.0}]
    table = compare.variants_table(records)
    assert "| d | 2 | 2.000 | 2.400 | 1.650 | 1.650 | 2.400 | 1.650 | 1 |" in table  # the run without variants left out
    assert "guard z1.64 vs no guard over 2 pairs: 1 lower / 1 level / 0 higher" in table
    assert "no guard vs OpenBox alone over 2 pairs: 1 lower / 0 level / 1 higher" in table


def test_a_seed_recorded_in_two_sittings_counts_as_two_runs(script):
    first = [{"dataset": "d", "seed": 0, "method": "openbox", "test_error": 2.0, "optdiv_test_error": 1.0}]
    second = [{"dataset": "d", "seed": 0, "method": "openbox", "test_error": 1.0, "optdiv_test_error": 3.0}]
    table = script("openbox_compare").host_table(first + second)
    assert "| d | 2 | 1.5 +- 0.71 | 2 +- 1.4 |" in table
    assert "over 2 pairs: 1 lower / 0 level / 1 higher" in table  # each run paired within its own sitting
