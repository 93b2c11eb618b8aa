"""The OpenBox adapter beyond one sequential suggestion: sync / async batches with believers, ParallelOptimizer
runs on an ``openbox.space.Space``, constraints, regression, and the check of OpenBox's internals."""

from __future__ import annotations

import numpy as np
import pytest

import openbox_problem as problem

SEED = 3
N_INIT = 4


def _observation(config, result):
    from openbox import Observation

    return Observation(config, result["objectives"], constraints=result.get("constraints"),
                       extra_info=result["extra_info"])


def _key(config) -> tuple:
    return tuple(sorted(config.get_dictionary().items()))


def _batches(advisor, n: int, objective=problem.objective):
    """``n`` synchronous batches: suggest a batch, evaluate it, tell every result."""
    out = []
    for _ in range(n):
        configs = advisor.get_suggestions()
        out.append([c.get_dictionary() for c in configs])
        for config in configs:
            advisor.update_observation(_observation(config, objective(config)))
    return out


def _async(advisor, n: int, on_suggest=None):
    """``n`` asynchronous suggestions with two trials in flight: the oldest ends before the next suggestion."""
    running, out = [], []
    for _ in range(n):
        if len(running) == 2:
            done = running.pop(0)
            advisor.update_observation(_observation(done, problem.objective(done)))
        before = list(running)
        config = advisor.get_suggestion()
        if on_suggest is not None:
            on_suggest(config, before)
        running.append(config)
        out.append(config.get_dictionary())
    return out


def _batch_kwargs(tmp_path, task_id: str, **extra) -> dict:
    """The batch advisors' common arguments: two slots, OpenBox's initial design, one seed."""
    return dict(batch_size=2, initial_trials=N_INIT, random_state=SEED, output_dir=str(tmp_path / "logs"),
                task_id=task_id, **extra)


def _encode(configs, space):
    from optdiv.integrations.openbox import encode_configurations

    return encode_configurations(configs, space)


@pytest.mark.timeout(300)
def test_sync_default_batches_pick_each_slot_with_the_earlier_picks_as_believers(tmp_path):
    from openbox import SyncBatchAdvisor

    from optdiv.integrations.openbox import OptDivSyncBatchAdvisor

    y_val = problem.data()[3]
    kw = _batch_kwargs(tmp_path, "sync")
    n = 5
    plain = _batches(SyncBatchAdvisor(problem.make_space(), **kw), n)
    off = _batches(OptDivSyncBatchAdvisor(problem.make_space(), y_val=y_val, method=None, **kw), n)
    zero = OptDivSyncBatchAdvisor(problem.make_space(), y_val=y_val, method="optdivbo", selector_options={"tau": 0.0},
                                  **kw)
    zero_batches = _batches(zero, n)
    assert off == plain, "with the option off the batches must be OpenBox's"
    assert zero.selections and all(s["weight"] == 0.0 for s in zero.selections)
    assert zero_batches == plain, "with w = 0 every slot must keep OpenBox's pick (rand_prob included)"

    space = problem.make_space()
    on = OptDivSyncBatchAdvisor(space, y_val=y_val, method="optdivbo", rand_prob=0.0, **kw)
    seen, ranked_batches = set(), 0
    for _ in range(n):
        before = len(on.selections)
        configs = on.get_suggestions()
        keys = [_key(c) for c in configs]
        assert len(configs) == 2 and len(set(keys)) == 2, "a batch holds two different configurations"
        assert not set(keys) & seen, "a batch repeats an evaluated configuration"
        new = on.selections[before:]
        if new:
            ranked_batches += 1
            finished = len(on.stored_predictions()[0])
            assert [(s["slot"], s["pending"], s["observations"]) for s in new] == [
                (0, 0, finished), (1, 1, finished + 1)], "slot 2 must see slot 1's pick as a believer"
            assert [s["config"] for s in new] == [c.get_dictionary() for c in configs]
            # the believer the selector saw last is the first slot's configuration
            np.testing.assert_array_equal(on.selector.observations_[-1], _encode(configs[:1], space)[0])
        seen.update(keys)
        for config in configs:
            on.update_observation(_observation(config, problem.objective(config)))
    assert ranked_batches >= 3
    assert any(s["changed"] for s in on.selections), "diversity never moved a slot away from OpenBox's pick"


