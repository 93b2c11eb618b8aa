"""Rank and Wilcoxon summaries on hand examples; the report's cells and tables; the stacking combiner."""

from __future__ import annotations

import numpy as np
import pytest

from optdiv.bench.report import format_cell, algorithm_spread
from optdiv.bench.stats import (average_ranks, better_same_worse, compare, lower_tie_higher, paired_p,
                                relative_pairs_line)
from optdiv.final.choice import Stacker


def test_average_ranks_by_hand():
    means = {
        "d1": {"a": 1.0, "b": 2.0, "c": 3.0},
        "d2": {"a": 2.0, "b": 1.0, "c": 3.0},
        "d3": {"a": 1.0, "b": 1.0, "c": 0.5},  # a and b tie for ranks 2 and 3
    }
    ranks = average_ranks(means, ["a", "b", "c"])
    assert ranks["a"] == pytest.approx((1 + 2 + 2.5) / 3)
    assert ranks["b"] == pytest.approx((2 + 1 + 2.5) / 3)
    assert ranks["c"] == pytest.approx((3 + 3 + 1) / 3)


def test_average_ranks_skip_datasets_missing_a_method():
    means = {"d1": {"a": 1.0, "b": 2.0}, "d2": {"a": 5.0}}
    assert average_ranks(means, ["a", "b"]) == {"a": 1.0, "b": 2.0}


def test_wilcoxon_better_same_worse():
    ours = [1.0, 1.1, 0.9, 1.2, 1.0, 0.95, 1.05, 1.1, 0.9, 1.0]
    worse_by_a_lot = [x + 0.5 + 0.01 * i for i, x in enumerate(ours)]
    assert compare(ours, worse_by_a_lot) == "better"
    assert compare(worse_by_a_lot, ours) == "worse"
    assert compare(ours, ours) == "same"
    # three seeds can never reach p <= 0.05 (the exact two-sided minimum is 0.25)
    assert compare([1, 1, 1], [2, 2, 2]) == "same"
    noisy = [x + (0.01 if i % 2 else -0.01) for i, x in enumerate(ours)]
    assert compare(ours, noisy) == "same"
    counts = better_same_worse({"x": (ours, worse_by_a_lot), "y": (ours, ours), "z": (worse_by_a_lot, ours)})
    assert counts == (1, 1, 1)
    with pytest.raises(ValueError):
        compare([1, 2], [1, 2, 3])


