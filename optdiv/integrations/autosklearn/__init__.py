"""auto-sklearn adapter: DivBO / OptDivBO inside auto-sklearn's own SMAC loop, switched on by one keyword.

auto-sklearn builds its SMAC object through a public hook, ``get_smac_object_callback``. :func:`optdiv_smac`
returns such a callback. It builds SMAC exactly as auto-sklearn's default ``get_smac_object`` does (same
scenario, run history, ``RunHistory2EPM4LogCost``, intensifier, meta-learning initial design, random
forest, EI and random interleaving) and swaps one class: the acquisition maximiser. The replacement runs
SMAC's own local + sorted random search, then re-orders SMAC's whole candidate list with the core's
:class:`~optdiv.core.selector.DiversityAwareSelector` (EI rank + w(t) * diversity rank)::

    from autosklearn.classification import AutoSklearnClassifier
    from optdiv.integrations.autosklearn import optdiv_smac

    callback = optdiv_smac(method="optdivbo")
    automl = AutoSklearnClassifier(time_left_for_this_task=120, get_smac_object_callback=callback)
    automl.fit(X, y)
    print(callback.report.summary())

:class:`OptDivAutoSklearnClassifier` / :class:`OptDivAutoSklearnRegressor` are auto-sklearn's estimators with an
``optdiv=True | "optdivbo" | "divbo" | False`` keyword: plain subclasses that hand optdiv's parts to auto-sklearn's
hooks, no patching. ``True`` (the default) keeps auto-sklearn's search and gives the fit optdiv's final model:
its ensemble selection and, with a holdout, the members refitted on every row within the time budget
(:class:`~optdiv.integrations.autosklearn.refit.RefitReserve`, a trials callback that keeps the time); a method name
also hands SMAC the re-ranking callback.

Data the selector sees: every finished SMAC run whose status is SUCCESS (or DONOTADVANCE) is mapped by its
``additional_info["num_run"]`` to auto-sklearn's run folder ``runs/<seed>_<num_run>_<budget>/`` and its
``predictions_ensemble_*.npy`` (auto-sklearn's validation, i.e. "optimisation set", predictions) is read
once and kept in memory, because auto-sklearn deletes the folders of weak runs later
(``max_models_on_disc``). Targets come from ``backend.load_targets_ensemble()``. Crashed, timed-out and
memory-out runs write no predictions and are skipped. auto-sklearn's ensemble builder makes the final
ensemble; :func:`ensemble_members` lists it.

The final ensemble: ``OptDivEnsemble`` (:func:`ensemble_class`) is a class for auto-sklearn's own
``ensemble_class`` hook that chooses the weights as optdiv's engine does, by ensemble selection on log loss for
accuracy and averaged over 20 bootstrap samples of the validation rows for regression, which over-fitted those
rows less than selection on the metric in replay. The OptDiv estimators use it unless the user gives an
``ensemble_class`` or ``optdiv_ensemble=False``; with the plain callback pass
``ensemble_class=OptDivEnsemble``.

auto-sklearn's metric: when optdiv computes it exactly (accuracy, log_loss, r2, mean_squared_error, ...; the
metric vocabulary's :func:`~optdiv.core.metric_vocabulary.resolve` knows it) the selector uses that loss; any
other metric (balanced_accuracy, f1, roc_auc, a custom scorer) builds the temporary pool with auto-sklearn's
own ``calculate_loss`` for it, as its ensemble builder does, and measures diversity with the vocabulary's kind
for it (the black-box mix for classification).

Several workers (``n_jobs > 1``): configurations SMAC has submitted and not yet finished (RUNNING in its run
history) enter the selector for that call with believed predictions, the mean of their three nearest
finished runs' predictions (:mod:`optdiv.core.believers`, the engine's rule), so the next suggestion is
diverse against them too.

Host internals this relies on are checked when auto-sklearn builds SMAC (:func:`check_host`): a changed
host raises :class:`HostVersionError` instead of quietly searching in SMAC's own order.

Written against auto-sklearn 0.15.0 and SMAC 1.2 (:data:`WRITTEN_FOR`; both imported lazily: importing this
module does not need them). Differences from the papers, where a host sets the terms: candidates are SMAC's (5,000
sorted random configurations plus local-search results, acq_opt_challengers) and the performance
acquisition is SMAC's EI on log cost; auto-sklearn's initial design (default + meta-learning
configurations) replaces the papers' five random suggestions; SMAC's random interleaving (rand_prob)
is kept, so roughly every other suggestion is a random configuration that no maximiser sees.
"""

from optdiv.integrations.autosklearn.callback import (HostLoss, OptDivSMAC, computes_exactly, optdiv_smac,
                                                      selector_metric)
from optdiv.integrations.autosklearn.ensemble import ensemble_class
from optdiv.integrations.autosklearn.estimators import ensemble_members, estimator_class
from optdiv.integrations.autosklearn.host import WRITTEN_FOR, HostVersionError, check_host, host_problems
from optdiv.integrations.autosklearn.maximizer import OptDivReport, maximizer_class

__all__ = [
    "OptDivSMAC",
    "OptDivReport",
    "HostVersionError",
    "WRITTEN_FOR",
    "check_host",
    "optdiv_smac",
    "selector_metric",
    "computes_exactly",
    "HostLoss",
    "host_problems",
    "ensemble_members",
    "ensemble_class",
    "OptDivEnsemble",
    "OptDivAutoSklearnClassifier",
    "OptDivAutoSklearnRegressor",
]


def __getattr__(name: str):
    """Host classes are built on first access, so importing this package does not import auto-sklearn."""
    if name in ("OptDivAutoSklearnClassifier", "OptDivAutoSklearnRegressor"):
        cls = estimator_class(name)
        globals()[name] = cls
        return cls
    if name == "OptDivEnsemble":
        cls = ensemble_class()
        globals()[name] = cls
        return cls
    if name == "OptDivLocalAndSortedRandomSearch":
        cls = maximizer_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