@pytest.mark.timeout(300)
def test_sync_median_imputation_keeps_openbox_imputation_and_adds_believers(tmp_path):
    from openbox import SyncBatchAdvisor

    from optdiv.integrations.openbox import OptDivSyncBatchAdvisor

    y_val = problem.data()[3]
    kw = _batch_kwargs(tmp_path, "median", batch_strategy="median_imputation")
    n = 4
    plain = _batches(SyncBatchAdvisor(problem.make_space(), **kw), n)
    zero = OptDivSyncBatchAdvisor(problem.make_space(), y_val=y_val, method="optdivbo", selector_options={"tau": 0.0},
                                  **kw)
    assert _batches(zero, n) == plain, "with w = 0 OpenBox's median-imputation batches must stand"

    space = problem.make_space()
    on = OptDivSyncBatchAdvisor(space, y_val=y_val, method="optdivbo", rand_prob=0.0, **kw)
    _batches(on, n - 1)
    before = len(on.selections)
    configs = on.get_suggestions()
    new = on.selections[before:]
    finished = len(on.stored_predictions()[0])
    assert len({_key(c) for c in configs}) == 2
    # OpenBox refits its surrogate per slot on the imputed history; the selector sees the imputed pick
    assert [(s["slot"], s["pending"], s["observations"]) for s in new] == [(0, 0, finished), (0, 1, finished + 1)]
    np.testing.assert_array_equal(on.selector.observations_[-1], _encode(configs[:1], space)[0])
    assert len(on.history) == (n - 1) * 2, "the imputed observations stay out of the advisor's history"


@pytest.mark.timeout(300)
def test_async_suggestions_see_the_running_configurations(tmp_path):
    from openbox import AsyncBatchAdvisor

    from optdiv.integrations.openbox import OptDivAsyncBatchAdvisor

    y_val = problem.data()[3]
    kw = _batch_kwargs(tmp_path, "async")
    n = 10
    plain = _async(AsyncBatchAdvisor(problem.make_space(), **kw), n)
    zero = OptDivAsyncBatchAdvisor(problem.make_space(), y_val=y_val, method="optdivbo", selector_options={"tau": 0.0},
                                   **kw)
    assert _async(zero, n) == plain, "with w = 0 the async suggestions must be OpenBox's"

    space = problem.make_space()
    on = OptDivAsyncBatchAdvisor(space, y_val=y_val, method="optdivbo", rand_prob=0.0, **kw)
    checked, done = [], [0]

    def check(config, running):
        new, done[0] = on.selections[done[0]:], len(on.selections)
        if not new:
            return  # OpenBox's initial design
        (record,) = new
        assert record["config"] == config.get_dictionary()
        assert _key(config) not in {_key(c) for c in running}
        assert record["pending"] == len(running) == 1
        assert record["observations"] == len(on.stored_predictions()[0]) + 1
        np.testing.assert_array_equal(on.selector.observations_[-1], _encode(running, space)[0])
        checked.append(record["t"])

    suggested = _async(on, n, on_suggest=check)
    assert len(checked) >= 3, "too few diversity-aware async suggestions"
    assert len({tuple(sorted(d.items())) for d in suggested}) == n


@pytest.mark.timeout(300)
@pytest.mark.parametrize("strategy", ["sync", "async"])
def test_parallel_optimizer_on_an_openbox_space_ends_with_an_ensemble(tmp_path, strategy):
    from openbox import AsyncBatchAdvisor, SyncBatchAdvisor
    from openbox import space as sp

    from optdiv.integrations.openbox import (
        OptDivAsyncBatchAdvisor,
        OptDivParallelOptimizer,
        OptDivSyncBatchAdvisor,
        final_ensemble,
    )

    y_val = problem.data()[3]
    space = problem.make_openbox_space()
    assert isinstance(space, sp.Space)
    common = dict(parallel_strategy=strategy, batch_size=2, max_runs=10, initial_runs=N_INIT, random_state=SEED,
                  logging_dir=str(tmp_path / "logs"), task_id=f"parallel_{strategy}")
    plain = OptDivParallelOptimizer(problem.worker_objective, space, **common)
    assert type(plain.config_advisor) is (SyncBatchAdvisor if strategy == "sync" else AsyncBatchAdvisor)

    opt = OptDivParallelOptimizer(problem.worker_objective, space,
                                  optdiv={"y_val": y_val, "metric": "error", "method": "optdivbo"},
                                  **common)
    advisor = opt.config_advisor
    assert type(advisor) is (OptDivSyncBatchAdvisor if strategy == "sync" else OptDivAsyncBatchAdvisor)
    history = opt.run()
    assert len(history) == 10
    assert len({_key(c) for c in history.configurations}) == 10
    encoded = _encode(history.configurations, space)
    assert encoded.shape == (10, 6) and np.all((encoded == -1) | ((encoded >= 0) & (encoded <= 1)))
    assert advisor.selections, "the diversity option never ran"
    assert any(s["pending"] >= 1 for s in advisor.selections), "no suggestion saw a configuration in flight"
    rows, _ = advisor.stored_predictions()
    assert rows == [i for i, state in enumerate(history.trial_states) if state == 0]
    members = final_ensemble(advisor)
    assert members.indices and set(members.indices) <= set(rows)
    assert members.val_prediction.shape == (len(y_val), 2)


