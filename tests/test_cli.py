"""The optdiv command: version, help, and the README's demo."""

import subprocess
import sys

import pytest

from optdiv import __version__
from optdiv.bench.demo import format_demo, run_demo
from optdiv.cli import main


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert __version__ in capsys.readouterr().out
    assert main([]) == 0
    assert "demo" in capsys.readouterr().out


def test_demo_result_is_consistent():
    result = run_demo(seed=0)
    assert len(result["models"]) >= 10
    assert sum(result["caruana_members"].values()) == pytest.approx(1.0)
    for key in ("test_error_best_single", "test_error_caruana", "test_error_agnostic_bayes"):
        assert 0.0 <= result[key] < 0.15  # breast_cancer: every sensible model is far below 15%
    text = format_demo(result)
    assert "Caruana" in text and "Agnostic Bayes" in text


def test_console_entry_point_runs_demo():
    out = subprocess.run(
        [sys.executable, "-m", "optdiv.cli", "demo"], capture_output=True, text=True, timeout=300, check=True
    )
    assert "test error" in out.stdout


def _run_cli(*args, timeout=600, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "optdiv.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def test_run_and_predict_on_a_csv(tmp_path):
    import json

    import pandas as pd
    from sklearn.datasets import load_breast_cancer

    csv = tmp_path / "bc.csv"
    load_breast_cancer(as_frame=True).frame.sample(200, random_state=0).rename(columns={"target": "label"}).to_csv(
        csv, index=False
    )
    out = tmp_path / "run"
    done = _run_cli("run", "--data", str(csv), "--target", "label", "--method", "optdivbo", "--budget", "6",
                    "--time-limit", "60", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "test" in done.stdout and "6/6" in done.stderr  # summary line and the progress bar
    result = json.loads((out / "result.json").read_text())
    assert result["n_evaluations"] == 6 and result["task"] == "classification"
    assert 0.0 <= result["test_error"] <= 1.0
    preds = tmp_path / "preds.csv"
    done = _run_cli("predict", str(out / "model.joblib"), str(csv), "--output", str(preds))
    assert done.returncode == 0, done.stderr
    assert "ignoring columns" in done.stderr and "label" in done.stderr
    labels = pd.read_csv(preds)["prediction"]
    assert len(labels) == 200 and set(labels) <= {0, 1}


@pytest.mark.parametrize(
    "args,message",
    [
        (["--method", "smac"], "unknown method 'smac'"),
        (["--metric", "auc"], "unknown classification metric 'auc'"),
        (["--space", "weka"], "weka"),
        (["--target", "nope"], "target column 'nope' not found"),
        (["--data", "missing.csv"], "missing.csv"),
        (["--data", "weka:1"], "weka:1"),
        (["--time-limit", "soon"], "expected seconds or 'auto'"),
    ],
)
def test_run_bad_input_gives_one_clear_error(tmp_path, args, message):
    import pandas as pd

    csv = tmp_path / "small.csv"
    pd.DataFrame({"a": range(40), "b": [0.5] * 40, "target": [0, 1] * 20}).to_csv(csv, index=False)
    done = _run_cli("run", "--data", str(csv), "--budget", "1", "--quiet", *args, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_run_budget_flag_takes_a_count_or_auto():
    from optdiv.cli import build_parser, run_config_from_args

    def config(*flags):
        return run_config_from_args(build_parser().parse_args(["run", "--data", "x.csv", *flags]))

    assert config("--time-budget", "60").evaluations() is None  # the default: the clock ends the search
    assert config("--time-budget", "60", "--budget", "40").evaluations() == 40
    assert config("--budget", "auto").evaluations() == 50
    with pytest.raises(SystemExit):
        config("--budget", "0")


def test_run_parallel_flag_takes_a_count_or_auto_and_defaults_to_a_core_each_under_a_time_budget(monkeypatch):
    from optdiv.cli import build_parser, run_config_from_args

    monkeypatch.setattr("optdiv.evaluation.threads.available_cores", lambda: 4)

    def config(*flags):
        return run_config_from_args(build_parser().parse_args(["run", "--data", "x.csv", *flags]))

    assert config("--time-budget", "60").parallel_evaluations() == 4
    assert config("--time-budget", "60", "--n-jobs", "2").parallel_evaluations() == 2
    assert config("--time-budget", "60", "--parallel", "1").evaluation_threads() == 4  # one at a time, threaded
    assert config("--time-budget", "60", "--workers", "2").parallel_evaluations() == 1  # Dask decides
    for bad in ("0", "many"):
        with pytest.raises(SystemExit):
            config("--parallel", bad)
