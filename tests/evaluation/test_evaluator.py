"""The evaluator: predictions, losses and every kind of failure, with fits in a worker process."""

import math
import sys
import time

import builders
import numpy as np
import pytest
from sklearn.metrics import log_loss
from sklearn.pipeline import Pipeline

from optdiv.core.metrics import mean_loss
from optdiv.data import load_dataset, make_preprocessor, split
from optdiv.evaluation.evaluator import Evaluator
from optdiv.evaluation.memory import peak_memory_mb
from optdiv.evaluation.observation import WORST_LOSS, Observation, worst_loss


@pytest.fixture(scope="module")
def cancer():
    return split(load_dataset("sklearn:breast_cancer"), seed=0)


@pytest.fixture(scope="module")
def worker(cancer):
    """One worker-backed evaluator shared by the tests below (restarts are part of what they check)."""
    ev = Evaluator(builders.by_name, cancer, "classification", "log_loss", n_classes=2, time_limit=60, seed=0)
    yield ev
    ev.close()


def _failed(obs: Observation, status="failed"):
    assert obs.status == status and not obs.ok
    assert obs.val_pred is None and obs.test_pred is None and obs.test_loss is None
    assert obs.val_loss == WORST_LOSS["log_loss"] and math.isfinite(obs.val_loss)
    assert obs.error


def test_ok_logistic_regression_matches_direct_fit(worker, cancer):
    obs = worker.evaluate({"algorithm": "logreg", "C": 0.5}, index=7)
    assert obs.status == "ok" and obs.error is None and obs.index == 7 and obs.algorithm == "logreg"
    assert obs.val_pred.dtype == np.float32 and obs.val_pred.shape == (len(cancer.y_val), 2)
    assert obs.test_pred.dtype == np.float32 and obs.test_pred.shape == (len(cancer.y_test), 2)
    np.testing.assert_allclose(obs.val_pred.sum(1), 1, atol=1e-5)
    assert obs.fit_seconds > 0

    direct = Pipeline([("prep", make_preprocessor(cancer.X_train)), ("model", builders.logreg({"C": 0.5}, 0))])
    direct.fit(cancer.X_train, cancer.y_train)
    p = direct.predict_proba(cancer.X_val)
    np.testing.assert_allclose(obs.val_pred, p, atol=1e-5)
    q = obs.val_pred.astype(np.float64)
    assert obs.val_loss == pytest.approx(log_loss(cancer.y_val, q / q.sum(1, keepdims=True), labels=[0, 1]), rel=1e-5)
    assert obs.val_loss == pytest.approx(log_loss(cancer.y_val, p), rel=1e-4)
    assert obs.test_loss == pytest.approx(float(mean_loss(obs.test_pred, cancer.y_test, "log_loss")))


@pytest.mark.parametrize("algorithm", ["majority", "refusing"])
def test_label_only_model_gives_one_hot(worker, cancer, algorithm):
    obs = worker.evaluate({"algorithm": algorithm}, index=1)
    assert obs.status == "ok"
    assert obs.val_pred.shape == (len(cancer.y_val), 2)
    assert set(np.unique(obs.val_pred)) == {0.0, 1.0}
    np.testing.assert_array_equal(obs.val_pred.sum(1), 1)
    majority = np.bincount(cancer.y_train).argmax()
    assert (obs.val_pred[:, majority] == 1).all()


def test_margin_classifier_gives_soft_probabilities(worker, cancer):
    """An SVC without predict_proba scores by a sigmoid of its margin, as the hosts' SVCs do, not one-hot."""
    obs = worker.evaluate({"algorithm": "svc"}, index=1)
    assert obs.status == "ok"
    p = obs.val_pred.astype(np.float64)
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-6)
    assert ((p > 0.01) & (p < 0.99)).any()  # soft rows, not only 0/1
    assert obs.val_loss < 0.5  # still a useful model on breast_cancer