def test_stacker_combines_members_into_probabilities_and_values():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 200)
    members = [np.eye(3)[y] * 0.6 + rng.dirichlet(np.ones(3), 200) * 0.4 for _ in range(5)]
    stacker = Stacker("classification", 3).fit(members, y)
    probs = stacker.predict(members)
    assert probs.shape == (200, 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    assert np.mean(probs.argmax(axis=1) == y) > 0.9
    oof = stacker.cross_validated(members, y)
    assert oof.shape == (200, 3) and np.mean(oof.argmax(axis=1) == y) > 0.8
    target = rng.normal(size=200)
    values = [target + rng.normal(scale=0.3, size=200) for _ in range(5)]
    reg = Stacker("regression").fit(values, target)
    assert np.mean((reg.predict(values) - target) ** 2) < np.mean((values[0] - target) ** 2)


def test_algorithm_spread_by_hand():
    suggested = ["svm", "svm", "knn", "svm", "tree"]
    assert algorithm_spread(suggested, ["svm", "svm", "knn"]) == (pytest.approx(3 / 5), 2)
    assert algorithm_spread(["knn"] * 4, ["knn"]) == (1.0, 1)
    share, distinct = algorithm_spread([], [])
    assert np.isnan(share) and distinct == 0


def test_paired_p_treats_float_noise_as_ties():
    ours = np.array([10.0, 12.0, 9.0, 11.0, 13.0, 8.0, 10.0, 12.0])
    theirs = np.array([10.0, 11.0, 10.0, 10.0, 11.0, 9.0, 12.0, 15.0])
    exact = paired_p(ours, theirs)
    # the same losses scaled to % and back: the tie and the equal differences pick up float noise
    noisy = paired_p(ours * 0.07 * 100 / 7, theirs * 0.07 * 100 / 7)
    assert noisy == pytest.approx(exact, abs=1e-12)
    assert paired_p(ours, ours + 1e-15 * ours) == 1.0
    assert paired_p([1.0], [2.0]) == 1.0
    # eight losses all lower: the exact two-sided p is 2 / 2**8
    assert paired_p(np.arange(8.0), np.arange(8.0) + np.arange(1.0, 9.0)) == pytest.approx(2 / 256)


def test_lower_tie_higher_by_hand():
    assert lower_tie_higher([1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 1.0, 4.0 + 1e-15]) == (1, 2, 1)


def test_cells_print_the_std_at_the_means_decimals():
    assert format_cell(0.01706, 3.657e-18, "mse") == "0.01706 ± 0.00000"  # float noise reads as 0
    assert format_cell(1.5, 0.27171, "mse") == "1.500 ± 0.272"
    assert format_cell(44.0938, 73.28, "mse") == "44.09 ± 73.28"
    assert format_cell(2181.4, 12.6, "mae") == "2181 ± 13"
    assert format_cell(0.0, 0.0, "mse") == "0.000 ± 0.000"
    assert format_cell(43.5612, 0.804, "error") == "43.56 ± 0.80"
    assert format_cell(float("nan"), 0.0, "mse") == "-"


def test_transfer_table_and_validation_test_correlation_by_hand():
    from optdiv.bench.report import transfer_table, validation_test_correlation

    def table(cells):
        return {"methods": ["ref", "a", "b"], "datasets": ["d1", "d2"], "cells": cells}

    # seeds 0-2 on d1, seed 0 on d2; against a, ref is lower on validation in 3 of 4 pairs but on test in only 1 of them
    val = table({"ref": {"d1": {0: 1.0, 1: 1.0, 2: 3.0}, "d2": {0: 1.0}},
                 "a": {"d1": {0: 2.0, 1: 2.0, 2: 2.0}, "d2": {0: 2.0}},
                 "b": {"d1": {0: 1.0, 1: 5.0, 2: 5.0}, "d2": {0: 5.0}}})
    test = table({"ref": {"d1": {0: 9.0, 1: 1.0, 2: 1.0}, "d2": {0: 7.0}},
                  "a": {"d1": {0: 2.0, 1: 2.0, 2: 2.0}, "d2": {0: 2.0}},
                  "b": {"d1": {0: 9.0, 1: 9.0, 2: 9.0}, "d2": {0: 9.0}}})
    lines = transfer_table(val, test, "ref").splitlines()
    assert lines[2] == "| a | 3 / 0 / 1 | 2 / 0 / 2 | 1 of 3 |"
    assert lines[3] == "| b | 3 / 1 / 0 | 3 / 1 / 0 | 3 of 3 |"
    assert transfer_table(val, test, "nobody").startswith("(no runs")

    r = validation_test_correlation(val, test)
    means_val, means_test = [5 / 3, 2.0, 11 / 3], [11 / 3, 2.0, 9.0]
    assert r["d1"] == pytest.approx(np.corrcoef(means_val, means_test)[0, 1])
    assert r["d2"] == pytest.approx(np.corrcoef([1.0, 2.0, 5.0], [7.0, 2.0, 9.0])[0, 1])


def test_relative_pairs_line_counts_and_tests_the_relative_differences():
    from scipy.stats import wilcoxon

    ours, theirs = [9.0, 18.0, 5.0, 5.5, 0.5], [10.0, 20.0, 5.0, 5.0, 0.0]  # -0.1, -0.1, level, +0.1, over 0
    line = relative_pairs_line("x vs y", ours, theirs)
    p = wilcoxon([-0.1, -0.1, 0.1]).pvalue  # the level pair and the pair over 0 are dropped
    assert line == f"x vs y over 5 pairs: 2 lower / 2 level / 1 higher, median +0.0 %, Wilcoxon p = {p:.3g}"
    assert relative_pairs_line("x vs y", [], []) == "x vs y: no pairs"
    assert relative_pairs_line("one", [1.0], [2.0]).endswith("median -50.0 %, Wilcoxon p = 1")
