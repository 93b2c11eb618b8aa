"""The OpenBox adapter on the real OpenBox 0.9 loop (Advisor ask/tell and Optimizer), breast_cancer."""

from __future__ import annotations

import math

import numpy as np
import pytest

import openbox_problem as problem

SEED = 3
N_INIT = 5


def _advisor(cls, tmp_path, **kwargs):
    return cls(problem.make_space(), initial_trials=N_INIT, random_state=SEED,
               output_dir=str(tmp_path / "logs"), task_id="optdiv_test", **kwargs)


def _ask_tell(advisor, n: int, fail=None):
    """Run ``n`` ask/tell steps; ``fail(config)`` True records the trial as FAILED (no predictions)."""
    from openbox import Observation
    from openbox.utils.constants import FAILED

    configs = []
    for _ in range(n):
        config = advisor.get_suggestion()
        if fail is not None and fail(config):
            obs = Observation(config, [math.inf], trial_state=FAILED)
        else:
            loss, val, _ = problem.evaluate(config)
            obs = Observation(config, [loss], extra_info={"val_pred": val})
        advisor.update_observation(obs)
        configs.append(config.get_dictionary())
    return configs


@pytest.mark.timeout(300)
def test_option_changes_suggestions_only_once_the_weight_is_positive(tmp_path):
    from openbox import Advisor

    from optdiv.integrations.openbox import OptDivAdvisor

    y_val = problem.data()[3]
    n = 14
    plain = _ask_tell(_advisor(Advisor, tmp_path), n)
    off = _ask_tell(_advisor(OptDivAdvisor, tmp_path, y_val=y_val, method=None), n)
    default = _advisor(OptDivAdvisor, tmp_path, y_val=y_val)
    default_configs = _ask_tell(default, n)
    # tau = 0 makes OptDivBO's weight 2 (sigmoid(0) - 0.5) = 0 at every step
    zero = _advisor(OptDivAdvisor, tmp_path, y_val=y_val, method="optdivbo", selector_options={"tau": 0.0})
    zero_configs = _ask_tell(zero, n)
    on = _advisor(OptDivAdvisor, tmp_path, y_val=y_val, method="optdivbo")
    on_configs = _ask_tell(on, n)

    assert off == plain, "with the option off the advisor must suggest exactly what OpenBox's Advisor does"
    assert default.method is None and default_configs == plain, "the re-ranking is off unless asked for"
    assert default.stored_predictions()[0] == list(range(n)), "off, it still keeps the predictions for the final model"
    assert zero.selections and all(s["weight"] == 0.0 for s in zero.selections)
    assert zero_configs == plain, "with w = 0 the re-ranking must keep OpenBox's choice"
    assert on_configs[:N_INIT] == plain[:N_INIT], "the initial design is OpenBox's"
    assert on.selections and all(s["weight"] > 0 for s in on.selections)
    assert any(s["changed"] for s in on.selections), "w > 0 never moved OpenBox's choice"
    first = next(s["t"] for s in on.selections if s["changed"])
    assert on_configs[:first] == plain[:first]
    assert on_configs[first] != plain[first]


@pytest.mark.timeout(300)
def test_pool_follows_the_history(tmp_path):
    from optdiv.core.pool import build_pool
    from optdiv.core.selector import pool_loss
    from optdiv.integrations.openbox import OptDivAdvisor

    from openbox import Observation
    from openbox.utils.constants import FAILED

    y_val = problem.data()[3]
    advisor = _advisor(OptDivAdvisor, tmp_path, y_val=y_val, method="divbo", selector_options={"ensemble_size": 5})
    pools, failed, expected = [], set(), None
    for step in range(16):
        before = len(advisor.selections)
        config = advisor.get_suggestion()
        if len(advisor.selections) > before:  # a diversity-aware step: its pool is the expected one
            assert expected is not None
            recorded = advisor.selections[-1]["pool"]
            assert recorded == expected[0]
            np.testing.assert_allclose(advisor.selector.pool_.weights, expected[1])
            assert not set(recorded) & failed
            pools.append(tuple(recorded))
        if step % 4 == 1:  # every fourth trial fails
            advisor.update_observation(Observation(config, [math.inf], trial_state=FAILED))
            failed.add(step)
        else:
            loss, val, _ = problem.evaluate(config)
            advisor.update_observation(Observation(config, [loss], extra_info={"val_pred": val}))
        # the pool the next suggestion must use: Caruana over every successful trial so far
        rows, preds = advisor.stored_predictions()
        assert rows == [i for i in range(step + 1) if i not in failed]
        pool = build_pool(preds, y_val, pool_loss("error", True), size=5, builder="caruana",
                          seed=advisor.selector.seed)
        expected = ([rows[i] for i in pool.indices], pool.weights)
    assert len(pools) >= 4, "too few diversity-aware steps to follow the pool"
    assert len(set(pools)) > 1, "the pool never changed while the history grew"


