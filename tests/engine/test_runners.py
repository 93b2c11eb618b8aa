"""The runner interface and the one search loop over it: a fake runner with two slots that loses evaluations,
the sequential runner, and a sequential run stopped between issuing an evaluation and recording it."""

from __future__ import annotations

import inspect
import json
import zlib

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from tiny_space import tiny_space

from optdiv.budget import DurationPredictor
from optdiv.data import from_frame, split
from optdiv.engine.loop import fitting_configuration, search_loop, untried_algorithms
from optdiv.engine.search import search
from optdiv.evaluation.evaluator import Evaluator
from optdiv.evaluation.interface import EvaluatorInterface
from optdiv.evaluation.observation import PENDING, Observation, algorithm_of
from optdiv.execution.factory import make_runner
from optdiv.execution.runner import Done, Runner
from optdiv.execution.sequential import SequentialRunner
from optdiv.spaces import SearchSpace
from optdiv.storage.files import RunStore
from optdiv.storage.layout import ISSUED_NAME
from optdiv.storage.memory import MemoryStore
from optdiv.strategies.methods import get_method
from optdiv.strategies.registry import make_strategy

FAST = {"n_random": 150, "n_local": 10, "n_trees": 20}
Y_VAL = np.arange(20) % 2


@pytest.fixture(scope="module")
def cls_splits():
    frame = load_breast_cancer(as_frame=True).frame.sample(300, random_state=0)
    return split(from_frame(frame, target="target", name="breast_cancer"), seed=0)


def _key(config):
    return tuple(sorted((k, repr(v)) for k, v in config.items()))


def _observation(config, index):
    """A made-up successful evaluation whose loss and predictions depend on the configuration only."""
    rng = np.random.default_rng(zlib.crc32(repr(_key(config)).encode()))
    pred = rng.dirichlet([1.0, 1.0], size=len(Y_VAL)).astype(np.float32)
    loss = float(np.mean(pred.argmax(1) != Y_VAL))
    return Observation(dict(config), "ok", loss, fit_seconds=0.01, val_pred=pred, index=index,
                       algorithm=algorithm_of(config))


class FakeRunner(Runner):
    """Two slots; ``wait`` ends the latest submitted evaluation first (out of index order), and loses the
    attempts listed in ``lose`` (index -> how many times)."""

    def __init__(self, lose=None, capacity=2):
        self.slots, self.lose = capacity, dict(lose or {})
        self.queue, self.submitted, self.opened, self.closed = [], [], False, False
        self.limits = []

    @property
    def capacity(self):
        return self.slots

    @property
    def running(self):
        return len(self.queue)

    def open(self):
        self.opened = True

    def submit(self, index, config, time_limit=None):
        assert self.opened and not self.closed
        self.queue.append((index, config))
        self.submitted.append((index, dict(config)))
        self.limits.append(time_limit)

    def wait(self, give_up=None):
        index, config = self.queue.pop()
        if self.lose.get(index, 0) > 0:
            self.lose[index] -= 1
            return [Done(index, config, None, 0.5, lost="worker killed")]
        return [Done(index, config, _observation(config, index), 0.01)]

    def close(self):
        self.closed = True

    def describe(self):
        return {"workers": self.slots, "startup_seconds": 0.0}


def _loop(runner, store=None, budget=8, history=None, method="optdivbo"):
    space = tiny_space("classification")
    strategy = make_strategy(get_method(method), space, "error", seed=1, budget=budget, optimizer_options=FAST)
    calls = {"progress": [], "finished": []}
    history = [] if history is None else history
    result = search_loop(strategy, runner, history, y_val=Y_VAL, space=space, seed=1, loss="error",
                         budget=budget, predictor=DurationPredictor(history),
                         store=MemoryStore() if store is None else store,
                         progress=lambda n, b, obs: calls["progress"].append((n, obs.index)),
                         on_finished=lambda done, ensemble: calls["finished"].append([o.index for o in done]))
    return result, calls


