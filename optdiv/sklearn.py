"""scikit-learn estimators that run an optdiv search inside ``fit``.

``OptDivClassifier().fit(X, y)`` splits off a stratified validation set (or takes ``X_val``/``y_val``),
searches the chosen space with DivBO/OptDivBO, and keeps the final ensemble refitted on train+validation
(``refit=True``, the default; ``refit=False`` keeps the members fitted on the training part). Parameters are
plain constructor arguments, so ``get_params``, ``clone``, grid search and pickling work as for any scikit-learn
estimator.

``time_budget`` (seconds) bounds the whole ``fit``, final model included: the search stops early enough to
build it, no evaluation runs past the deadline (one cut there is discarded), and the ensemble members are
the pipelines fitted during the search, loaded rather than refitted; ``refit=True`` (the default) then refits
them on train+validation, heaviest weight first, as far as the refits are predicted to fit in the time left; the
others stay fitted on the training part and ``result_.info["final_model"]["refit_skipped"]`` says how many.
``fit`` ends within a few seconds of the budget (at most max(5 %, 10 s) over it in the benchmarks/time_budget.py runs).
``budget="auto"`` (the default) lets the time budget alone end the search, and caps it at 50 evaluations when there
is no time budget; a number caps the evaluations under a time budget too.

``cv=K`` evaluates every configuration by K-fold cross-validation over all the rows given (out-of-fold
validation predictions: far more rows for choosing the ensemble on small data). ``cv="auto"`` (the default) does
so with 5 folds on at most 4,000 rows and keeps the holdout split on larger data, or when ``X_val``/``y_val`` are
given; ``cv=None`` always holds out. Under cross-validation ``fold_models="bagged"`` (the default) keeps each final
member as the average of its K fold models, the very fits whose out-of-fold predictions chose it (lower test error
on small data than one refit on every row); ``"refit"`` refits each member once on all the rows instead.

``ensemble_loss`` / ``ensemble_bags`` ("auto" by default) set what the final ensemble selection minimises and
how many bootstrap selections it averages; "auto" is what over-fitted the validation rows least in replay
(log loss for a 0/1-error classifier, 20 bags for a regressor); ``None`` / ``0`` is the papers' protocol.

``n_jobs=-1`` (the default) uses every core this process may use: with ``time_budget``, ``parallel="auto"`` (the
default) runs one evaluation per core, each in its own process, and the final members are refitted on every core;
without one, one evaluation at a time takes the cores as its model's threads, so a seeded fit repeats exactly.
``n_jobs=1`` keeps to one core. ``search_rows="auto"`` (the default) fits the search's
evaluations on a sample of at most 250 training rows per second of ``time_budget`` (at least 20,000; a
proportional validation sample beside it), so large data is searched over many models, and refits the final
members on every row as far as the budget allows; ``None`` always searches on every row.

``time_limit="auto"`` (the default) gives one evaluation (each fold, with ``cv``) a tenth of ``time_budget``,
between 10 and 120 s, as auto-sklearn does, so no single slow configuration spends most of the budget; 120 s
without a time budget.

``portfolio="auto"`` (the default) evaluates each strong algorithm at its library's defaults first (LightGBM,
extra trees, random forest, gradient boosting, KNN, a linear model, an SVM) when the method is BO-family and the
space built in, then lets the strategy take over; ``"builtin"``, a portfolio file or a list of configurations
choose another warm start, ``None`` the papers' random initial design (optdiv.spaces.portfolio).

Every option of ``optdiv run`` is a constructor argument with the same meaning (``constraints``, ``workers`` /
``scheduler`` for Dask, ``sampler``, ``vote``, ``pool``, ``memory_limit_mb``, ``faults``, ...): they are the fields
of :class:`~optdiv.config.RunConfig`, which :meth:`run_config` returns.

After ``fit``, ``leaderboard()`` is every evaluation as a DataFrame (best validation loss first, with the final
ensemble's weights), ``show(folder)`` writes the figures ``optdiv show`` draws of a run directory, and
``plot_progress()`` / ``plot_diversity()`` / ``plot_algorithms()`` return them as matplotlib figures (the ``plot``
extra); all of them read the history the estimator keeps (optdiv.show.view).
"""

from __future__ import annotations

import time
import warnings
from typing import Optional, Union

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from optdiv.data import (
    Splits,
    check_predict_columns,
    cross_validation_view,
    from_xy,
    resolve_cv,
    split_train_validation,
)
from optdiv import sklearn_inputs
from optdiv.budget import deadline_for
from optdiv.config import RunConfig
from optdiv.engine.search import search
from optdiv.evaluation.memory import peak_memory_mb
from optdiv.final.fit import fit_model


