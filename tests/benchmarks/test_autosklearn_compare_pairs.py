"""benchmarks/autosklearn_compare.py: each method paired with stock auto-sklearn over (dataset, seed)."""

from __future__ import annotations


def _record(dataset, seed, method, error):
    return {"dataset": dataset, "seed": seed, "method": method, "test_error": error, "runs": 10}


def test_methods_are_paired_with_stock_and_with_their_own_ensemble(script):
    compare = script("autosklearn_compare")
    records = []
    for seed in range(5):
        records.append(_record("a", seed, "stock", 10.0))
        records.append(_record("a", seed, "optdiv", 9.0 if seed else 10.0))  # one level pair
        records.append(_record("a", seed, "stock+ens", 11.0))
    records.append(_record("b", 0, "optdiv", 1.0))  # no stock fit to pair with: left out
    lines = compare.paired_line(records, {"a", "b"}, ["stock", "optdiv"], range(5)).splitlines()
    assert lines[0].startswith("stock+ens vs stock over 5 pairs: 0 lower / 0 level / 5 higher")
    assert lines[1].startswith("optdiv vs stock over 5 pairs: 4 lower / 1 level / 0 higher")
    assert len(lines) == 2
    assert compare.paired_line(records, {"a"}, ["optdiv"], [9]) == ""  # no seed in the pairs