def test_multiclass_margin_probabilities_follow_the_decision():
    from sklearn.datasets import load_iris
    from sklearn.svm import LinearSVC

    from optdiv.evaluation.fitting import predict_probabilities

    X, y = load_iris(return_X_y=True)
    model = LinearSVC(dual=False).fit(X[y != 1], y[y != 1])  # classes_ = [0, 2]: column 1 stays empty
    p = predict_probabilities(model, X, 3)
    assert p.shape == (150, 3)
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-6)
    assert (p[:, 1] == 0).all()
    np.testing.assert_array_equal(np.array([0, 2])[p[:, [0, 2]].argmax(1)], model.predict(X))
    full = LinearSVC(dual=False).fit(X, y)
    q = predict_probabilities(full, X, 3)
    assert ((q > 0.01) & (q < 0.99)).any()
    np.testing.assert_array_equal(q.argmax(1), full.decision_function(X).argmax(1))


def test_exception_is_a_failed_observation(worker):
    obs = worker.evaluate({"algorithm": "raise"}, index=2)
    _failed(obs)
    assert obs.error.startswith("ValueError: boom: this configuration cannot be fitted")
    assert "Traceback" in obs.error and "builders.py" in obs.error
    assert obs.algorithm == "raise"


def test_nan_predictions_fail(worker):
    obs = worker.evaluate({"algorithm": "nan"}, index=3)
    _failed(obs)
    assert "NaN or inf" in obs.error


@pytest.mark.timing
def test_timeout_then_next_evaluation_works(worker):
    assert worker.evaluate({"algorithm": "logreg"}, index=20).status == "ok"  # a live worker, whatever ran before
    starts = worker.worker_starts
    worker.time_limit = 2.0
    try:
        t0 = time.perf_counter()
        obs = worker.evaluate({"algorithm": "sleeper", "sleep": 30}, index=4)
        elapsed = time.perf_counter() - t0
    finally:
        worker.time_limit = 60
    _failed(obs, "timeout")
    assert "time limit of 2 s" in obs.error
    assert 2.0 <= elapsed < 2.0 + 5
    assert 2.0 <= obs.fit_seconds < 2.0 + 5
    after = worker.evaluate({"algorithm": "logreg"}, index=5)
    assert after.status == "ok" and worker.worker_starts == starts + 1


def test_worker_crash_is_a_failed_observation(worker):
    assert worker.evaluate({"algorithm": "majority"}, index=21).ok  # a live worker, whatever ran before
    starts = worker.worker_starts
    obs = worker.evaluate({"algorithm": "exit"}, index=6)
    _failed(obs)
    assert "exited with code 3" in obs.error
    assert worker.evaluate({"algorithm": "majority"}, index=7).status == "ok"
    assert worker.worker_starts == starts + 1


def test_worker_is_reused_and_close_restarts(worker):
    worker.evaluate({"algorithm": "majority"}, index=8)
    starts = worker.worker_starts
    for i in range(3):
        assert worker.evaluate({"algorithm": "majority"}, index=9 + i).ok
    assert worker.worker_starts == starts
    worker.close()
    assert worker.evaluate({"algorithm": "majority"}, index=12).ok
    assert worker.worker_starts == starts + 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resident set is read from /proc on Linux")
def test_memory_limit_ends_a_worker_whose_resident_set_passes_it():
    d = load_dataset("sklearn:breast_cancer")
    s = split(d, seed=0)
    with Evaluator(builders.by_name, s, "classification", "error", time_limit=60, memory_limit_mb=400) as ev:
        grown = ev.evaluate({"algorithm": "grower", "mb": 1500, "hold": 30.0}, index=0)
        assert grown.status == "failed" and grown.val_loss == WORST_LOSS["error"]
        assert "exceeded the memory limit of 400 MB" in grown.error
        # the fit would hold its memory 30 s: ending well before that is the watchdog, whatever the machine's load
        assert grown.fit_seconds < 20.0, "the watchdog must end the worker while it grows, not when the fit ends"
        untouched = ev.evaluate({"algorithm": "hog", "gib": 2}, index=1)  # address space only: no resident set
        assert untouched.status == "ok", "an address space never touched must not count against the limit"
        small = ev.evaluate({"algorithm": "grower", "mb": 100, "hold": 0.5}, index=2)
        assert small.status == "ok" and ev.worker_starts == 2  # replaced once, after the first evaluation


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resident set is read from /proc on Linux")
def test_each_evaluation_records_its_own_peak_memory():
    s = split(load_dataset("sklearn:breast_cancer"), seed=0)
    with Evaluator(builders.by_name, s, "classification", "error", time_limit=60) as ev:
        big = ev.evaluate({"algorithm": "grower", "mb": 400, "hold": 0.1}, index=0)
        small = ev.evaluate({"algorithm": "majority"}, index=1)  # the same worker, after the big one
    assert big.ok and small.ok
    assert big.measures["peak_mb"] > small.measures["peak_mb"] + 300  # the second's peak starts afresh
    assert peak_memory_mb()["largest_worker"] >= big.measures["peak_mb"]