#: The product's defaults (one place for them: :meth:`RunConfig.product`), which the constructors repeat as their
#: parameters' defaults so that ``get_params``, ``clone`` and grid search see them.
_PRODUCT = RunConfig.product()


class _OptDivEstimator(BaseEstimator):
    _task = ""

    def __init__(
        self,
        method: str = _PRODUCT.method,
        space=_PRODUCT.space,
        metric: Optional[str] = _PRODUCT.metric,
        budget: Union[int, str, None] = _PRODUCT.budget,
        time_budget: Optional[float] = _PRODUCT.time_budget,
        time_limit=_PRODUCT.time_limit,
        ensemble: str = _PRODUCT.ensemble,
        ensemble_size: int = _PRODUCT.ensemble_size,
        refit: bool = _PRODUCT.refit,
        validation_size: float = 0.25,
        seed: int = _PRODUCT.seed,
        portfolio=_PRODUCT.portfolio,
        cv=_PRODUCT.cv,
        fold_models: str = _PRODUCT.fold_models,
        algorithm_share: Optional[float] = _PRODUCT.algorithm_share,
        ensemble_loss: Optional[str] = _PRODUCT.ensemble_loss,
        ensemble_bags=_PRODUCT.ensemble_bags,
        cost_aware: bool = _PRODUCT.cost_aware,
        sampler: str = _PRODUCT.sampler,
        vote: bool = _PRODUCT.vote,
        pool: str = _PRODUCT.pool,
        constraints=None,
        search_rows=_PRODUCT.search_rows,
        n_jobs: Optional[int] = _PRODUCT.n_jobs,
        parallel=_PRODUCT.parallel,
        refit_ahead: bool = _PRODUCT.refit_ahead,
        workers: Optional[int] = _PRODUCT.workers,
        scheduler: Optional[str] = _PRODUCT.scheduler,
        memory_limit_mb: Union[int, str, None] = _PRODUCT.memory_limit_mb,
        faults=_PRODUCT.faults,
    ):
        self.method = method
        self.space = space
        self.metric = metric
        self.budget = budget
        self.time_budget = time_budget
        self.time_limit = time_limit
        self.ensemble = ensemble
        self.ensemble_size = ensemble_size
        self.refit = refit
        self.validation_size = validation_size
        self.seed = seed
        self.portfolio = portfolio
        self.cv = cv
        self.fold_models = fold_models
        self.algorithm_share = algorithm_share
        self.ensemble_loss = ensemble_loss
        self.ensemble_bags = ensemble_bags
        self.cost_aware = cost_aware
        self.sampler = sampler
        self.vote = vote
        self.pool = pool
        self.constraints = constraints
        self.search_rows = search_rows
        self.n_jobs = n_jobs
        self.parallel = parallel
        self.refit_ahead = refit_ahead
        self.workers = workers
        self.scheduler = scheduler
        self.memory_limit_mb = memory_limit_mb
        self.faults = faults

    def run_config(self) -> RunConfig:
        """The search options this estimator stands for (every RunConfig field is a constructor argument)."""
        return RunConfig(**{name: getattr(self, name) for name in RunConfig.names() if name != "optimizer_options"})

    def fit(self, X, y, X_val=None, y_val=None):
        """Search, then keep the ensemble; ``X_val``/``y_val`` replace the internal validation split.

        ``time_budget`` counts from the start of this call and covers the final ensemble too."""
        started = time.perf_counter()
        if (X_val is None) != (y_val is None):
            raise ValueError("pass both X_val and y_val, or neither")
        name = type(self).__name__
        classification = self._task == "classification"
        X = sklearn_inputs.features(X, name, min_rows=sklearn_inputs.MIN_FIT_ROWS)
        y = sklearn_inputs.target(y, len(X), name, classification)
        data = from_xy(X, y, task=self._task, name=name, min_rows=sklearn_inputs.MIN_FIT_ROWS)
        if X_val is None:
            splits = split_train_validation(data, seed=self.seed, val_size=self.validation_size)
        else:
            X_val = sklearn_inputs.features(X_val, name)
            y_val = sklearn_inputs.target(y_val, len(X_val), name, classification)
            val = from_xy(X_val, y_val, task=self._task, name="validation", classes=data.classes, min_rows=1)
            check_predict_columns(list(data.X.columns), val.X)
            splits = Splits(data.X, data.y, val.X[list(data.X.columns)], val.y, None, None)
        # "auto" keeps a validation set the caller gave; a number of folds pools it with the training rows
        cv = None if self.cv == "auto" and X_val is not None else resolve_cv(self.cv, len(splits.y_train) +
                                                                             len(splits.y_val))
        if cv is not None:  # before the search, so the final members are fitted on every row too
            splits = cross_validation_view(splits, cv, self.seed, self._task)
        n_classes = None if data.classes is None else len(data.classes)
        result = search(splits, self._task, self.run_config().replace(cv=None), n_classes=n_classes,
                        classes=data.classes, columns=list(data.X.columns), started=started)
        try:
            self.ensemble_ = fit_model(result, result.space, splits, self._task, data.classes, list(data.X.columns),
                                       self.seed, refit=self.refit, deadline=deadline_for(self.time_budget, started),
                                       threads=result.info.get("refit_threads", result.info.get("threads", 1)))
        finally:
            if result.pipelines is not None:
                result.pipelines.cleanup()  # the members are in the ensemble now; the temporary folder can go
        result.info["peak_memory_mb"] = peak_memory_mb()
        self.result_ = result
        searched = splits if result.fitted_on is None else result.fitted_on  # a row sample on large data
        self.validation_targets_ = np.asarray(searched.y_val)  # what the history's validation predictions score on
        self.weights_ = np.asarray(result.weights)
        self.members_ = self.ensemble_.info
        self.val_loss_ = result.val_loss
        self.feature_names_in_ = np.asarray(data.X.columns, dtype=object)
        self.n_features_in_ = len(data.X.columns)
        if data.classes is not None:
            self.classes_ = np.asarray(data.classes)
        return self

    @property
    def history_(self):
        """One row per evaluation: index, algorithm, status, val_loss, fit_seconds, config."""
        import pandas as pd

        self._check_fitted()
        rows = [
            {
                "index": obs.index,
                "algorithm": obs.algorithm,
                "status": obs.status,
                "val_loss": obs.val_loss,
                "fit_seconds": obs.fit_seconds,
                "in_ensemble": obs.index in set(self.result_.member_indices),
                "config": obs.config,
            }
            for obs in self.result_.history
        ]
        return pd.DataFrame(rows)

    def _view(self):
        from optdiv.show.view import view_of_search

        self._check_fitted()
        return view_of_search(self.result_, self.validation_targets_, self._task, type(self).__name__,
                              self.ensemble_size)

    def leaderboard(self):
        """Every evaluation, best validation loss first: index, algorithm, status, val_loss (NaN for a failure),
        fit_seconds, its own peak memory (peak_mb) and the final ensemble's weight (0 outside it), as a pandas
        DataFrame."""
        from optdiv.show.view import leaderboard

        return leaderboard(self._view())

    def show(self, path=".", dpi: int = 100):
        """Write the search's figures (progress.png, ensemble_diversity.png, algorithms.png) into the folder
        ``path``; returns their paths. Needs matplotlib (``pip install "optdiv[plot]"``)."""
        from optdiv.show.view import write_figures

        view = self._view()
        written, notes = write_figures(view, path, dpi=dpi)
        for note in dict.fromkeys(view.notes + notes):  # what was left out, each said once
            warnings.warn(note, UserWarning, stacklevel=2)
        return written

    def plot_progress(self):
        """The search's validation loss against evaluations and time, as a matplotlib Figure."""
        from optdiv.show.view import progress_figure

        return progress_figure(self._view())

    def plot_diversity(self):
        """The final ensemble's pairwise diversity heatmap as a matplotlib Figure (None for a single member)."""
        from optdiv.show.view import diversity_figure

        return diversity_figure(self._view())[0]

    def plot_algorithms(self):
        """Evaluations per algorithm by status, the ensemble's members marked, as a matplotlib Figure."""
        from optdiv.show.view import algorithms_figure

        return algorithms_figure(self._view())

    def _check_fitted(self):
        if not hasattr(self, "ensemble_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def predict(self, X):
        self._check_fitted()
        return self.ensemble_.predict(self._predict_input(X))

    def _predict_input(self, X):
        return sklearn_inputs.predict_features(X, self.feature_names_in_, type(self).__name__)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # densified (sklearn_inputs.DENSE_LIMIT_BYTES)
        tags.input_tags.allow_nan = True  # every pipeline imputes missing values
        tags.non_deterministic = True  # the search is timed: a time budget ends it after as many fits as fit
        return tags

    def _more_tags(self):  # the same for scikit-learn before 1.6
        return {"allow_nan": True, "non_deterministic": True, "X_types": ["2darray", "sparse", "categorical"]}


class OptDivClassifier(ClassifierMixin, _OptDivEstimator):
    """Classifier whose ``fit`` searches for a diverse ensemble; ``score`` is accuracy."""

    _task = "classification"

    def predict_proba(self, X):
        self._check_fitted()
        return self.ensemble_.predict_proba(self._predict_input(X))


class OptDivRegressor(RegressorMixin, _OptDivEstimator):
    """Regressor whose ``fit`` searches for a diverse ensemble; ``score`` is R^2."""

    _task = "regression"