@pytest.mark.timeout(300)
def test_failed_trials_in_the_optimizer_loop(tmp_path):
    from openbox import Advisor

    from optdiv.integrations.openbox import OptDivAdvisor, OptDivOptimizer, final_ensemble

    y_val = problem.data()[3]

    def objective(config):
        values = config.get_dictionary()
        if values["algorithm"] == "logreg":
            raise RuntimeError("this model family is broken")
        out = problem.objective(config)
        if values["algorithm"] == "knn" and values["n_neighbors"] > 30:
            out["extra_info"]["val_pred"] = np.full_like(out["extra_info"]["val_pred"], np.nan)
        return out

    common = dict(max_runs=16, initial_runs=N_INIT, random_state=SEED, logging_dir=str(tmp_path / "logs"),
                  task_id="optdiv_failed")
    plain = OptDivOptimizer(objective, problem.make_space(), **common)
    assert type(plain.config_advisor) is Advisor, "optdiv=None must leave OpenBox's own advisor"

    opt = OptDivOptimizer(objective, problem.make_space(),
                          optdiv={"y_val": y_val, "metric": "error", "method": "optdivbo"}, **common)
    assert isinstance(opt.config_advisor, OptDivAdvisor)
    history = opt.run()
    advisor = opt.config_advisor
    assert len(history) == 16
    states = np.array(history.trial_states)
    success = np.flatnonzero(states == 0)
    assert (states != 0).any(), "the test needs failed trials"
    rows, preds = advisor.stored_predictions()
    assert rows == list(success)
    assert np.all(np.isfinite(preds))
    for i, obs in enumerate(history.observations):
        if obs.config.get_dictionary()["algorithm"] == "logreg" or (
                obs.config.get_dictionary().get("n_neighbors", 0) > 30):
            assert obs.trial_state != 0 and "optdiv_pred" not in obs.extra_info
    assert advisor.selections, "the diversity option never ran"
    for record in advisor.selections:
        assert set(record["pool"]) <= set(success)
    members = final_ensemble(advisor)
    assert set(members.indices) <= set(success)
    history.save_json(str(tmp_path / "history.json"))  # the predictions left extra_info: still JSON


@pytest.mark.timeout(300)
def test_save_and_load_resume_the_same_run(tmp_path):
    from optdiv.integrations.openbox import OptDivAdvisor, OptDivOptimizer

    y_val = problem.data()[3]
    common = dict(initial_runs=N_INIT, random_state=SEED, logging_dir=str(tmp_path / "logs"), task_id="resume")
    optdiv = {"y_val": y_val, "metric": "error", "method": "optdivbo"}

    whole = OptDivOptimizer(problem.objective, problem.make_space(), optdiv=optdiv, max_runs=13, **common)
    expected = [c.get_dictionary() for c in whole.run().configurations]

    first = OptDivOptimizer(problem.objective, problem.make_space(), optdiv=optdiv, max_runs=8, **common)
    first.run()
    path = tmp_path / "state" / "advisor.pkl"
    first.config_advisor.save(path)
    del first

    loaded = OptDivAdvisor.load(path)
    assert len(loaded.history) == 8 and len(loaded.stored_predictions()[0]) == 8
    second = OptDivOptimizer(problem.objective, problem.make_space(), optdiv=loaded, max_runs=13, **common)
    resumed = [c.get_dictionary() for c in second.run().configurations]
    assert len(resumed) == 13
    assert resumed == expected
    assert any(s["changed"] for s in second.config_advisor.selections), "resume must cover diversity steps"