def test_the_loop_over_a_runner_with_two_slots_requeues_once_then_records_a_failure(tmp_path):
    store = RunStore(tmp_path / "run")
    runner = FakeRunner(lose={2: 1, 5: 2})
    result, calls = _loop(runner, store)
    history = result.history
    assert [o.index for o in history] == list(range(8))  # in index order though they ended out of it
    assert [o.index for o in store.load()] == list(range(8))
    assert runner.opened and runner.closed and runner.running == 0
    assert [i for i, _ in runner.submitted].count(2) == 2 and [i for i, _ in runner.submitted].count(5) == 2
    assert history[2].status == "ok"  # lost once: re-queued with its configuration, then evaluated
    assert history[5].status == "failed" and "lost 2 times" in history[5].error
    assert "worker killed" in history[5].error
    assert history[5].val_loss == 1.0 and history[5].config == store.issued.load()[5]["config"]
    assert result.parallel == {"workers": 2, "requeued": [2, 5], "lost": [5], "reissued": [], "startup_seconds": 0.0,
                               "stopped": None}
    assert len(result.suggest_seconds) == 8 and result.stopped is None
    assert [n for n, _ in calls["progress"]] == list(range(1, 9))
    assert all(done == sorted(done) for done in calls["finished"])
    issued = store.issued.load()
    assert sorted(issued) == list(range(8))
    assert any(record["pending"] for record in issued.values())  # suggested beside a running evaluation
    assert len({_key(o.config) for o in history}) == 8  # a pending configuration is never suggested again
    assert all(o.status != PENDING for o in history)


def test_a_resumed_loop_resubmits_what_was_issued_and_not_recorded_before_suggesting(tmp_path):
    store = RunStore(tmp_path / "run")
    first, _ = _loop(FakeRunner(), store, budget=4)
    planted = {"algorithm": "tree", "depth": 7, "leaf": 3, "task": "classification"}
    store.issued.append(4, planted, [])  # issued, then the driver died before the result came
    store.issued.append(5, first.history[0].config, [4])  # even a configuration seen before: it was issued
    runner = FakeRunner()
    resumed, _ = _loop(runner, RunStore(tmp_path / "run"), budget=7, history=store.load())
    assert [i for i, _ in runner.submitted[:2]] == [4, 5]  # re-issued first, before any suggestion
    assert runner.submitted[0][1] == planted
    assert [o.index for o in resumed.history] == list(range(7))
    assert resumed.history[4].config == planted and resumed.history[5].config == first.history[0].config
    assert resumed.parallel["reissued"] == [4, 5] and len(resumed.suggest_seconds) == 1


def test_with_two_slots_a_suggestion_that_does_not_fit_the_time_left_is_replaced_by_one_that_does():
    space = tiny_space("classification")
    strategy = make_strategy(get_method("rs"), space, "error", seed=2, budget=8)
    predictor = DurationPredictor()
    predictor.observe("tree", 100.0)  # far beyond the 5 s left
    predictor.observe("linear", 0.1)
    runner = FakeRunner()
    result = search_loop(strategy, runner, [], y_val=Y_VAL, space=space, seed=2, loss="error", budget=8,
                         predictor=predictor, store=MemoryStore(), time_left=lambda: 5.0)
    assert [o.index for o in result.history] == list(range(8)) and result.stopped is None
    assert all(o.algorithm == "linear" for o in result.history)  # random search draws trees too: each replaced
    assert result.fill_ins > 0 and all(limit == 5.0 for limit in runner.limits)  # each capped at the time left


