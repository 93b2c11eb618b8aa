"""benchmarks/final_members.py: the bag variants of one fit each, and the report's pairing against the reference."""

from __future__ import annotations

import json
from argparse import Namespace

import numpy as np
import pandas as pd
import pytest

#: Each check's search budget: enough for a few 5-fold evaluations when the test workers share two loaded cores, a
#: worker's imports taking seconds there (at 15 s, and at 25 s under more load, a search finished none).
SECONDS = 40.0


def test_errors_are_zero_one_on_probabilities_and_squared_on_values(script):
    fm = script("final_members")
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])
    assert fm._error("classification", np.array([0, 1, 1, 1]), probs) == pytest.approx(25.0)
    assert fm._error("regression", np.array([1.0, 2.0]), np.array([1.0, 4.0])) == pytest.approx(2.0)


def test_the_report_pairs_each_variant_with_the_reference(script):
    fm = script("final_members")
    lines = [{"dataset": d, "refit": 10.0, "blend": 9.0 if d == "a" else 11.0, "bag4": 10.0} for d in "abc"]
    rows = fm._table(lines, ("refit", "blend", "bag4"), "refit", "dataset")
    assert "| a | 10 | 9 | 10 |" in rows
    assert any(r.startswith("| blend | 1 | 0 | 2 |") for r in rows)  # lower on a, higher on b and c
    assert any(r.startswith("| bag4 | 0 | 3 | 0 | +0.0 % | 1 |") for r in rows)


@pytest.mark.timeout(300)
def test_every_bag_variant_is_scored_for_each_algorithm(script, tmp_path, capsys):
    fm = script("final_members")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 4))
    frame = pd.DataFrame(X, columns=list("abcd")).assign(target=(X[:, 0] + X[:, 1] > 0).astype(int))
    frame.to_csv(tmp_path / "toy.csv", index=False)
    fm.run_bags(Namespace(data_dir=tmp_path, datasets=["toy"], seeds=[0], out=tmp_path))
    lines = [json.loads(x) for x in (tmp_path / "bags.jsonl").read_text().splitlines()]
    assert sorted(x["algorithm"] for x in lines) == sorted(fm._algorithms("classification"))
    for line in lines:
        assert line["task"] == "classification" and line["seed"] == 0
        assert all(0.0 <= line[v] <= 100.0 for v in fm.BAG_VARIANTS)
    # an easy linear target: the refit on every row of a forest is far better than chance
    assert min(x["refit"] for x in lines) < 25.0
    fm.run_report(Namespace(out=tmp_path))
    assert "| toy |" in capsys.readouterr().out


@pytest.mark.timeout(300)
def test_the_ensemble_check_scores_one_search_with_its_members_refitted_and_bagged(script, tmp_path):
    fm = script("final_members")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4))
    frame = pd.DataFrame(X, columns=list("abcd")).assign(target=(X[:, 0] - X[:, 2] > 0).astype(int))
    frame.to_csv(tmp_path / "toy.csv", index=False)
    fm.run_ensemble(Namespace(data_dir=tmp_path, datasets=["toy"], seeds=[0], out=tmp_path, seconds=SECONDS))
    (line,) = [json.loads(x) for x in (tmp_path / "ensemble.jsonl").read_text().splitlines()]
    assert 1 <= line["members"] <= line["of_members"] and line["evaluations"] >= line["of_members"]
    assert all(0.0 <= line[v] <= 100.0 for v in fm.ENSEMBLE_VARIANTS)
    assert line["refit"] < 30.0  # a linear target of 240 training rows: far better than chance


@pytest.mark.timeout(300)
def test_the_reselection_check_chooses_again_over_the_same_cross_validated_search(script, tmp_path):
    fm = script("final_members")
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 3))
    frame = pd.DataFrame(X, columns=list("abc")).assign(target=2.0 * X[:, 0] + 0.1 * rng.normal(size=200))
    frame.to_csv(tmp_path / "toy.csv", index=False)
    fm.run_reselect(Namespace(data_dir=tmp_path, datasets=["toy"], seeds=[0], out=tmp_path, seconds=SECONDS, top=2))
    (line,) = [json.loads(x) for x in (tmp_path / "reselect.jsonl").read_text().splitlines()]
    assert line["task"] == "regression" and line["evaluations"] >= 1
    assert all(np.isfinite(line[v]) and line[v] >= 0.0 for v in ("estimator",) + fm.RESELECT_VARIANTS)
    assert line["all"] < 1.0  # the target's variance is 4: a fitted linear signal is far below it


