"""Large data: the search fits on a row sample, the final members on every row."""

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer
from tiny_space import tiny_space

from optdiv.data import (MIN_SEARCH_ROWS, Splits, cross_validation_view, resolve_search_rows, row_sample_view)
from optdiv.sklearn import OptDivClassifier


def test_auto_grows_with_the_time_budget_and_keeps_every_row_without_one():
    assert resolve_search_rows("auto", 200) == 50_000
    assert resolve_search_rows("auto", 3600) == 900_000
    assert resolve_search_rows("auto", 10) == MIN_SEARCH_ROWS
    assert resolve_search_rows("auto", None) is None
    assert resolve_search_rows(None, 200) is None
    assert resolve_search_rows(500, 200) == 500
    for bad in ("many", 5, 2.5, True):
        with pytest.raises(ValueError, match="search_rows must be"):
            resolve_search_rows(bad, 60)


def _splits(n_train=1000, n_val=400, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n_train + n_val + 50, 2)), columns=["a", "b"])
    y = (rng.random(len(X)) < 0.1).astype(int)  # a rare class: 10 %
    return Splits(X.iloc[:n_train], y[:n_train], X.iloc[n_train:n_train + n_val], y[n_train:n_train + n_val],
                  X.iloc[-50:], y[-50:])


def test_a_row_sample_keeps_the_classes_shares_the_validation_proportion_and_the_test_rows():
    splits = _splits()
    sample = row_sample_view(splits, 200, seed=3, task="classification")
    assert len(sample.y_train) == 200 and len(sample.y_val) == 80  # 1000:400 kept
    assert abs(sample.y_train.mean() - splits.y_train.mean()) < 0.01
    assert abs(sample.y_val.mean() - splits.y_val.mean()) < 0.02
    assert set(sample.X_train.index) <= set(splits.X_train.index)
    assert (sample.y_train == splits.y_train[splits.X_train.index.get_indexer(sample.X_train.index)]).all()
    assert sample.X_test is splits.X_test and sample.y_test is splits.y_test
    again = row_sample_view(splits, 200, seed=3, task="classification")
    assert list(again.X_train.index) == list(sample.X_train.index)  # the same sample for the same seed
    assert row_sample_view(splits, 5000, seed=3, task="classification") is splits  # small enough already
    with pytest.raises(ValueError, match="holdout split"):
        row_sample_view(cross_validation_view(splits, 3, 0, "classification"), 200, 0, "classification")


def _rows_fitted(pipeline) -> int:
    model = pipeline.steps[-1][1]
    if hasattr(model, "tree_"):
        return int(model.tree_.n_node_samples[0])
    return int(model.steps[0][1].n_samples_seen_)  # the linear model's scaler


def test_an_estimator_searches_on_the_sample_and_refits_its_members_on_every_row():
    X, y = load_breast_cancer(return_X_y=True)
    clf = OptDivClassifier(space=tiny_space("classification"), budget=4, seed=0, cv=None, search_rows=120,
                           portfolio=None).fit(X[:500], y[:500])
    rows = clf.result_.info["search_rows"]
    assert rows == {"train": 120, "validation": 40, "of_train": 375, "of_validation": 125}
    assert len(clf.validation_targets_) == 40  # what the history's predictions were scored on
    assert all(len(obs.val_pred) == 40 for obs in clf.result_.history if obs.status == "ok")
    assert clf.result_.info["final_model"]["rows"] == "train+validation"
    assert all(_rows_fitted(member) == 500 for member in clf.ensemble_.members)  # train+validation, not 160
    assert clf.score(X[500:], y[500:]) > 0.8
    full = OptDivClassifier(space=tiny_space("classification"), budget=4, seed=0, cv=None, search_rows=None,
                            portfolio=None).fit(X[:500], y[:500])
    assert "search_rows" not in full.result_.info and len(full.validation_targets_) == 125


def test_under_a_time_budget_the_refit_worker_refits_the_sampled_members_on_every_row():
    X, y = load_breast_cancer(return_X_y=True)
    clf = OptDivClassifier(space=tiny_space("classification"), budget=4, time_budget=60, seed=1, cv=None,
                           search_rows=100, portfolio=None).fit(X[:480], y[:480])
    assert clf.result_.info["search_rows"]["train"] == 100
    final = clf.result_.info["final_model"]
    assert final["rows"] == "train+validation" and final["refitted"] == len(clf.ensemble_.members)
    assert all(_rows_fitted(member) == 480 for member in clf.ensemble_.members)


def test_a_run_searched_on_a_sample_resumes_only_with_the_same_sample(tmp_path):
    from optdiv.config import RunConfig
    from optdiv.engine.run import run
    from optdiv.storage.base import RunStoreError

    csv = tmp_path / "bc.csv"
    load_breast_cancer(as_frame=True).frame.to_csv(csv, index=False)
    out = tmp_path / "run"
    config = RunConfig.product(method="rs", budget=2, cv=None, search_rows=100, portfolio=None, n_jobs=1)
    result, summary = run(str(csv), target="target", out=str(out), config=config)
    assert result.info["search_rows"]["train"] == 100 and summary["n_evaluations"] == 2
    import json
    assert json.loads((out / "meta.json").read_text())["search_rows"] == 100
    with pytest.raises(RunStoreError, match="search_rows"):
        run(str(csv), target="target", out=str(out), resume=True, config=config.replace(search_rows=150, budget=3))
    result, summary = run(str(csv), target="target", out=str(out), resume=True, config=config.replace(budget=3))
    assert summary["n_evaluations"] == 3
