"""A member's refit on more rows is predicted from its fit time grown as its algorithm's fit grows with the rows."""

from __future__ import annotations

import pytest

from optdiv.evaluation.observation import Observation
from optdiv.final.refit_time import ROWS_EXPONENT, refit_seconds
from optdiv.final.reserve import finish_reserve
from optdiv.budget import FINISH_SECONDS


def test_boosters_grow_slower_than_the_rows_forests_faster_and_others_linearly():
    assert refit_seconds("lightgbm", 10.0, 50_000, 800_000) < 10.0 * 16 * 0.8
    assert refit_seconds("gradient_boosting", 10.0, 50_000, 800_000) < 10.0 * 16 * 0.8
    assert refit_seconds("extra_trees", 10.0, 50_000, 800_000) > 10.0 * 16 * 1.3
    assert refit_seconds("random_forest", 10.0, 50_000, 800_000) > 10.0 * 16 * 1.3
    assert refit_seconds("a_user_model", 10.0, 50_000, 800_000) == pytest.approx(160.0)
    assert refit_seconds("lightgbm", 10.0, 3, 3) == pytest.approx(10.0)  # the same rows: the same time
    assert all(0.5 <= exponent <= 2.0 for exponent in ROWS_EXPONENT.values())


def test_a_kernel_svm_over_its_row_cap_refits_in_the_time_its_evaluation_took():
    assert refit_seconds("libsvm_svc", 7.0, 50_000, 800_000) == pytest.approx(7.0)
    assert refit_seconds("libsvm_svr", 2.0, 5_000, 20_000) == pytest.approx(4.0)  # up to the cap, then no more


def test_the_search_keeps_back_each_members_refit_as_its_algorithm_grows():
    members = [Observation(config={}, val_loss=0.1, test_loss=0.1, val_pred=None, test_pred=None, status="ok",
                           fit_seconds=2.0, index=i, algorithm=algorithm)
               for i, algorithm in enumerate(["lightgbm", "extra_trees", "libsvm_svc"])]
    rows = (50_000, 800_000)
    expected = sum(refit_seconds(obs.algorithm, 2.0, *rows) for obs in members)
    reserve = finish_reserve(members, None, None, True, None, started=True, rows=rows)
    assert reserve == pytest.approx(FINISH_SECONDS + expected)
    assert reserve != pytest.approx(FINISH_SECONDS + 3 * 2.0 * 16)  # not the linear guess



def test_the_reserve_keeps_no_time_for_a_refit_that_cannot_fit_or_was_run_ahead():
    import numpy as np

    from optdiv.budget import Deadline
    from optdiv.final.reserve import FinishReserve

    members = [Observation(config={}, val_loss=0.1 + i, test_loss=None, val_pred=np.zeros(4), test_pred=None,
                           status="ok", fit_seconds=fit, index=i, algorithm="a_user_model")
               for i, fit in enumerate([3.0, 30.0])]  # refits on a third more rows: 4 s and 40 s

    def reserve(seconds_left, refitted=None):
        return FinishReserve(Deadline.after(seconds_left), None, "error", 5, 0, True, None, None, None, members,
                             started=True, refitted=refitted).seconds()

    assert reserve(100.0) == pytest.approx(FINISH_SECONDS + 44.0)
    assert reserve(30.0) == pytest.approx(FINISH_SECONDS + 4.0)  # the 40 s refit will not happen: no time kept
    assert reserve(100.0, refitted=lambda obs: obs.index == 1) == pytest.approx(FINISH_SECONDS + 4.0)
    assert reserve(4.5 + FINISH_SECONDS) == pytest.approx(FINISH_SECONDS + 4.0)
    assert reserve(3.5 + FINISH_SECONDS) == pytest.approx(FINISH_SECONDS)  # neither refit fits: none is kept time for


def test_a_refit_taken_corrects_the_next_prediction_of_its_algorithm_only():
    from optdiv.final.refit_time import PACE_BOUNDS, RefitPace

    pace = RefitPace()
    assert pace.correct("gradient_boosting", 80.0) == pytest.approx(80.0)  # nothing taken yet: the prediction
    pace.record("gradient_boosting", 80.0, 20.0)
    pace.record("gradient_boosting", 40.0, 20.0)
    assert pace.correct("gradient_boosting", 60.0) == pytest.approx(30.0)  # the slowest share seen: 0.5
    assert pace.correct("extra_trees", 60.0) == pytest.approx(60.0)  # another algorithm is not corrected
    pace.record("lightgbm", 100.0, 1.0)  # one near-instant refit says little: at most a quarter off
    assert pace.correct("lightgbm", 40.0) == pytest.approx(40.0 * PACE_BOUNDS[0])
    pace.record("random_forest", 10.0, 30.0)  # slower than predicted: the next is predicted slower too
    assert pace.correct("random_forest", 10.0) == pytest.approx(30.0)
    pace.record("random_forest", 0.0, 5.0)  # no prediction to compare with: ignored
    assert pace.correct("random_forest", 10.0) == pytest.approx(30.0)


def test_the_reserve_keeps_the_time_refits_take_at_the_pace_those_run_ahead_took():
    import numpy as np

    from optdiv.budget import Deadline
    from optdiv.final.refit_time import RefitPace
    from optdiv.final.reserve import FinishReserve

    members = [Observation(config={}, val_loss=0.1 + i, test_loss=None, val_pred=np.zeros(4), test_pred=None,
                           status="ok", fit_seconds=fit, index=i, algorithm=algorithm)
               for i, (fit, algorithm) in enumerate([(3.0, "gradient_boosting"), (30.0, "gradient_boosting"),
                                                     (6.0, "extra_trees")])]
    rows = (3, 4)
    plain = [refit_seconds(obs.algorithm, obs.fit_seconds, *rows) for obs in members]
    pace = RefitPace()
    reserve = FinishReserve(Deadline.after(1000.0), None, "error", 5, 0, True, None, None, None, members,
                            started=True, rows=rows, pace=pace)
    assert reserve.seconds() == pytest.approx(FINISH_SECONDS + sum(plain))
    pace.record("gradient_boosting", 80.0, 40.0)  # a refit ahead took half its prediction
    reserve.forget()
    assert reserve.seconds() == pytest.approx(FINISH_SECONDS + 0.5 * (plain[0] + plain[1]) + plain[2])