def test_the_fill_in_near_the_deadline_never_draws_a_start_only_algorithm():
    tiny = tiny_space("classification")
    space = SearchSpace(tiny.name, tiny.task, tiny.configspace, tiny._builder, algorithm_key="algorithm",
                        start_only=["tree"])
    assert untried_algorithms(space, DurationPredictor()) == ["linear"]
    assert untried_algorithms(tiny, DurationPredictor()) == ["linear", "tree"]
    predictor = DurationPredictor()
    predictor.observe("tree", 0.1)  # the fastest, and seen to fit
    predictor.observe("linear", 2.0)
    drawn = [fitting_configuration(space, predictor, 5.0, [], seed) for seed in range(20)]
    assert all(config["algorithm"] == "linear" for config in drawn)
    assert fitting_configuration(space, predictor, 1.0, [], 0) is None  # only the start-only one would fit
    assert fitting_configuration(tiny, predictor, 1.0, [], 0)["algorithm"] == "tree"


def test_an_evaluation_is_capped_at_the_run_left_which_may_reach_into_the_optional_reserve():
    space = tiny_space("classification")
    strategy = make_strategy(get_method("rs"), space, "error", seed=2, budget=4)
    predictor = DurationPredictor()
    predictor.observe("tree", 1.0)
    predictor.observe("linear", 1.0)
    runner = FakeRunner()
    result = search_loop(strategy, runner, [], y_val=Y_VAL, space=space, seed=2, loss="error", budget=4,
                         predictor=predictor, store=MemoryStore(), time_left=lambda: 5.0,
                         run_left=lambda: 9.0)
    assert len(result.history) == 4 and runner.limits == [9.0] * 4  # issued on time_left, capped at run_left
    runner = FakeRunner()
    strategy = make_strategy(get_method("rs"), space, "error", seed=2, budget=4)
    result = search_loop(strategy, runner, [], y_val=Y_VAL, space=space, seed=2, loss="error", budget=4,
                         predictor=DurationPredictor(), store=MemoryStore(), time_left=lambda: 0.0,
                         run_left=lambda: 9.0)
    assert not runner.submitted and result.stopped.startswith("time budget")  # nothing starts once time_left
    # is spent, though a running evaluation could still use run_left


def test_when_nothing_fits_the_loop_lets_the_final_models_work_run_ahead_and_goes_on_with_the_time_it_gives_back():
    space = tiny_space("classification")
    predictor = DurationPredictor()
    predictor.observe("tree", 1.0)
    predictor.observe("linear", 1.0)
    clock = {"left": 0.5, "ahead": []}  # seconds the search may still use: too few for any evaluation

    def ahead(done):  # the refits run ahead: the first gives 10 s back, then nothing is left to do
        clock["ahead"].append(len(done))
        if len(clock["ahead"]) > 1:
            return False
        clock["left"] = 10.0
        return True

    def run_one():  # each evaluation takes 3 s of the time left
        clock["left"] -= 3.0
        return [Done(done.index, done.config, done.observation, 3.0) for done in FakeRunner.wait(runner)]

    runner = FakeRunner(capacity=1)
    runner.wait = lambda give_up=None: run_one()
    strategy = make_strategy(get_method("rs"), space, "error", seed=2, budget=20)
    result = search_loop(strategy, runner, [], y_val=Y_VAL, space=space, seed=2, loss="error", budget=20,
                         predictor=predictor, store=MemoryStore(), time_left=lambda: clock["left"], ahead=ahead)
    assert clock["ahead"] == [0, 3]  # asked when nothing fitted; after three evaluations asked again, in vain
    assert len(result.history) == 3 and result.went_on == 1  # 10 s bought three evaluations of 3 s, not a 4th
    assert result.stopped == "time budget: no evaluation fits in the time left"
    strategy = make_strategy(get_method("rs"), space, "error", seed=2, budget=20)
    clock["left"], clock["ahead"] = 0.5, [1, 2]  # nothing to run ahead any more: the search stops at once
    result = search_loop(strategy, FakeRunner(capacity=1), [], y_val=Y_VAL, space=space, seed=2, loss="error",
                         budget=20, predictor=predictor, store=MemoryStore(), time_left=lambda: clock["left"],
                         ahead=ahead)
    assert not result.history and result.went_on == 0 and clock["ahead"] == [1, 2, 0]