@pytest.mark.timeout(300)
def test_final_ensemble_builders(tmp_path):
    from optdiv.core.metrics import mean_loss
    from optdiv.integrations.openbox import OptDivAdvisor, final_ensemble

    y_val = problem.data()[3]
    advisor = _advisor(OptDivAdvisor, tmp_path, y_val=None, method=None)
    _ask_tell(advisor, 10, fail=lambda c: c.get_dictionary()["algorithm"] == "logreg")
    with pytest.raises(ValueError, match="y_val"):
        final_ensemble(advisor)
    rows, preds = advisor.stored_predictions()
    singles = [mean_loss(p, y_val, "error") for p in preds]
    for builder in ("caruana", "agnostic_bayes"):
        members = final_ensemble(advisor, builder=builder, y_val=y_val)
        assert set(members.indices) <= set(rows)
        assert members.weights.sum() == pytest.approx(1.0) and np.all(members.weights > 0)
        member_preds = [preds[rows.index(i)] for i in members.indices]
        np.testing.assert_allclose(members.predict(member_preds), members.val_prediction)
        assert members.val_loss == pytest.approx(mean_loss(members.val_prediction, y_val, "error"))
        assert [c.get_dictionary() for c in members.configs] == [
            advisor.history.observations[i].config.get_dictionary() for i in members.indices]
    caruana = final_ensemble(advisor, y_val=y_val)
    assert caruana.val_loss <= min(singles) + 1e-12 or len(caruana.indices) > 1


@pytest.mark.timeout(300)
def test_final_ensemble_selects_as_the_engine_does(tmp_path):
    from optdiv.final.choice import choose_members
    from optdiv.integrations.openbox import OptDivAdvisor, final_ensemble
    from optdiv.integrations.openbox.ensemble import _Run

    y_val = problem.data()[3]
    advisor = _advisor(OptDivAdvisor, tmp_path, y_val=y_val, method=None)
    _ask_tell(advisor, 12)
    rows, preds = advisor.stored_predictions()
    runs = [_Run("ok", p, 0.0) for p in preds]
    for options, selection, guard in (({}, "log_loss", None), ({"selection_guard": 1.645}, "log_loss", 1.645),
                                      ({"selection_guard": 0.0}, "log_loss", 0.0),
                                      ({"ensemble_loss": None, "selection_guard": 1.645}, None, None),
                                      ({"ensemble_loss": "brier", "selection_guard": 1.645}, "brier", 1.645)):
        members = final_ensemble(advisor, **options)
        picked, weights = choose_members(runs, y_val, "error", selection_loss=selection, guard=guard)
        assert members.indices == [rows[j] for j in picked]
        np.testing.assert_allclose(members.weights, weights)
        assert members.task == "classification"
        assert ("guard" in members.info) == (guard is not None and selection is not None)
    bagged = final_ensemble(advisor, ensemble_bags=5)
    picked, weights = choose_members(runs, y_val, "error", selection_loss="log_loss", bags=5)
    np.testing.assert_allclose(bagged.weights, weights)
    for bad, match in (({"ensemble_loss": "mse"}, "does not fit a classification task"),
                       ({"ensemble_loss": "nope"}, "ensemble_loss must be"), ({"ensemble_bags": -1}, "ensemble_bags"),
                       ({"ensemble_bags": "many"}, "ensemble_bags"), ({"size": 0}, "ensemble_size"),
                       ({"selection_guard": -1.0}, "selection_guard"), ({"selection_guard": "on"}, "selection_guard")):
        with pytest.raises(ValueError, match=match):
            final_ensemble(advisor, **bad)


