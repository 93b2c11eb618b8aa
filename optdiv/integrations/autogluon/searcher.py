"""A searcher for AutoGluon's own per-model HPO (``hyperparameter_tune_kwargs={"searcher": "optdivbo", ...}`` after
:func:`register_searchers`): EI from the core's random forest over the family's space, re-ranked by the core's
selector on the trial models' validation (bagged: out-of-fold) predictions, which it reads back from disk."""

from __future__ import annotations

import functools
import logging
import math
import os
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from optdiv.core.pending import pick_with_pending
from optdiv.core.selector import DiversityAwareSelector
from optdiv.core.surrogates import ProbabilisticRandomForest, expected_improvement
from optdiv.integrations.autogluon.host import WRITTEN_FOR, HostVersionError, check_host
from optdiv.integrations.autogluon.predictions import loss_for, task_of_problem
from optdiv.spaces import cs_compat
from optdiv.spaces.encoding import ConfigEncoder

logger = logging.getLogger(__name__)


def configspace_of(ag_search_space: Dict[str, Any]):
    """AutoGluon's search space of one model (a dict with ``autogluon.common.space`` values) as a ConfigSpace
    space with the same ranges, so configurations are encoded by the engine's ``ConfigEncoder``.

    ``Real`` keeps its log scale; ``Int`` (and ``Bool``) become integers; a ``Categorical``'s choices become
    their positions ("0", "1", ...), since its values may be any Python object. Fixed values are left out
    (they are the same in every configuration). Returns ``(configspace, names)``.
    """
    from autogluon.common import space as ag_space

    cs = cs_compat.new_space(name="autogluon-hpo")
    hps, names = [], []
    for name, hp in ag_search_space.items():
        if not isinstance(hp, ag_space.Space):
            continue
        if isinstance(hp, ag_space.Categorical):
            default = next((i for i, c in enumerate(hp.data) if c == hp.default), 0)
            new = cs_compat.categorical(name, [str(i) for i in range(len(hp.data))], str(default))
        elif isinstance(hp, ag_space.Real):
            if not float(hp.upper) > float(hp.lower):
                continue
            new = cs_compat.uniform_float(name, hp.lower, hp.upper, None, log=bool(getattr(hp, "log", False)))
        elif isinstance(hp, ag_space.Int):
            if not int(hp.upper) > int(hp.lower):
                continue
            new = cs_compat.uniform_int(name, hp.lower, hp.upper, None)
        else:
            raise ValueError("optdiv's searcher handles Real, Int, Bool and Categorical search spaces; %r is a %s"
                             % (name, type(hp).__name__))
        hps.append(new)
        names.append(name)
    cs_compat.add_hyperparameters(cs, hps)
    return cs, names


def _local_random_searcher():
    from autogluon.core.searcher.local_random_searcher import LocalRandomSearcher

    return LocalRandomSearcher