def gives_back_once(clock, seconds):
    """An ``ahead`` for the loop whose first call sets the time left to ``seconds`` (the refits took less than was
    kept for them) and whose later calls find nothing to do; ``clock["ahead"]`` counts the calls."""
    def ahead(done):
        clock["ahead"] += 1
        if clock["ahead"] > 1:
            return False
        clock["left"] = seconds
        return True

    return ahead


def test_an_evaluation_cut_at_the_deadline_lets_the_final_models_work_run_ahead_before_the_search_ends():
    from optdiv.evaluation.observation import DEADLINE, WORST_LOSS

    space = tiny_space("classification")
    predictor = DurationPredictor()
    predictor.observe("tree", 1.0)
    predictor.observe("linear", 1.0)
    clock = {"left": 4.0, "ahead": 0, "cut": False}

    ahead = gives_back_once(clock, 10.0)  # the refits run ahead give 10 s back once

    def run_one():  # the first evaluation runs to the deadline and is cut; the others take 3 s each
        ended = FakeRunner.wait(runner)
        if not clock["cut"]:
            clock["left"], clock["cut"] = 0.0, True
            return [Done(d.index, d.config, Observation(dict(d.config), DEADLINE, WORST_LOSS["error"], index=d.index,
                                                        algorithm=algorithm_of(d.config), fit_seconds=4.0),
                         4.0) for d in ended]
        clock["left"] -= 3.0
        return [Done(d.index, d.config, d.observation, 3.0) for d in ended]

    runner = FakeRunner(capacity=1)
    runner.wait = lambda give_up=None: run_one()
    strategy = make_strategy(get_method("rs"), space, "error", seed=2, budget=20)
    result = search_loop(strategy, runner, [], y_val=Y_VAL, space=space, seed=2, loss="error", budget=20,
                         predictor=predictor, store=MemoryStore(), time_left=lambda: clock["left"], ahead=ahead)
    assert len(runner.submitted) == 4 and len(result.history) == 3  # the cut one is not recorded; 10 s bought 3
    assert result.went_on == 1 and clock["ahead"] == 2
    assert result.stopped == "time budget: no evaluation fits in the time left"  # after going on, its own reason
    clock.update(left=4.0, ahead=1, cut=False)  # nothing to run ahead: the search ends at the cut, as it always did
    runner = FakeRunner(capacity=1)
    runner.wait = lambda give_up=None: run_one()
    strategy = make_strategy(get_method("rs"), space, "error", seed=2, budget=20)
    result = search_loop(strategy, runner, [], y_val=Y_VAL, space=space, seed=2, loss="error", budget=20,
                         predictor=predictor, store=MemoryStore(), time_left=lambda: clock["left"], ahead=ahead)
    assert len(runner.submitted) == 1 and not result.history and result.went_on == 0
    assert result.stopped == "time budget: the last evaluation was stopped at the deadline and discarded"


def test_time_that_runs_out_while_an_evaluation_runs_lets_the_final_models_work_run_ahead_once_it_ends():
    from optdiv.engine.loop import RAN_OUT

    space = tiny_space("classification")
    predictor = DurationPredictor()
    predictor.observe("tree", 1.0)
    predictor.observe("linear", 1.0)

    def run(clock, ahead):
        """The first evaluation outlives the search's time (a wait ends with nothing finished and no time left),
        then ends within what a running evaluation may use; the others take 3 s each."""
        def run_one():
            if clock["ticks"] == 0:
                clock["ticks"], clock["left"] = 1, -0.5
                return []
            clock["left"] -= 0.0 if clock["ticks"] == 1 else 3.0
            clock["ticks"] += 1
            return [Done(d.index, d.config, d.observation, 3.0) for d in FakeRunner.wait(runner)]

        runner = FakeRunner(capacity=1)
        runner.wait = lambda give_up=None: run_one()
        strategy = make_strategy(get_method("rs"), space, "error", seed=2, budget=20)
        return search_loop(strategy, runner, [], y_val=Y_VAL, space=space, seed=2, loss="error", budget=20,
                           predictor=predictor, store=MemoryStore(), time_left=lambda: clock["left"],
                           run_left=lambda: clock["left"] + 5.0, ahead=ahead)

    clock = {"left": 4.0, "ahead": 0, "ticks": 0}
    result = run(clock, gives_back_once(clock, 10.0))  # the refits run ahead give 10 s back once
    assert clock["ahead"] == 2 and result.went_on == 1  # asked as the late evaluation ended, and after the 10 s
    assert len(result.history) == 4  # the late one, then three of 3 s in the 10 s given back
    assert result.stopped == "time budget: no evaluation fits in the time left"
    clock = {"left": 4.0, "ahead": 1, "ticks": 0}  # nothing to run ahead: the search ends as its time ran out
    result = run(clock, gives_back_once(clock, 10.0))
    assert len(result.history) == 1 and result.went_on == 0 and clock["ahead"] == 2
    assert result.stopped == RAN_OUT