@pytest.mark.timeout(300)
def test_constraints_reach_openbox_and_infeasible_runs_stay_out(tmp_path):
    from openbox import Advisor

    from optdiv.integrations.openbox import OptDivAdvisor, final_ensemble

    y_val = problem.data()[3]
    kw = dict(num_constraints=1, initial_trials=N_INIT, random_state=SEED, output_dir=str(tmp_path / "logs"),
              task_id="constrained")
    n = 12

    def ask_tell(advisor):
        out = []
        for _ in range(n):
            config = advisor.get_suggestion()
            advisor.update_observation(_observation(config, problem.constrained_objective(config)))
            out.append(config.get_dictionary())
        return out

    plain = ask_tell(Advisor(problem.make_space(), **kw))
    zero = OptDivAdvisor(problem.make_space(), y_val=y_val, method="optdivbo", selector_options={"tau": 0.0}, **kw)
    assert ask_tell(zero) == plain, "with w = 0 the order must be OpenBox's constrained EI order"
    assert zero.selections

    on = OptDivAdvisor(problem.make_space(), y_val=y_val, method="optdivbo", **kw)
    assert on.acq_type == "eic" and len(on.constraint_models) == 1, "OpenBox's constrained EI must run"
    ask_tell(on)
    constraints = on.history.get_constraints(transform="none")
    assert constraints.shape == (n, 1)
    infeasible = set(np.flatnonzero(constraints[:, 0] > 0).tolist())
    assert infeasible, "the test needs infeasible runs"
    rows, _ = on.stored_predictions()
    assert rows and not set(rows) & infeasible
    assert on.selections and all(not set(s["pool"]) & infeasible for s in on.selections)
    assert not set(final_ensemble(on).indices) & infeasible


@pytest.mark.timeout(300)
def test_regression_through_the_advisor(tmp_path):
    from optdiv.core.metrics import mean_loss
    from optdiv.integrations.openbox import OptDivAdvisor, OptDivOptimizer, final_ensemble

    y_val = problem.regression_data()[3]
    opt = OptDivOptimizer(problem.regression_objective, problem.make_regression_space(), max_runs=12,
                          initial_runs=N_INIT, random_state=SEED, logging_dir=str(tmp_path / "logs"),
                          task_id="regression", optdiv={"y_val": y_val, "metric": "mse", "method": "optdivbo"})
    history = opt.run()
    advisor = opt.config_advisor
    assert (advisor.task, advisor.selector.metric) == ("regression", "mse")
    rows, preds = advisor.stored_predictions()
    assert len(rows) == len(history) and preds.shape == (len(history), len(y_val))
    assert advisor.selections and any(s["changed"] for s in advisor.selections)
    members = final_ensemble(advisor)
    assert members.val_prediction.shape == y_val.shape
    assert members.val_loss == pytest.approx(float(np.mean((members.val_prediction - y_val) ** 2)), rel=1e-6)
    singles = [mean_loss(p, y_val, "mse") for p in preds]
    assert members.val_loss <= max(singles)
    from optdiv.final.choice import REGRESSION_BAGS, choose_members
    from optdiv.integrations.openbox.ensemble import _Run

    picked, weights = choose_members([_Run("ok", p, 0.0) for p in preds], y_val, "mse", bags=REGRESSION_BAGS)
    assert members.indices == [rows[j] for j in picked], "regression's final selection is the bagged one"
    np.testing.assert_allclose(members.weights, weights)
    X_train, y_train, X_val, _, X_test, _ = problem.regression_data()
    model = members.refit(lambda c: problem.build_regressor(c.get_dictionary()).fit(
        np.vstack([X_train, X_val]), np.concatenate([y_train, y_val])))
    assert model.predict(X_test).shape == (len(X_test),)
    with pytest.raises(AttributeError, match="classification"):
        model.predict_proba(X_test)

    mae = OptDivAdvisor(problem.make_regression_space(), y_val=y_val, method="optdivbo", metric="mae",
                        initial_trials=N_INIT,
                        random_state=SEED, output_dir=str(tmp_path / "logs"), task_id="regression_mae")
    for _ in range(8):
        config = mae.get_suggestion()
        mae.update_observation(_observation(config, problem.regression_objective(config)))
    assert (mae.task, mae.selector.metric) == ("regression", "mae")
    assert mae.selections and mae.selector.pool_ is not None
    assert final_ensemble(mae).val_loss == pytest.approx(
        mean_loss(final_ensemble(mae).val_prediction, y_val, "mae"), rel=1e-6)