class _SearcherMixin:
    """DivBO / OptDivBO over one AutoGluon model's search space, inside AutoGluon's own HPO loop.

    AutoGluon tells a searcher only each trial's score. Predictions are obtained by loading the finished trial
    model (``<model path>/T<trial+1>``, where AutoGluon's ``model_trial`` saves it) and predicting the
    validation rows AutoGluon wrote for the HPO run (``val_path`` in the scheduler's ``train_fn_kwargs``). A
    bagged trial model is scored out of fold; its out-of-fold predictions and the training labels
    (``train_path``) are used instead. ``selector_options`` go to the ``DiversityAwareSelector`` (e.g.
    ``fixed_weight``).
    """

    def __init__(self, *, method: str = "optdivbo", n_initial: int = 5, n_candidates: int = 1000,
                 seed: int = 0, callback: Optional[Callable[[dict], Any]] = None,
                 selector_options: Optional[Dict[str, Any]] = None, **kwargs):
        check_host(searcher=True)
        if method not in ("optdivbo", "divbo", "bo"):
            raise ValueError("unknown method %r; choose optdivbo, divbo or bo" % method)
        kwargs.setdefault("random_seed", seed)
        super().__init__(**kwargs)
        self.method, self.n_initial, self.n_candidates = method, int(n_initial), int(n_candidates)
        self.seed, self.callback = int(seed), callback
        self.selector_options = dict(selector_options or {})
        self.configspace, names = configspace_of(self.search_space)
        self.encoder = ConfigEncoder(self.configspace, names)
        self._trial_paths = None  # (model_cls, model root, val_path, train_path, problem_type, eval_metric, bagged)
        self._observed: List[dict] = []  # {"config", "reward", "pred"}
        self._choices: Dict[bytes, dict] = {}  # guided suggestions: did the selector change EI's choice?
        self._y_val = None

    # ---- AutoGluon hooks --------------------------------------------------
    def configure_scheduler(self, scheduler):
        super().configure_scheduler(scheduler)
        kw = getattr(scheduler, "train_fn_kwargs", None) or {}
        params = kw.get("init_params") or {}
        missing = [k for k in ("model_cls", "val_path", "train_path", "init_params") if k not in kw]
        missing += ["init_params[%r]" % k for k in ("path", "name") if k not in params]
        if missing:
            raise HostVersionError(
                "AutoGluon's HPO scheduler no longer hands its searcher %s (train_fn_kwargs; written for %s): "
                "the optdiv searcher cannot find the trial models" % (", ".join(missing), WRITTEN_FOR))
        self._trial_paths = (kw["model_cls"], os.path.join(params["path"], params["name"]), kw["val_path"],
                             kw["train_path"], params.get("problem_type"), params.get("eval_metric"),
                             bool(kw.get("is_bagged_model", False)))

    def get_config(self, **kwargs) -> dict:
        done = [o for o in self._observed if np.isfinite(o["reward"])]
        if len(self._observed) < self.n_initial or len(done) < 2 or not self.encoder.width:
            return super().get_config(**kwargs)
        candidates = self._unseen_candidates()
        if not candidates:
            return super().get_config(**kwargs)
        obs_x = self.encode([o["config"] for o in self._observed])
        rewards = np.array([o["reward"] for o in self._observed], dtype=np.float64)
        losses = -rewards
        losses[~np.isfinite(losses)] = np.nanmax(losses[np.isfinite(losses)])
        cand_x = self.encode(candidates)
        forest = ProbabilisticRandomForest(n_trees=50, seed=self.seed + len(self._observed))
        mean, var = forest.fit(obs_x, losses).predict(cand_x)
        ei = expected_improvement(mean, var, float(losses.min()))
        ei_index = index = int(np.argmax(ei))
        with_preds = [i for i, o in enumerate(self._observed) if o["pred"] is not None]
        weight = None
        if self.method != "bo" and len(with_preds) >= 2 and self._y_val is not None:
            selector = DiversityAwareSelector(method=self.method, metric=self._metric(),
                                              seed=self.seed + len(self._observed), **self.selector_options)
            preds = np.stack([self._observed[i]["pred"] for i in with_preds])
            (pick,) = pick_with_pending(selector, cand_x, ei, obs_x[with_preds], preds, self._y_val,
                                        t=len(self._observed))  # AutoGluon's HPO runs one trial at a time
            index, weight = pick.index, float(pick.selection.weight)
        config = candidates[index]
        self._choices[self._pickle_config(config)] = {"selector_changed": index != ei_index, "weight": weight,
                                                      "ei_choice": candidates[ei_index]}
        self._add_result(config, self._reward_while_pending())
        return config

    def update(self, config: dict, **kwargs):
        super().update(config, **kwargs)
        reward = float(kwargs.get(self._reward_attribute, -math.inf))
        pred = self._trial_predictions(kwargs.get("trial"))
        self._observed.append({"config": dict(config), "reward": reward, "pred": pred})
        if self.callback is not None:
            choice = self._choices.get(self._pickle_config(config), {})
            self.callback({"trial": kwargs.get("trial"), "config": dict(config), "reward": reward,
                           "has_predictions": pred is not None,
                           "selector_changed": bool(choice.get("selector_changed", False)),
                           "weight": choice.get("weight"), "searcher": self})

    def evaluation_failed(self, config, **kwargs):
        super().evaluation_failed(config, **kwargs)
        self._observed.append({"config": dict(config), "reward": -math.inf, "pred": None})

    # ---- helpers ------------------------------------------------------------
    @property
    def observations(self) -> List[dict]:
        """Every finished trial: config, reward and (when readable) validation or out-of-fold predictions."""
        return list(self._observed)

    @property
    def choices(self) -> List[dict]:
        """The guided suggestions in order: whether the selector changed EI's choice, w(t), EI's own choice."""
        return list(self._choices.values())

    def _metric(self) -> str:
        problem_type, metric = (self._trial_paths or (None,) * 7)[4:6]
        task = None if problem_type is None else task_of_problem(problem_type)
        return loss_for(metric, task)

    def _trial_predictions(self, trial) -> Optional[np.ndarray]:
        """The finished trial model's predictions on AutoGluon's validation rows (bagged: out of fold on the
        training rows), or None when the trial saved no model."""
        if trial is None or self._trial_paths is None:
            return None
        model_cls, root, val_path, train_path, problem_type, _, bagged = self._trial_paths
        path = os.path.join(root, "T%d" % (int(trial) + 1))
        try:
            from autogluon.core.utils.loaders import load_pkl

            if bagged:  # scored out of fold: its out-of-fold predictions, on the training rows
                raw = np.asarray(model_cls.load_oof(path), dtype=np.float32)
                _, y = load_pkl.load(train_path)
            else:
                X_val, y = load_pkl.load(val_path)
                raw = np.asarray(model_cls.load(path).predict_proba(X_val), dtype=np.float32)
        except Exception as exc:  # the trial saved no model (failed / timed out)
            logger.debug("no predictions for trial %s: %s", trial, exc)
            return None
        if problem_type in ("regression", "quantile"):
            pred = raw.reshape(-1)
        elif raw.ndim == 1:  # AutoGluon gives binary models' positive-class probability only
            pred = np.stack([1.0 - raw, raw], axis=1).astype(np.float32)
        else:
            pred = raw
        if self._y_val is None:
            y = np.asarray(y)
            self._y_val = y.astype(np.float64) if pred.ndim == 1 else y.astype(np.int64)
        if pred.shape[0] != len(self._y_val) or not np.all(np.isfinite(pred)):
            return None
        return pred

    def _unseen_candidates(self) -> List[dict]:
        from sklearn.model_selection import ParameterSampler

        out, seen = [], set(self._results)
        for params in ParameterSampler(self._params_space, n_iter=self.n_candidates, random_state=self.random_state):
            params = {k: float(v) if isinstance(v, np.floating) else v for k, v in params.items()}
            params.update(self._params_static)
            key = self._pickle_config(params)
            if key not in seen:
                seen.add(key)
                out.append(params)
        return out

    def encode(self, configs: Sequence[dict]) -> np.ndarray:
        """(count, searched hyperparameters) in [0, 1]: the engine's ConfigEncoder on the ConfigSpace form of
        AutoGluon's space (:func:`configspace_of`)."""
        from autogluon.common import space as ag_space

        rows = []
        for config in configs:
            row = {}
            for name in self.encoder.names:
                hp, value = self.search_space[name], config[name]
                if isinstance(hp, ag_space.Categorical):
                    value = str(next((i for i, c in enumerate(hp.data) if c == value), 0))
                elif isinstance(hp, ag_space.Int):
                    value = int(value)
                else:
                    value = float(value)
                row[name] = value
            rows.append(row)
        if not rows:
            return np.empty((0, self.encoder.width))
        return self.encoder.encode(rows)


@functools.lru_cache(maxsize=None)
def searcher_class():
    """The searcher class, built on AutoGluon's LocalRandomSearcher when AutoGluon is imported."""
    return type("OptDivSearcher", (_SearcherMixin, _local_random_searcher()), {"__module__": __package__,
                                                                              "__doc__": _SearcherMixin.__doc__})


def register_searchers() -> List[str]:
    """Make ``"optdivbo"`` and ``"divbo"`` valid ``hyperparameter_tune_kwargs["searcher"]`` names.

    AutoGluon 1.6.3 builds a searcher per model from its name (``searcher_factory``), with that
    model's search space; registering the class is how every model family gets its own searcher.
    """
    import importlib

    check_host(searcher=True)
    # the package re-exports the function under the module's name: fetch the module itself
    factory = importlib.import_module("autogluon.core.searcher.searcher_factory")

    cls = searcher_class()
    for method in ("optdivbo", "divbo"):
        factory.SEARCHER_CONFIGS[method] = {"searcher_cls": functools.partial(cls, method=method)}
    return ["optdivbo", "divbo"]