def test_a_suggestion_that_would_not_fit_lets_the_final_models_work_run_ahead_before_the_search_ends(monkeypatch):
    import optdiv.engine.loop as loop

    monkeypatch.setattr(loop, "least_duration", lambda space, predictor: 1.0)  # something quick would fit...
    space = tiny_space("classification")
    predictor = DurationPredictor()
    predictor.observe("tree", 5.0)  # ...but every suggestion is predicted at 5 s, and nothing fills in
    predictor.observe("linear", 5.0)
    clock = {"left": 3.0, "ahead": 0}

    ahead = gives_back_once(clock, 12.0)  # the refits run ahead give 12 s back once

    def run_one():
        clock["left"] -= 5.0
        return [Done(d.index, d.config, d.observation, 5.0) for d in FakeRunner.wait(runner)]

    def loop_with(refits):
        strategy = make_strategy(get_method("rs"), space, "error", seed=2, budget=20)
        return search_loop(strategy, runner, [], y_val=Y_VAL, space=space, seed=2, loss="error", budget=20,
                           predictor=predictor, store=MemoryStore(), time_left=lambda: clock["left"], ahead=refits,
                           fill_in=False)

    runner = FakeRunner(capacity=1)
    runner.wait = lambda give_up=None: run_one()
    result = loop_with(ahead)
    assert len(result.history) == 2 and result.went_on == 1 and clock["ahead"] == 2  # 12 s bought two of 5 s
    assert result.stopped.startswith("time budget: the next evaluation") and result.stopped.endswith(
        "would not fit in the 2.0 s left")  # then nothing was left to run ahead
    clock["left"] = 3.0
    runner = FakeRunner(capacity=1)
    result = loop_with(None)
    assert not result.history and not runner.submitted and "would not fit in the 3.0 s left" in result.stopped


def test_a_store_with_an_index_neither_issued_nor_recorded_is_refused(tmp_path):
    store = RunStore(tmp_path / "run")
    first, _ = _loop(FakeRunner(), store, budget=3)
    (tmp_path / "run" / ISSUED_NAME).unlink()
    history = [o for o in store.load() if o.index != 1]
    with pytest.raises(ValueError, match=r"evaluations \[1\] were neither issued nor recorded"):
        _loop(FakeRunner(), store, budget=5, history=history)


class Recording(EvaluatorInterface):
    """An evaluator that records each call and takes a time limit."""

    takes_time_limit = True

    def __init__(self):
        self.calls, self.closed, self.last_start_seconds = [], 0, 0.0

    def evaluate(self, config, index, time_limit=None):
        self.calls.append((index, time_limit))
        return _observation(config, index)

    def close(self):
        self.closed += 1


class RecordingWithoutLimit(Recording):
    """A replay-like evaluator: it takes no time limit, and says so."""

    takes_time_limit = False

    def evaluate(self, config, index):
        return super().evaluate(config, index)