def test_memory_limit_auto_follows_the_data_and_the_machine(monkeypatch):
    from optdiv.evaluation import memory

    monkeypatch.setattr(memory, "total_memory_mb", lambda: 64 * 1024.0)
    assert memory.resolve_memory_limit("auto") == memory.AUTO_MEMORY_MB
    assert memory.resolve_memory_limit("auto", data_mb=1000) == 1024 + 4 * 1000
    assert memory.resolve_memory_limit("auto", data_mb=1000, at_once=8) == 4096  # half of 64 GB over 8
    assert memory.resolve_memory_limit("auto", data_mb=1000, at_once=64) == 1024  # never below 1 GB
    assert memory.resolve_memory_limit("auto", data_mb=1000, at_once=64, local=False) == 5024  # a remote cluster
    assert memory.resolve_memory_limit(None) is None and memory.resolve_memory_limit(512.5) == 512
    for bad in ("lots", 0, -5, True):
        with pytest.raises(ValueError, match="memory_limit_mb"):
            memory.resolve_memory_limit(bad)
    d = load_dataset("sklearn:diabetes")
    s = split(d, seed=0)
    ev = Evaluator(builders.by_name, s, "regression", "mse", memory_limit_mb="auto")
    assert ev.memory_limit_mb == memory.AUTO_MEMORY_MB and ev.settings()["memory_limit_mb"] == memory.AUTO_MEMORY_MB


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux")
def test_memory_limit_caps_the_address_space_where_the_resident_set_cannot_be_read(monkeypatch):
    from optdiv.evaluation import evaluator as evaluator_module

    monkeypatch.setattr(evaluator_module, "can_watch_memory", lambda: False)
    d = load_dataset("sklearn:diabetes")
    s = split(d, seed=0)
    with Evaluator(builders.by_name, s, "regression", "mse", time_limit=60, memory_limit_mb=8192) as ev:
        obs = ev.evaluate({"algorithm": "hog", "gib": 16}, index=0)  # address space only, never touched
        assert obs.status == "failed" and "MemoryError" in obs.error and obs.val_loss == WORST_LOSS["mse"]
        ok = ev.evaluate({"algorithm": "ridge", "alpha": 0.1}, index=1)
        assert ok.status == "ok" and ev.worker_starts == 2  # replaced after the MemoryError
    assert ok.val_pred.dtype == np.float32 and ok.val_pred.shape == (len(s.y_val),)
    assert ok.val_loss == pytest.approx(np.mean((ok.val_pred.astype(np.float64) - s.y_val) ** 2), rel=1e-5)
    assert ok.algorithm == "ridge"


def test_class_missing_from_training_rows_keeps_all_columns():
    d = load_dataset("sklearn:iris")
    s = split(d, seed=0)
    keep = s.y_train != 2
    s.X_train, s.y_train = s.X_train[keep].reset_index(drop=True), s.y_train[keep]
    ev = Evaluator(builders.logreg, s, "classification", "brier", n_classes=3, in_process=True)
    obs = ev.evaluate({}, index=0)
    assert obs.status == "ok" and obs.val_pred.shape == (len(s.y_val), 3)
    assert (obs.val_pred[:, 2] == 0).all()
    np.testing.assert_allclose(obs.val_pred.sum(1), 1, atol=1e-5)
    assert obs.algorithm == "LogisticRegression"  # no algorithm key: the model's class name


