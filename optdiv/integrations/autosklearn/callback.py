"""The ``get_smac_object_callback`` (:func:`optdiv_smac`): SMAC built exactly as auto-sklearn's default
``get_smac_object`` builds it, with the optdiv maximiser; and how auto-sklearn's metric becomes the selector's."""

from __future__ import annotations

import logging
from typing import Dict, Optional

import numpy as np

from optdiv.core.metric_vocabulary import resolve, resolve_host
from optdiv.core.selector import DIVERSITY_METHODS, DiversityAwareSelector
from optdiv.integrations.autosklearn.host import check_host
from optdiv.integrations.autosklearn.maximizer import OptDivReport, maximizer_class

logger = logging.getLogger(__name__)


def selector_metric(autosklearn_metric: Optional[str], classification: bool) -> str:
    """The selector's loss for an auto-sklearn metric name: the metric vocabulary's host reading
    (:func:`~optdiv.core.metric_vocabulary.resolve_host`), so a classification metric optdiv cannot compute
    per example (balanced_accuracy, f1, roc_auc, ...) uses 0/1 error's pool and black-box diversity."""
    name = None if autosklearn_metric is None else str(autosklearn_metric)
    return resolve_host(name, "classification" if classification else "regression").name


def computes_exactly(autosklearn_metric: str, classification: bool) -> bool:
    """Whether optdiv computes this auto-sklearn metric itself (the vocabulary's exact tier: a loss or an
    alias such as accuracy or r2); if not, the pool is built with auto-sklearn's own loss for it."""
    try:
        resolve(str(autosklearn_metric), "classification" if classification else "regression")
    except ValueError:
        return False
    return True


