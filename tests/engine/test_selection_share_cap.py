"""The final selection with a cap on one algorithm's share: labels follow the runs, failed runs drop out."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from optdiv.final.choice import choose_members


def test_groups_are_read_per_run_and_failed_runs_carry_no_label_into_the_cap():
    rng = np.random.default_rng(0)
    y = rng.normal(size=300)
    runs = [SimpleNamespace(status="ok", val_pred=y + rng.normal(scale=s, size=300), val_loss=0.0)
            for s in (0.3, 0.32, 0.34, 1.0)]
    runs.insert(1, SimpleNamespace(status="failed", val_pred=None, val_loss=None))
    groups = ["svr", "ridge", "svr", "svr", "ridge"]  # the failed run's label must not shift the others'
    picked, weights = choose_members(runs, y, "mse", size=20, groups=groups, max_share=0.6)
    share = dict.fromkeys(groups, 0.0)
    for i, w in zip(picked, weights):
        share[groups[i]] += w
    assert 1 not in picked
    assert share["svr"] == pytest.approx(12 / 20) and share["ridge"] == pytest.approx(8 / 20)
    free, free_weights = choose_members(runs, y, "mse", size=20)
    assert sum(w for i, w in zip(free, free_weights) if groups[i] == "svr") > 0.6