def test_changed_openbox_internals_fail_loudly(tmp_path, monkeypatch):
    from openbox.core.generic_advisor import Advisor
    from openbox.core.sync_batch_advisor import SyncBatchAdvisor

    from optdiv.integrations.openbox import (
        HostVersionError,
        OptDivAdvisor,
        OptDivParallelOptimizer,
        check_host,
        host_problems,
    )

    assert host_problems() == []
    check_host()
    y_val = problem.data()[3]
    space = problem.make_space()

    with monkeypatch.context() as m:
        m.delattr(Advisor, "_get_bo_candidates")
        with pytest.raises(HostVersionError, match=r"(?s)written for OpenBox 0\.9\.0.*_get_bo_candidates"):
            OptDivAdvisor(space, y_val=y_val, method="optdivbo", output_dir=None)
        OptDivAdvisor(space, y_val=y_val, method=None, output_dir=None)  # off: nothing of OpenBox is relied on

    with monkeypatch.context() as m:
        def get_suggestions(self, batch_size=None, history=None):  # a batch loop that skips the candidate list
            return self.sample_random_configs(self.config_space, batch_size or self.batch_size)

        m.setattr(SyncBatchAdvisor, "get_suggestions", get_suggestions)
        with pytest.raises(HostVersionError, match="SyncBatchAdvisor.get_suggestions no longer uses "
                                                   "_get_bo_candidates"):
            OptDivParallelOptimizer(problem.objective, space, parallel_strategy="sync", batch_size=2,
                                    logging_dir=str(tmp_path / "logs"), optdiv={"y_val": y_val, "method": "optdivbo"})

    # at run time: an acquisition maximiser that returns something else stops the search
    advisor = OptDivAdvisor(space, y_val=y_val, method="optdivbo", initial_trials=N_INIT, rand_prob=0.0,
                            random_state=SEED,
                            output_dir=None)
    for _ in range(N_INIT):
        config = advisor.get_suggestion()
        advisor.update_observation(_observation(config, problem.objective(config)))
    maximize = advisor.acq_optimizer.maximize
    monkeypatch.setattr(advisor.acq_optimizer, "maximize", lambda **kw: [(1.0, c) for c in maximize(**kw)])
    with pytest.raises(HostVersionError, match="not a list of Configuration"):
        advisor.get_suggestion()


def test_batch_strategies_that_bypass_the_candidate_list_are_refused(tmp_path):
    from optdiv.integrations.openbox import OptDivAsyncBatchAdvisor, OptDivParallelOptimizer, OptDivSyncBatchAdvisor

    y_val = problem.data()[3]
    space = problem.make_space()
    for cls, strategy in ((OptDivSyncBatchAdvisor, "local_penalization"),
                          (OptDivSyncBatchAdvisor, "reoptimization"),
                          (OptDivAsyncBatchAdvisor, "local_penalization")):
        with pytest.raises(ValueError, match=f"batch_strategy='{strategy}'"):
            cls(space, y_val=y_val, method="optdivbo", batch_strategy=strategy, output_dir=None)
        cls(space, y_val=y_val, method=None, batch_strategy=strategy, output_dir=None)  # off: OpenBox's own
    with pytest.raises(TypeError, match="OptDivAsyncBatchAdvisor"):
        OptDivParallelOptimizer(problem.objective, space, parallel_strategy="async", batch_size=2,
                                logging_dir=str(tmp_path / "logs"),
                                optdiv=OptDivSyncBatchAdvisor(space, y_val=y_val, method="optdivbo", output_dir=None))