class HostLoss:
    """auto-sklearn's loss for its Scorer (lower is better) on an averaged prediction: the number its own
    ensemble builder minimises, so the temporary pool is chosen the way auto-sklearn's ensemble will be."""

    def __init__(self, scorer, task_type: int):
        self.scorer, self.task_type = scorer, int(task_type)

    def __call__(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        from autosklearn.metrics import calculate_loss

        return float(calculate_loss(y_true, y_pred, self.task_type, self.scorer))

    def __repr__(self) -> str:
        return f"<auto-sklearn loss of {self.scorer.name}>"


class OptDivSMAC:
    """auto-sklearn ``get_smac_object_callback`` that builds SMAC like auto-sklearn, with the optdiv maximiser.

    ``method``: ``"optdivbo"`` or ``"divbo"``. ``metric``: the selector's metric (``error``, ``log_loss``,
    ``brier``, ``mse``, ``mae``, ...); default: auto-sklearn's metric, computed by optdiv where it can
    (:func:`computes_exactly`), else the pool uses auto-sklearn's own loss for it and the diversity the
    vocabulary's kind (:func:`selector_metric`). Giving ``metric`` uses that loss for the pool as well.
    ``ensemble_size``: size of the temporary pool (ensemble selection rounds). ``seed``: the selector's
    seed; default: auto-sklearn's seed. ``strict``: raise instead of falling back to SMAC's EI order
    when the re-ranking fails (tests use it). ``selector_kwargs``: further
    :class:`~optdiv.core.selector.DiversityAwareSelector` arguments (``kind``, ``beta``, ``tau``, ...).

    One object serves one fit: its :attr:`report` records what the maximiser did.
    """

    def __init__(self, method: str = "optdivbo", metric: Optional[str] = None, ensemble_size: int = 25,
                 seed: Optional[int] = None, strict: bool = False, selector_kwargs: Optional[Dict] = None):
        if method not in DIVERSITY_METHODS:
            raise ValueError(f"unknown optdiv method {method!r}; choose one of {', '.join(DIVERSITY_METHODS)}")
        if isinstance(ensemble_size, bool) or not isinstance(ensemble_size, (int, np.integer)) or ensemble_size < 1:
            raise ValueError(f"ensemble_size must be a positive integer; got {ensemble_size!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValueError(f"seed must be a non-negative integer or None; got {seed!r}")
        selector_kwargs = dict(selector_kwargs or {})
        clash = {"method", "metric", "ensemble_size", "seed"} & set(selector_kwargs)
        if clash:
            raise ValueError(f"pass {', '.join(sorted(clash))} as optdiv_smac arguments, not in selector_kwargs")
        if "pool_scorer" in selector_kwargs:
            raise ValueError("pool_scorer is set from auto-sklearn's metric; pass metric=... to choose the pool's loss")
        # fail now, not minutes into a fit, on a bad selector argument
        DiversityAwareSelector(method=method, metric=metric or "error", ensemble_size=int(ensemble_size),
                               **selector_kwargs)
        self.method, self.metric, self.ensemble_size = method, metric, int(ensemble_size)
        self.seed, self.strict, self.selector_kwargs = seed, bool(strict), selector_kwargs
        self.report = OptDivReport(method)

    def __repr__(self) -> str:
        return f"optdiv_smac(method={self.method!r}, metric={self.metric!r}, ensemble_size={self.ensemble_size})"

    def __call__(self, scenario_dict, seed, ta, ta_kwargs, metalearning_configurations, n_jobs, dask_client,
                 multi_objective_algorithm=None, multi_objective_kwargs=None):
        """Mirror of ``autosklearn.smbo.get_smac_object`` (0.15.0) plus the acquisition maximiser."""
        from smac.facade.smac_ac_facade import SMAC4AC
        from smac.intensification.intensification import Intensifier
        from smac.intensification.simple_intensifier import SimpleIntensifier
        from smac.runhistory.runhistory2epm import RunHistory2EPM4LogCost
        from smac.scenario.scenario import Scenario

        check_host(ta_kwargs.get("backend"), ta_kwargs)  # before anything is built: a changed host fails here
        if multi_objective_algorithm is not None:
            raise ValueError("optdiv needs a single auto-sklearn metric; got several (multi-objective search)")
        backend = ta_kwargs["backend"]
        task_type = backend.load_datamanager().info["task"]
        classification = self._is_classification(task_type)
        metrics = ta_kwargs.get("metrics") or []
        host_metric = metrics[0] if metrics else None
        pool_scorer = None
        if self.metric is not None:
            metric = pool_metric = self.metric
        else:  # auto-sklearn's metric: optdiv's own loss where it computes it, else the host's loss for the pool
            metric = pool_metric = selector_metric(None if host_metric is None else host_metric.name, classification)
            if host_metric is not None and not computes_exactly(host_metric.name, classification):
                pool_scorer, pool_metric = HostLoss(host_metric, task_type), str(host_metric.name)
                if self.selector_kwargs.get("pool_builder", "caruana") != "caruana":
                    raise ValueError(
                        f"optdiv does not compute auto-sklearn's metric {host_metric.name!r}, so the pool is built "
                        f"with auto-sklearn's loss for it, which needs pool_builder='caruana'; pass metric=... "
                        f"(e.g. 'error') to build a {self.selector_kwargs['pool_builder']} pool on that loss")
        self.report.metric, self.report.pool_metric = metric, pool_metric
        selector = DiversityAwareSelector(method=self.method, metric=metric, ensemble_size=self.ensemble_size,
                                          seed=int(seed) if self.seed is None else int(self.seed),
                                          pool_scorer=pool_scorer, **self.selector_kwargs)

        intensifier = Intensifier if len(scenario_dict["instances"]) > 1 else SimpleIntensifier
        scenario = Scenario(scenario_dict)
        if len(metalearning_configurations) > 0:
            initial_configurations = [scenario.cs.get_default_configuration()] + list(metalearning_configurations)
        else:
            initial_configurations = None
        # SMAC fills these two from the scenario only for its own default maximiser
        maximizer_kwargs = {
            "max_steps": scenario.sls_max_steps,
            "n_steps_plateau_walk": scenario.sls_n_steps_plateau_walk,
            "selector": selector,
            "backend": backend,
            "autosklearn_seed": ta_kwargs.get("autosklearn_seed", seed),
            "classification": classification,
            "report": self.report,
            "strict": self.strict,
        }
        smac = SMAC4AC(
            scenario=scenario,
            rng=seed,
            runhistory2epm=RunHistory2EPM4LogCost,
            tae_runner=ta,
            tae_runner_kwargs=ta_kwargs,
            initial_configurations=initial_configurations,
            run_id=seed,
            intensifier=intensifier,
            dask_client=dask_client,
            n_jobs=n_jobs,
            multi_objective_algorithm=multi_objective_algorithm,
            multi_objective_kwargs=multi_objective_kwargs or {},
            acquisition_function_optimizer=maximizer_class(),
            acquisition_function_optimizer_kwargs=maximizer_kwargs,
        )
        self.report.initial_design_size = int(smac.solver.initial_design.init_budget)
        logger.info("optdiv: SMAC built with the %s maximiser (metric %s, pool on %s, initial design %d)",
                    self.method, metric, pool_metric, self.report.initial_design_size)
        return smac

    @staticmethod
    def _is_classification(task) -> bool:
        from autosklearn.constants import (BINARY_CLASSIFICATION, MULTICLASS_CLASSIFICATION,
                                           MULTILABEL_CLASSIFICATION, MULTIOUTPUT_REGRESSION, REGRESSION)

        if task in (BINARY_CLASSIFICATION, MULTICLASS_CLASSIFICATION):
            return True
        if task == REGRESSION:
            return False
        if task in (MULTILABEL_CLASSIFICATION, MULTIOUTPUT_REGRESSION):
            raise ValueError("optdiv supports binary/multiclass classification and single-output regression, "
                             "not multilabel or multi-output tasks")
        raise ValueError(f"unknown auto-sklearn task type {task!r}")


def optdiv_smac(method: str = "optdivbo", **kwargs) -> OptDivSMAC:
    """The flag: ``AutoSklearnClassifier(get_smac_object_callback=optdiv_smac("optdivbo"))``.

    Use a fresh callback per fit; ``callback.report`` tells what it did. Arguments: see :class:`OptDivSMAC`.
    """
    return OptDivSMAC(method=method, **kwargs)


def switch_on(optdiv) -> bool:
    """Whether the estimators' ``optdiv`` switch is on (anything but None or False)."""
    return optdiv is not None and optdiv is not False


def callback_from_switch(optdiv, optdiv_kwargs) -> Optional[OptDivSMAC]:
    """The callback the estimators' ``optdiv`` switch asks for, checked: None for off and for True (auto-sklearn's
    own search, optdiv's final model), the re-ranking for a method name."""
    if not switch_on(optdiv) or optdiv is True:
        if optdiv is True and optdiv_kwargs:
            raise ValueError("optdiv_kwargs configure the re-ranking: give optdiv='optdivbo' or 'divbo' with them")
        return None
    if not isinstance(optdiv, str) or optdiv not in DIVERSITY_METHODS:
        raise ValueError(f"optdiv must be True, False, None or one of {', '.join(DIVERSITY_METHODS)}; got {optdiv!r}")
    if optdiv_kwargs is not None and not isinstance(optdiv_kwargs, dict):
        raise ValueError(f"optdiv_kwargs must be a dict of optdiv_smac arguments; got {type(optdiv_kwargs).__name__}")
    return OptDivSMAC(method=optdiv, **(optdiv_kwargs or {}))