@pytest.mark.timeout(300)
def test_refit_fits_every_member_again_and_predicts_with_the_weights(tmp_path):
    from optdiv.integrations.openbox import FittedEnsemble, OptDivAdvisor, final_ensemble

    X_train, y_train, X_val, y_val, X_test, _ = problem.data()
    X_all, y_all = np.vstack([X_train, X_val]), np.concatenate([y_train, y_val])
    advisor = _advisor(OptDivAdvisor, tmp_path, y_val=y_val, method=None)
    _ask_tell(advisor, 12)
    members = final_ensemble(advisor)
    assert len(members.configs) >= 2, "the test needs an ensemble of several members"
    fitted_on = []

    def fit(config):
        model = problem.build(config.get_dictionary()).fit(X_all, y_all)
        fitted_on.append(len(y_all))
        return model

    model = members.refit(fit)
    assert isinstance(model, FittedEnsemble) and model.indices == members.indices
    assert fitted_on == [len(y_all)] * len(members.configs)
    expected = sum(w * problem.build(c.get_dictionary()).fit(X_all, y_all).predict_proba(X_test)
                   for w, c in zip(members.weights, members.configs))
    np.testing.assert_allclose(model.predict_proba(X_test), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(model.predict(X_test), np.argmax(expected, axis=1))

    broken = members.configs[0]

    def fit_but_one(config):
        if config is broken:
            raise ValueError("cannot fit this one")
        return fit(config)

    with pytest.warns(RuntimeWarning, match="cannot fit this one"):
        partial = members.refit(fit_but_one)
    assert partial.indices == members.indices[1:]
    np.testing.assert_allclose(partial.weights, members.weights[1:] / members.weights[1:].sum())

    def fit_none(config):
        raise ValueError("nothing fits")

    with pytest.raises(RuntimeError, match="nothing fits"):
        members.refit(fit_none)


def test_bad_input_is_reported(tmp_path):
    from openbox import Observation

    from optdiv.integrations.openbox import OptDivAdvisor, OptDivOptimizer

    y_val = problem.data()[3]
    space = problem.make_space()
    with pytest.raises(ValueError, match="unknown method"):
        OptDivAdvisor(space, y_val=y_val, method="greedy", output_dir=None)
    with pytest.raises(ValueError, match="needs y_val"):
        OptDivAdvisor(space, method="divbo", output_dir=None)
    with pytest.raises(ValueError, match="class indices"):
        OptDivAdvisor(space, y_val=y_val - 0.5, output_dir=None)
    with pytest.raises(ValueError, match="does not fit"):
        OptDivAdvisor(space, y_val=y_val, method="optdivbo", metric="mse", task="classification", output_dir=None)
    with pytest.raises(ValueError, match="one objective"):
        OptDivAdvisor(space, y_val=y_val, method="optdivbo", num_objectives=2, ref_point=[1, 1], output_dir=None)

    advisor = OptDivAdvisor(space, y_val=y_val, method="optdivbo", random_state=0, output_dir=None)
    config = advisor.get_suggestion()
    with pytest.raises(ValueError, match="val_pred"):
        advisor.update_observation(Observation(config, [0.1]))
    plain = OptDivAdvisor(space, y_val=y_val, random_state=0, output_dir=None)
    with pytest.raises(ValueError, match=r"val_pred.*y_val is given \(the final model\)"):
        plain.update_observation(Observation(plain.get_suggestion(), [0.1]))
    with pytest.raises(ValueError, match=r"\(rows, classes\)"):
        advisor.update_observation(Observation(config, [0.1], extra_info={"val_pred": np.zeros(len(y_val))}))
    with pytest.raises(ValueError, match="rows"):
        advisor.update_observation(Observation(config, [0.1], extra_info={"val_pred": np.zeros((3, 2))}))
    assert len(advisor.history) == 0, "a rejected observation must not enter the history"

    with pytest.raises(ValueError, match="advisor_type"):
        OptDivOptimizer(problem.objective, space, optdiv={"y_val": y_val, "method": "optdivbo"}, advisor_type="tpe",
                        logging_dir=str(tmp_path / "logs"))
    with pytest.raises(TypeError, match="optdiv must be"):
        OptDivOptimizer(problem.objective, space, optdiv="optdivbo", logging_dir=str(tmp_path / "logs"))
    not_a_state = tmp_path / "x.pkl"
    import pickle

    not_a_state.write_bytes(pickle.dumps({"format": 0}))
    with pytest.raises(ValueError, match="not an OptDivAdvisor state"):
        OptDivAdvisor.load(not_a_state)


def test_metric_names_follow_the_metric_vocabulary():
    """Host metric names set the task, the pool loss and the diversity kind as in the other adapters."""
    from optdiv.integrations.openbox import OptDivAdvisor

    space = problem.make_space()
    y_cls, y_reg = problem.data()[3], np.linspace(0.0, 1.0, 20)
    cases = [("roc_auc", None, y_cls, "classification", "error", "zero_one"),
             ("brier", None, y_cls, "classification", "brier", "brier"),
             ("r2", None, y_reg, "regression", "mse", "mse"),
             ("median_absolute_error", None, y_reg, "regression", "mae", "mae"),
             ("my_score", "regression", y_reg, "regression", "mse", "mse")]
    for metric, task, y_val, want_task, loss, kind in cases:
        advisor = OptDivAdvisor(space, y_val=y_val, method="optdivbo", metric=metric, task=task, output_dir=None)
        assert (advisor.task, advisor.selector.metric, advisor.selector.kind) == (want_task, loss, kind), metric
    with pytest.raises(ValueError, match="does not fit a regression task"):
        OptDivAdvisor(space, y_val=y_reg, metric="roc_auc", task="regression", output_dir=None)
