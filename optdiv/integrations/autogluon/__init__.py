"""AutoGluon-Tabular adapter: DivBO / OptDivBO add good and different models to what AutoGluon trains.

Two entry points, both driven by the core's one ``DiversityAwareSelector``:

* :func:`fit` -- the hook (the recommended route), called where ``predictor.fit`` was, with the same
  arguments. Phase 1 is the fit the user asked AutoGluon for: their ``presets`` and ``hyperparameters``
  (AutoGluon's default portfolio when they give none), bagging and stacking as they set them. Phase 2
  spends the rest of ``time_limit`` on suggestions over AutoGluon's model families (GBM, CAT, XGB, RF, XT,
  KNN, LR; the installed ones), each trained by AutoGluon through ``fit_extra``. The suggestions'
  history starts with phase 1's models and their validation (or, bagged, out-of-fold) predictions, so
  diversity is measured against what AutoGluon already has. At the end AutoGluon refits its weighted
  ensemble over every model; the predictor keeps it only if it beats AutoGluon's own best model on
  validation, and a test on check rows that phase 2 never scored says the gain is not just the search's picks
  fitting the rows they were picked on, so the result is never worse there than AutoGluon alone. AutoGluon's post-fit steps
  (refit_full, calibration, keep_only_best, save_space) run once, on the final predictor.
* :class:`OptDivSearcher` -- a searcher for AutoGluon's own per-model HPO
  (``hyperparameter_tune_kwargs={"scheduler": "local", "searcher": "optdivbo", ...}`` after
  :func:`register_searchers`). AutoGluon reports only a score to a searcher; the searcher reloads each
  finished trial model from disk and reads its validation predictions (bagged: its out-of-fold ones).

Both routes encode configurations with the engine's ``optdiv.spaces.encoding.ConfigEncoder`` (the hook's
space is a ConfigSpace space; the searcher turns AutoGluon's ``space`` objects into one) and read
AutoGluon's ``eval_metric`` through the core's metric vocabulary.

The adapter relies on AutoGluon internals; :func:`check_host` checks them when a fit or a searcher starts,
and a changed host raises :class:`HostVersionError` instead of searching in AutoGluon's own order unnoticed.
Written against AutoGluon-Tabular 1.6.3 (:data:`WRITTEN_FOR`). AutoGluon types stay in this module;
``optdiv.core`` sees numpy arrays only.
"""

from optdiv.core.pool_check import CHECK_SHARE, check_rows, switch_confidence_cv, switch_confidence_heldout
from optdiv.integrations.autogluon.families import (FAMILIES, available_families, from_hyperparameters,
                                                    search_space, to_hyperparameters)
from optdiv.integrations.autogluon.hook import (ENSEMBLE_SUFFIX, SWITCH_CONFIDENCE, AutoGluonSearch, Trial,
                                                fit)
from optdiv.integrations.autogluon.host import WRITTEN_FOR, HostVersionError, check_host
from optdiv.integrations.autogluon.predictions import (metric_loss, optdiv_metric, validation_predictions,
                                                       validation_targets)
from optdiv.integrations.autogluon.searcher import configspace_of, register_searchers, searcher_class


def __getattr__(name):  # OptDivSearcher needs AutoGluon; build it only when asked for
    if name == "OptDivSearcher":
        return searcher_class()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


__all__ = [
    "fit",
    "AutoGluonSearch",
    "Trial",
    "FAMILIES",
    "HostVersionError",
    "WRITTEN_FOR",
    "ENSEMBLE_SUFFIX",
    "SWITCH_CONFIDENCE",
    "CHECK_SHARE",
    "check_host",
    "available_families",
    "search_space",
    "to_hyperparameters",
    "from_hyperparameters",
    "configspace_of",
    "switch_confidence_cv",
    "switch_confidence_heldout",
    "check_rows",
    "metric_loss",
    "optdiv_metric",
    "validation_predictions",
    "validation_targets",
    "register_searchers",
    "OptDivSearcher",
]