def test_in_process_records_failures_without_raising(cancer):
    ev = Evaluator(builders.by_name, cancer, "classification", "accuracy", in_process=True)
    assert ev.metric == "error" and ev.n_classes == 2
    obs = ev.evaluate({"algorithm": "raise"}, index=0)
    assert obs.status == "failed" and obs.val_loss == 1.0 and "boom" in obs.error
    ok = ev.evaluate({"algorithm": "logreg"}, index=1)
    assert ok.val_loss == pytest.approx(np.mean(ok.val_pred.argmax(1) != cancer.y_val))


def test_constructor_checks(cancer):
    with pytest.raises(ValueError, match=r"metric 'mse' does not fit a classification task"):
        Evaluator(builders.logreg, cancer, "classification", "mse")
    with pytest.raises(ValueError, match=r"unknown classification metric 'auc'; choose one of error"):
        Evaluator(builders.logreg, cancer, "classification", "auc")
    with pytest.raises(TypeError, match=r"picklable by reference"):
        Evaluator(lambda config, seed: None, cancer, "classification", "error")


def test_worst_losses_are_finite():
    assert worst_loss("accuracy") == 1.0 and worst_loss("brier") == 2.0
    assert worst_loss("log_loss") == pytest.approx(34.538776, rel=1e-6)
    assert all(math.isfinite(v) for v in WORST_LOSS.values())


def test_worker_runs_with_the_thread_cap():
    import os

    from optdiv.evaluation.worker import THREAD_VARIABLES, thread_limit_environment

    splits = split(load_dataset("sklearn:breast_cancer"), seed=0)
    with Evaluator(builders.report_threads, splits, "classification", "error", time_limit=60) as evaluator:
        obs = evaluator.evaluate({}, index=0)
    assert obs.status == "failed" and "OMP_NUM_THREADS=1" in obs.error

    before = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    with thread_limit_environment(1):
        assert all(os.environ[name] == "1" for name in THREAD_VARIABLES)
    assert {name: os.environ.get(name) for name in THREAD_VARIABLES} == before


def test_an_unguarded_script_stops_with_a_hint_instead_of_hanging(tmp_path):
    """A script without ``if __name__ == "__main__"`` is re-run by the worker's spawn start-up. The data (over
    the OS pipe buffer) must not ride in the start payload, or start() blocks forever once that child dies;
    and the child must stop at its first evaluation instead of running the whole script with failures."""
    import os
    import subprocess

    script = tmp_path / "unguarded.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {os.path.dirname(builders.__file__)!r})\n"
        "import builders\n"
        "from optdiv.data import load_dataset, split\n"
        "from optdiv.evaluation.evaluator import Evaluator\n"
        "splits = split(load_dataset('sklearn:breast_cancer'), seed=0)\n"
        "ev = Evaluator(builders.logreg, splits, 'classification', 'log_loss', n_classes=2, time_limit=60)\n"
        "obs = ev.evaluate({'C': 1.0}, index=0)\n"
        "print('STATUS', obs.status, obs.error, flush=True)\n"
        "ev.close()\n")
    assert split(load_dataset("sklearn:breast_cancer"), seed=0).X_train.to_numpy().nbytes > 65536  # over a pipe buffer
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    statuses = [line for line in done.stdout.splitlines() if line.startswith("STATUS")]
    assert len(statuses) == 1 and statuses[0].startswith("STATUS failed")  # the parent's line only
    assert "if __name__ == '__main__'" in statuses[0]
    assert "guard the script's entry point" in done.stderr and "Traceback" not in done.stderr  # one line


def test_an_unguarded_estimator_script_ends_saying_what_failed_not_to_raise_the_budget(tmp_path):
    """The estimator's fit in a script without the guard: its workers die starting (each re-runs the script and
    stops at its first worker start with one line), and the fit stops after a few such starts and names that
    instead of waiting out its budget or asking for more time."""
    import subprocess

    script = tmp_path / "unguarded_fit.py"
    script.write_text(
        "from sklearn.datasets import load_breast_cancer\n"
        "from optdiv.sklearn import OptDivClassifier\n"
        "X, y = load_breast_cancer(return_X_y=True)\n"
        "OptDivClassifier(time_budget=3600, seed=0).fit(X, y)\n")  # an hour it must not wait out
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    ended = [line for line in done.stderr.splitlines() if line.startswith("RuntimeError: no evaluation finished")]
    assert len(ended) == 1 and "could not start; the first with: worker process exited" in ended[0]
    assert "if __name__ == '__main__'" in ended[0]
    assert "optdiv started a worker process while this process was being started by multiprocessing" in done.stderr
    assert done.stderr.count("Traceback") == 1  # the script's own error; each worker says one line, no traceback