def test_the_constant_is_what_the_targets_alone_predict(script):
    fm = script("final_members")
    assert fm._constant(np.array([0, 0, 1, 0]), "classification", 3).tolist() == [0.75, 0.25, 0.0]
    assert float(fm._constant(np.array([1.0, 2.0, 6.0]), "regression", None)) == pytest.approx(3.0)


@pytest.mark.timeout(300)
def test_the_prior_check_chooses_again_with_the_constant_member_on_a_target_nothing_predicts(script, tmp_path,
                                                                                             capsys):
    fm = script("final_members")
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 3))
    frame = pd.DataFrame(X, columns=list("abc")).assign(target=(rng.random(300) < 0.3).astype(int))
    frame.to_csv(tmp_path / "toy.csv", index=False)
    fm.run_prior(Namespace(data_dir=tmp_path, datasets=["toy"], seeds=[0], out=tmp_path, seconds=SECONDS))
    (line,) = [json.loads(x) for x in (tmp_path / "prior.jsonl").read_text().splitlines()]
    assert line["cv"] == 5 and line["evaluations"] >= 1  # 240 training rows: cross-validated, as the estimator does
    assert all(0.0 <= line[v] <= 100.0 for v in ("estimator", "constant") + fm.PRIOR_VARIANTS)
    assert 0.0 <= line["prior_weight"] <= 1.0
    assert line["constant"] == pytest.approx(100.0 * 18 / 60, abs=10.0)  # the minority share of the test rows
    fm.run_report(Namespace(out=tmp_path))
    assert "constant member kept in" in capsys.readouterr().out


