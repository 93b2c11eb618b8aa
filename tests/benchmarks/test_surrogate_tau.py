"""benchmarks/surrogate_tau.py: the surrogate-ranking measurement (DivBO section 4.2) on arrays and on replay
libraries."""

from __future__ import annotations

import numpy as np
import pytest

TAUS = ("kendall_tau_heldout_pairs", "kendall_tau_all_heldout_pairs", "kendall_tau_heldout_x_train")


@pytest.fixture(scope="module")
def surrogate_tau(script):
    return script("surrogate_tau")


def _learnable(m=90, rows=60, seed=0):
    """Predictions offset by a function of the first feature: MSE diversity is (f(x_i) - f(x_j))^2."""
    rng = np.random.default_rng(seed)
    encoded = rng.random((m, 4))
    y = rng.normal(size=rows)
    preds = y[None, :] + 3 * encoded[:, :1] ** 2 + 0.01 * rng.normal(size=(m, rows))
    return encoded, preds, y


def test_tau_is_high_when_diversity_follows_the_configuration_and_near_zero_when_it_does_not(surrogate_tau):
    tau_of_predictions = surrogate_tau.tau_of_predictions
    encoded, preds, y = _learnable()
    learnable = tau_of_predictions(encoded, preds, y, "mse", n_train=60)
    assert all(learnable[key] > 0.5 for key in TAUS), learnable
    shuffled = tau_of_predictions(encoded, preds[np.random.default_rng(1).permutation(len(preds))], y, "mse",
                                  n_train=60)
    assert all(abs(shuffled[key]) < 0.25 for key in TAUS[1:]), shuffled  # 435 and 1,800 pairs: little noise
    assert learnable == tau_of_predictions(encoded, preds, y, "mse", n_train=60)
    with pytest.raises(ValueError, match="only 90 successful configurations; need more than 90"):
        tau_of_predictions(encoded, preds, y, "mse", n_train=89)


def test_library_tau_skips_failed_members_resolves_auto_and_repeats_over_partitions(surrogate_tau, library_factory):
    library_tau, tau_of_predictions = surrogate_tau.library_tau, surrogate_tau.tau_of_predictions
    library = library_factory("regression", n=80, seed=2, failed=5)
    report = library_tau(library, ["divbo", "auto"], metric="mae", n_train=50, repeats=3, seed=7)
    assert report["n_successful"] == 75 and report["metric"] == "mae"
    assert [k["kind"] for k in report["kinds"]] == ["divbo", "mae"]
    ok = np.flatnonzero(library.ok)
    first = tau_of_predictions(library.encoded[ok], library.val_preds[ok], library.y_val, "mae", 50, seed=7)
    per_repeat = report["kinds"][1]["kendall_tau_all_heldout_pairs_per_repeat"]
    assert per_repeat[0] == first["kendall_tau_all_heldout_pairs"]  # repeat 0 keeps the library's order
    assert len(set(per_repeat)) == 3  # the other repeats draw other partitions
    assert report["kinds"][1]["kendall_tau_all_heldout_pairs"] == pytest.approx(np.mean(per_repeat))
    assert library_tau(library, ["auto"], metric="mae", n_train=50, repeats=3, seed=7)["kinds"][0] == \
        report["kinds"][1]
    assert library_tau(library_factory(), ["auto"], n_train=40)["kinds"][0]["kind"] == "zero_one"


def test_cli_needs_a_run_directory_without_a_library(surrogate_tau):
    with pytest.raises(SystemExit) as stop:
        surrogate_tau.main(["--data", "sklearn:breast_cancer"])
    assert stop.value.code == 2
