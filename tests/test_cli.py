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