def _noisy_line(folder, seed: int) -> pd.DataFrame:
    """A 300-row regression set (one informative column of three) written as ``folder/toy.csv``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, 3))
    frame = pd.DataFrame(X, columns=list("abc")).assign(target=X[:, 0] + 0.5 * rng.normal(size=300))
    frame.to_csv(folder / "toy.csv", index=False)
    return frame


@pytest.mark.timeout(300)
def test_the_size_check_chooses_again_with_other_step_counts_and_its_own_count_repeats_the_product(script, tmp_path,
                                                                                                    monkeypatch, capsys):
    fm = script("final_members")
    monkeypatch.setattr(fm, "SIZES", (25, 2))  # 25 is the product's count: the same selection as "all"
    frame = _noisy_line(tmp_path, seed=4)
    fm.run_size(Namespace(data_dir=tmp_path, datasets=["toy"], seeds=[0], out=tmp_path, seconds=SECONDS))
    (line,) = [json.loads(x) for x in (tmp_path / "size.jsonl").read_text().splitlines()]
    assert line["task"] == "regression" and line["evaluations"] >= 1
    assert line["size25"] == line["all"]
    assert 0.0 < line["size2"] < float(np.var(frame["target"])) * 2  # a real model's MSE, not a constant's
    fm.run_report(Namespace(out=tmp_path))
    assert "## size: 1 (dataset, seed) searches" in capsys.readouterr().out


@pytest.mark.timeout(300)
def test_the_pool_check_chooses_again_among_the_best_evaluations_and_a_pool_of_all_repeats_the_product(
        script, tmp_path, monkeypatch, capsys):
    fm = script("final_members")
    monkeypatch.setattr(fm, "POOLS", (1, 10_000))  # one candidate: the best evaluation alone; every one: "all"
    frame = _noisy_line(tmp_path, seed=5)
    fm.run_pool(Namespace(data_dir=tmp_path, datasets=["toy"], seeds=[0], out=tmp_path, seconds=SECONDS))
    (line,) = [json.loads(x) for x in (tmp_path / "pool.jsonl").read_text().splitlines()]
    assert line["task"] == "regression" and line["evaluations"] >= 2
    assert line["top10000"] == pytest.approx(line["all"], rel=1e-9)  # the same members, summed in another order
    assert 0.0 < line["top1"] < float(np.var(frame["target"])) * 2  # a real model's MSE, not a constant's
    fm.run_report(Namespace(out=tmp_path))
    assert "## pool: 1 (dataset, seed) searches" in capsys.readouterr().out


@pytest.mark.timeout(300)
def test_the_longer_check_refits_only_the_members_a_change_applies_to(script, tmp_path, monkeypatch):
    fm = script("final_members")
    # 100 trees: what the space fits, so the product's own refits; 3 trees: a change that must show
    monkeypatch.setattr(fm, "CHANGES", {"trees300": fm._more_trees(100), "slow2": fm._slower(1),
                                        "trees3": fm._more_trees(3)})
    _noisy_line(tmp_path, seed=6)
    fm.run_longer(Namespace(data_dir=tmp_path, datasets=["toy"], seeds=[0], out=tmp_path, seconds=SECONDS))
    (line,) = [json.loads(x) for x in (tmp_path / "longer.jsonl").read_text().splitlines()]
    assert line["trees300"] == line["all"] and line["slow2"] == line["all"]
    assert 0.0 <= line["forest_weight"] <= 1.0 and 0.0 <= line["lightgbm_weight"] <= 1.0
    if line["forest_weight"] == 0.0:
        assert line["trees3"] == line["all"]  # no forest in the selection: nothing refitted otherwise
    else:
        assert line["trees3"] != line["all"]


def test_a_change_applies_to_its_algorithms_only(script):
    from optdiv.evaluation.fitting import final_estimator
    from optdiv.spaces import get_space
    from optdiv.spaces.portfolio import library_defaults

    fm = script("final_members")
    space = get_space("autosklearn", "regression")
    configs = {c["regressor:__choice__"]: c for c in library_defaults("autosklearn", "regression")}
    for change, applies in (("trees300", {"random_forest", "extra_trees"}), ("slow2", {"lightgbm"})):
        assert {name for name, c in configs.items() if fm._changes(change, space.build, c, 0)} == applies
    lgb = fm._changed("slow2", space.build)(dict(configs["lightgbm"]), 0)
    assert final_estimator(lgb).learning_rate == 0.05 and final_estimator(lgb).n_estimators == 200


@pytest.mark.timeout(300)
def test_the_stack_check_scores_a_stacker_over_the_selection_and_their_blend(script, tmp_path, capsys):
    fm = script("final_members")
    frame = _noisy_line(tmp_path, seed=7)
    fm.run_stack(Namespace(data_dir=tmp_path, datasets=["toy"], seeds=[0], out=tmp_path, seconds=SECONDS))
    (line,) = [json.loads(x) for x in (tmp_path / "stack.jsonl").read_text().splitlines()]
    assert line["task"] == "regression" and 1 <= line["members"] <= line["evaluations"]
    assert 0.0 < line["all"] < float(np.var(frame["target"]))  # the selection learned the informative column
    assert 0.0 < line["stack"] < float(np.var(frame["target"]))
    assert line["blend"] <= (line["all"] + line["stack"]) / 2 + 1e-12  # squared error is convex in the prediction
    fm.run_report(Namespace(out=tmp_path))
    assert "## stack: 1 (dataset, seed) searches" in capsys.readouterr().out


@pytest.mark.timeout(300)
def test_the_fold_bag_check_fits_each_member_once_per_fold_on_the_other_folds_rows(script, tmp_path, monkeypatch,
                                                                                   capsys):
    fm = script("final_members")
    frame = _noisy_line(tmp_path, seed=7)
    fitted_rows = []
    plain = fm._test_prediction

    def counting(build, X, y, *rest):
        fitted_rows.append(len(y))
        return plain(build, X, y, *rest)

    monkeypatch.setattr(fm, "_test_prediction", counting)
    fm.run_foldbags(Namespace(data_dir=tmp_path, datasets=["toy"], seeds=[0], out=tmp_path, seconds=SECONDS))
    (line,) = [json.loads(x) for x in (tmp_path / "foldbags.jsonl").read_text().splitlines()]
    assert line["cv"] == 5 and 1 <= line["members"] <= line["of_members"]
    n = 240  # the race's 80 % of 300 rows, all of them cross-validated
    assert fitted_rows.count(n) == line["members"]  # one refit on every row per member
    assert sorted(set(fitted_rows) - {n}) == [n * 4 // 5]  # the bags' fits: four of the five folds each
    assert fitted_rows.count(n * 4 // 5) == 5 * line["members"]
    assert 0.0 < line["bags"] < float(np.var(frame["target"])) * 2  # a real model's MSE, not a constant's
    fm.run_report(Namespace(out=tmp_path))
    assert "## foldbags: 1 (dataset, seed) searches" in capsys.readouterr().out
