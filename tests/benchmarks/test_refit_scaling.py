"""benchmarks/refit_scaling.py: per algorithm, the fit seconds at each row count and the exponents between them."""

from __future__ import annotations

import json


def test_each_algorithm_reports_its_seconds_and_the_exponent_between_sizes(script, capsys):
    probe = script("refit_scaling")
    probe.main(["--rows", "400,1600", "--task", "regression", "--algorithms", "ridge,k_nearest_neighbors"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["algorithm"] for line in lines] == ["k_nearest_neighbors", "ridge"]  # the library defaults' order
    for line in lines:
        assert set(line["seconds"]) == {"400", "1600"} and all(t > 0 for t in line["seconds"].values())
        assert len(line["exponents"]) <= 1  # one pair of sizes; none when the smaller fit was too quick to time