def test_workers_start_side_by_side_and_one_stopped_while_its_data_are_in_flight_ends(tmp_path):
    """Data larger than a pipe's buffer are only taken once a worker has imported its libraries: they are sent
    from a thread, so starting several workers does not wait for each in turn."""
    import pandas as pd

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(20000, 20)), columns=[f"x{i}" for i in range(20)])  # 3.2 MB
    frame = X.assign(target=(X["x0"] > 0).astype(int))
    from optdiv.data import from_frame

    big = split(from_frame(frame, target="target", name="big"), seed=0)
    evaluators = [Evaluator(builders.by_name, big, "classification", "error", n_classes=2, time_limit=60,
                            memory_limit_mb=4096 + i) for i in range(3)]  # own limits: none takes a kept worker
    try:
        for ev in evaluators:
            ev.spawn()
        in_flight = [ev._holder[0]._sending.is_alive() for ev in evaluators]
        assert all(in_flight)  # every spawn returned before its worker took the data
        stopped = evaluators[2]._holder[0]
        evaluators[2].close()  # stopped while its data were still going over: neither hangs nor leaks the thread
        assert evaluators[2]._holder[0] is None and not stopped._sending.is_alive() and stopped.proc is None
        for index, ev in enumerate(evaluators[:2]):
            obs = ev.evaluate({"algorithm": "logreg"}, index=index)
            assert obs.ok and obs.val_pred.shape[0] == len(big.y_val)
    finally:
        for ev in evaluators:
            ev.close()


def _worker_pid(ev: Evaluator) -> int:
    return ev._holder[0].proc.pid


def test_a_closed_evaluators_idle_worker_serves_the_next_evaluator_on_its_own_data(cancer):
    regression = split(load_dataset("sklearn:diabetes"), seed=0)
    with Evaluator(builders.by_name, cancer, "classification", "error", n_classes=2, time_limit=60) as first:
        assert first.evaluate({"algorithm": "logreg"}, index=0).ok
        pid = _worker_pid(first)
    with Evaluator(builders.by_name, regression, "regression", "mse", time_limit=60) as second:
        obs = second.evaluate({"algorithm": "ridge", "alpha": 0.1}, index=0)
        assert _worker_pid(second) == pid and second.worker_starts == 1  # taken over, not started again
    assert obs.ok and obs.val_pred.shape == (len(regression.y_val),)  # on the second evaluator's rows
    assert obs.val_loss == pytest.approx(np.mean((obs.val_pred.astype(np.float64) - regression.y_val) ** 2), rel=1e-5)
    with Evaluator(builders.by_name, cancer, "classification", "error", n_classes=2, time_limit=60,
                   memory_limit_mb=2048) as other:  # started with another memory limit: a worker of its own
        assert other.evaluate({"algorithm": "logreg"}, index=0).ok and _worker_pid(other) != pid


def test_a_kept_worker_leaves_when_no_evaluator_takes_it(cancer, monkeypatch):
    from optdiv.evaluation import worker as worker_module

    monkeypatch.setattr(worker_module, "KEEP_SECONDS", 1.0)
    ev = Evaluator(builders.by_name, cancer, "classification", "error", n_classes=2, time_limit=60, threads=2)
    assert ev.evaluate({"algorithm": "majority"}, index=0).ok
    proc = ev._holder[0].proc
    pid = proc.pid
    ev.close()
    proc.join(10.0)
    assert proc.exitcode == 0  # left on its own once the second was over
    assert ev.evaluate({"algorithm": "majority"}, index=1).ok and _worker_pid(ev) != pid
    ev._stop()
