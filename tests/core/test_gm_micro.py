"""GM_micro on a hand-worked confusion matrix."""

import numpy as np
import pytest

from optdiv.core.metrics import gm_micro


def test_gm_micro_seed_notes_example():
    confusion = np.array([[5, 1, 0], [2, 3, 1], [0, 0, 4]])
    y_true, y_pred = [], []
    for t in range(3):
        for p in range(3):
            y_true += [t] * confusion[t, p]
            y_pred += [p] * confusion[t, p]
    # sum TP 12, FN 4, FP 4, TN 28: sensitivity 0.75, specificity 0.875
    assert gm_micro(y_true, y_pred, 3) == pytest.approx(0.810093, abs=1e-6)
    assert gm_micro([0, 1, 1], [0, 1, 1], 2) == 1.0
    with pytest.raises(ValueError):
        gm_micro([0, 1], [0], 2)
