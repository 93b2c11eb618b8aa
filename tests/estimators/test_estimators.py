"""OptDivClassifier / OptDivRegressor honour the scikit-learn estimator contract."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.exceptions import NotFittedError
from tiny_space import tiny_space

from optdiv.data import DataError
from optdiv.sklearn import OptDivClassifier, OptDivRegressor


@pytest.fixture(scope="module")
def fitted_classifier():
    x, y = load_breast_cancer(return_X_y=True)
    labels = np.where(y == 1, "benign", "malignant")
    clf = OptDivClassifier(space=tiny_space("classification"), budget=7, seed=0)
    return clf.fit(x[:300], labels[:300]), x[300:], labels[300:]


def test_classifier_fit_predict_score(fitted_classifier):
    clf, x_test, y_test = fitted_classifier
    assert set(clf.classes_) == {"benign", "malignant"}
    assert set(clf.predict(x_test)) <= set(clf.classes_)
    proba = clf.predict_proba(x_test)
    assert proba.shape == (len(x_test), 2) and np.allclose(proba.sum(1), 1)
    assert clf.score(x_test, y_test) > 0.85
    assert clf.weights_.sum() == pytest.approx(1.0)
    assert len(clf.members_) == len(clf.weights_) and "config" in clf.members_[0]
    history = clf.history_
    assert len(history) == 7 and {"algorithm", "status", "val_loss", "in_ensemble"} <= set(history.columns)
    assert history["in_ensemble"].sum() == len(clf.weights_)
    assert clf.result_.info["ensemble_selection"] == {"loss": "log_loss", "bags": 0}  # "auto" for 0/1 error


def test_pickle_roundtrip_predicts_the_same(fitted_classifier):
    clf, x_test, _ = fitted_classifier
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict_proba(x_test), clf.predict_proba(x_test))


def test_get_params_and_clone():
    clf = OptDivClassifier(method="divbo", budget=11, ensemble_size=7)
    params = clf.get_params()
    assert params["method"] == "divbo" and params["budget"] == 11 and params["ensemble_size"] == 7
    twin = clone(clf)
    assert twin.get_params() == params and twin is not clf
    twin.set_params(budget=3)
    assert twin.budget == 3 and clf.budget == 11


def test_explicit_validation_set_and_regressor():
    x, y = load_diabetes(return_X_y=True)
    reg = OptDivRegressor(space=tiny_space("regression"), budget=6, seed=0, refit=True)
    reg.fit(x[:250], y[:250], X_val=x[250:350], y_val=y[250:350])
    assert reg.score(x[350:], y[350:]) > 0.2
    assert reg.predict(x[350:]).shape == (len(x) - 350,)


def test_errors_are_clear():
    x, y = load_breast_cancer(return_X_y=True)
    with pytest.raises(NotFittedError):
        OptDivClassifier().predict(x)
    with pytest.raises(ValueError, match="both X_val and y_val"):
        OptDivClassifier(budget=1).fit(x, y, X_val=x)
    with pytest.raises(DataError, match=r"single class \(0\.0\)"):  # the value as a user wrote it
        OptDivClassifier(budget=1).fit(x[:50], np.zeros(50))
    with pytest.raises(ValueError, match=r"3 sample\(s\) \(shape=\(3, 30\)\) while a minimum of 5"):
        OptDivClassifier(budget=1).fit(x[:3], y[:3])
    with pytest.raises(DataError, match="not seen in training"):
        OptDivClassifier(budget=1, space=tiny_space("classification")).fit(
            x[:100], y[:100], X_val=x[100:130], y_val=np.full(30, 7)
        )


def test_cross_validation_uses_every_row_for_the_ensemble_and_the_members():
    x, y = load_breast_cancer(return_X_y=True)
    clf = OptDivClassifier(space=tiny_space("classification"), budget=3, seed=0, cv=3).fit(x[:150], y[:150])
    ok = [obs for obs in clf.result_.history if obs.status == "ok"]
    assert ok and all(len(obs.val_pred) == 150 for obs in ok)  # out-of-fold predictions for all rows given
    # by default each member is the bag of its three fold fits, the models its out-of-fold predictions came from
    assert {member["source"] for member in clf.members_} == {"saved"}
    assert clf.result_.info["final_model"]["refitted"] == 0
    assert clf.score(x[150:], y[150:]) > 0.8
    refit = OptDivClassifier(space=tiny_space("classification"), budget=3, seed=0, cv=3, fold_models="refit")
    refit.fit(x[:150], y[:150])
    assert {member["source"] for member in refit.members_} == {"refitted"}  # one fit on every row instead
    assert refit.score(x[150:], y[150:]) > 0.8


def test_leaderboard_and_figures_of_a_fitted_estimator(fitted_classifier, tmp_path):
    clf = fitted_classifier[0]
    board = clf.leaderboard()
    history = clf.history_
    assert len(board) == len(history) == 7
    assert sorted(board["index"]) == sorted(history["index"])
    assert dict(zip(board["index"], board["status"])) == dict(zip(history["index"], history["status"]))
    members = [m["index"] for m in clf.members_]
    weights = board.set_index("index")["weight"]
    assert weights.sum() == pytest.approx(1.0)
    for position, weight in zip(members, clf.weights_):
        assert weights[clf.result_.history[position].index] == pytest.approx(weight)
    written = clf.show(tmp_path)
    names = {path.name for path in written}
    assert {"progress.png", "algorithms.png"} <= names
    assert ("ensemble_diversity.png" in names) == (len(members) > 1)
    assert all(path.stat().st_size > 1000 for path in written)
    assert clf.plot_progress() is not None and clf.plot_algorithms() is not None
    with pytest.raises(NotFittedError):
        OptDivClassifier().leaderboard()


def test_a_member_whose_refit_fails_stays_fitted_on_the_training_rows(monkeypatch):
    """A pipeline that fitted on the training rows may fail on train+validation (a preprocessor overflowing on
    the added rows): the fit keeps the member as evaluated instead of losing the whole search."""
    import tiny_space as spaces

    x, y = load_breast_cancer(return_X_y=True)
    x_train, y_train, x_val, y_val = x[:200], y[:200], x[200:300], y[200:300]
    original = spaces.CountingTree.fit

    def fails_on_more_rows(self, X, y, sample_weight=None, check_input=True):  # only in this process: the
        if len(X) > len(x_train):  # evaluator's worker fits on the training rows as before
            raise ValueError("Input X contains infinity or a value too large for dtype('float32').")
        return original(self, X, y, sample_weight=sample_weight, check_input=check_input)

    monkeypatch.setattr(spaces.CountingTree, "fit", fails_on_more_rows)
    clf = OptDivClassifier(method="rs", space=spaces.timed_space(with_slow=False), budget=4, seed=1, refit=True)
    clf.fit(x_train, y_train, X_val=x_val, y_val=y_val)
    final = clf.result_.info["final_model"]
    assert len(final["refit_failed"]) == len(clf.members_) >= 1
    assert "float32" in final["refit_failed"][0]["error"]
    assert all(m["source"] == "saved" and m["rows"] == "train" for m in clf.members_)
    assert clf.score(x[300:], y[300:]) > 0.8


def test_members_whose_final_fit_fails_are_left_out_with_their_weight_rescaled():
    from types import SimpleNamespace

    from optdiv.final.fit import leave_out_failed_members

    result = SimpleNamespace(member_indices=[4, 7, 9], weights=np.array([0.5, 0.3, 0.2]), stacker=None)
    report = {}
    leave_out_failed_members(result, [(1, 7, "ValueError: overflow")], report)
    assert result.member_indices == [4, 9]
    np.testing.assert_allclose(result.weights, [0.5 / 0.7, 0.2 / 0.7])
    assert report["members_failed"] == [{"index": 7, "error": "ValueError: overflow"}]
    with pytest.raises(RuntimeError, match="could not be fitted"):  # nothing left to predict with
        leave_out_failed_members(SimpleNamespace(member_indices=[4], weights=np.array([1.0]), stacker=None),
                                  [(0, 4, "ValueError: overflow")], {})


def test_a_time_budget_alone_ends_the_estimators_search():
    # the default evaluation budget gives way to a time budget (a cap of 50 left most of a minute idle on small data)
    assert OptDivClassifier(time_budget=60).run_config().evaluations() is None
    assert OptDivRegressor(time_budget=60, budget=80).run_config().evaluations() == 80
    assert OptDivClassifier().run_config().evaluations() == 50


def test_under_a_time_budget_the_estimator_evaluates_one_configuration_per_core_at_once():
    from optdiv.evaluation.threads import available_cores

    x, y = load_breast_cancer(return_X_y=True)
    clf = OptDivClassifier(space=tiny_space("classification"), time_budget=20, n_jobs=2, seed=0)
    clf.fit(x[:300], y[:300])
    at_once = min(2, available_cores())
    assert clf.run_config().parallel_evaluations() == at_once
    if at_once > 1:
        assert clf.result_.info["parallel"]["workers"] == 2 and not clf.result_.info["parallel"]["lost"]
    indices = [obs.index for obs in clf.result_.history]
    assert len(set(indices)) == len(indices) >= 4  # each evaluation recorded once
    assert clf.score(x[300:], y[300:]) > 0.85