def test_the_sequential_runner_evaluates_in_wait_one_at_a_time():
    evaluator = Recording()
    runner = make_runner(evaluator)
    assert isinstance(runner, SequentialRunner) and runner.capacity == 1 and runner.describe() is None
    config = {"algorithm": "linear", "C": 1.0, "task": "classification"}
    runner.submit(3, config, time_limit=2.5)
    assert runner.running == 1 and evaluator.calls == []  # nothing runs before the loop waits
    with pytest.raises(RuntimeError, match="one evaluation at a time"):
        runner.submit(4, config)
    (done,) = runner.wait()
    assert (done.index, done.config, done.lost) == (3, config, None) and done.observation.index == 3
    assert done.seconds >= 0 and evaluator.calls == [(3, 2.5)] and runner.running == 0
    runner.submit(4, config)
    runner.wait()
    assert evaluator.calls[-1] == (4, None)
    plain = RecordingWithoutLimit()
    runner = SequentialRunner(plain)
    runner.submit(0, config, time_limit=2.5)  # a replay evaluator takes no cap: none is passed
    assert runner.wait()[0].observation.ok and plain.calls == [(0, None)]
    runner.close()
    assert plain.closed == 1


def test_evaluator_settings_are_every_constructor_argument_but_the_splits(cls_splits):
    space = tiny_space("classification")
    evaluator = Evaluator(space.build, cls_splits, "classification", "accuracy", n_classes=2, time_limit=7, seed=3,
                          memory_limit_mb=4096, threads=2)
    settings = evaluator.settings()
    expected = set(inspect.signature(Evaluator.__init__).parameters) - {"self", "splits"}
    assert set(settings) == expected
    assert settings["metric"] == "error" and settings["time_limit"] == 7 and settings["memory_limit_mb"] == 4096
    assert Evaluator(splits=cls_splits, **settings).settings() == settings


def test_a_sequential_run_stopped_between_issuing_and_recording_resubmits_the_same_configuration(tmp_path,
                                                                                                   cls_splits):
    kwargs = dict(n_classes=2, method="bo-es", space=tiny_space("classification"), seed=5, optimizer_options=FAST)
    reference = search(cls_splits, "classification", budget=7, store=RunStore(tmp_path / "reference"), **kwargs)
    issued = RunStore(tmp_path / "reference").issued.load()
    assert sorted(issued) == list(range(7)) and all(record["pending"] == [] for record in issued.values())
    assert [issued[i]["config"] for i in range(7)] == [json.loads(json.dumps(o.config)) for o in reference.history]

    # stopped while evaluating index 4: its issued line is written, its observation is not
    store = RunStore(tmp_path / "stopped")
    search(cls_splits, "classification", budget=4, store=store, **kwargs)
    store.issued.append(4, reference.history[4].config, [])
    resumed = search(cls_splits, "classification", budget=7, store=RunStore(tmp_path / "stopped"), **kwargs)
    assert [o.index for o in resumed.history] == list(range(7))
    assert [o.config for o in resumed.history] == [o.config for o in reference.history]
    assert [o.val_loss for o in resumed.history] == pytest.approx([o.val_loss for o in reference.history])
    assert resumed.member_indices == reference.member_indices
    assert len(resumed.suggest_seconds) == 2  # index 4 was re-submitted, not suggested again
    assert "parallel" not in resumed.info

    # the same with a configuration the strategy would not suggest there: it is what index 4 evaluates
    store = RunStore(tmp_path / "other")
    search(cls_splits, "classification", budget=4, store=store, **kwargs)
    planted = {"algorithm": "tree", "depth": 11, "leaf": 29, "task": "classification"}
    store.issued.append(4, planted, [])
    resumed = search(cls_splits, "classification", budget=6, store=RunStore(tmp_path / "other"), **kwargs)
    assert [o.index for o in resumed.history] == list(range(6))
    assert resumed.history[4].config == planted and resumed.history[4].ok
    lines = (tmp_path / "other" / "observations.jsonl").read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == list(range(6))
