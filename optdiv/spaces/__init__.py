"""Search spaces for the standalone CASH engine.

``get_space(name, task)`` returns a built-in :class:`SearchSpace`:

* ``"autosklearn"`` -- DivBO's auto-sklearn/VolcanoML-style space (Appendix A.3): 11 classifiers
  (8 regressors), rescalers, feature preprocessors, balancing; about 100 hyperparameters;
* ``"autosklearn+mlp"`` -- the same with scikit-learn's multi-layer perceptron as one more model;
* ``"autosklearn+defaultmlp"`` -- the perceptron evaluated once, at its defaults, and never tuned;
* ``"autosklearn+defaultcatboost"`` -- CatBoost evaluated once, at its defaults, and never tuned (needs catboost);
* ``"autogluon"`` -- AutoGluon's model families with AutoGluon's own search ranges (LightGBM,
  RF, ExtraTrees, KNN, linear; CatBoost and XGBoost when installed).

A user space is ``SearchSpace.from_configspace(configspace, builder, task, name="user")``.
"""

from __future__ import annotations

from optdiv.spaces.base import TASKS, SearchSpace

__all__ = ["SearchSpace", "get_space", "KNOWN_SPACES", "TASKS"]


def _autosklearn(name: str):
    """The builder of the auto-sklearn space variant ``name``, importing its module only when called."""

    def build(task: str) -> SearchSpace:
        from optdiv.spaces.autosklearn_space import named_space

        return named_space(name, task)

    return build


def _autogluon(task: str) -> SearchSpace:
    from optdiv.spaces.autogluon_space import autogluon_space

    return autogluon_space(task)


#: The built-in spaces by name (imported on first use: each pulls in its model libraries).
_BUILT_IN = {"autogluon": _autogluon, **{name: _autosklearn(name) for name in (
    "autosklearn", "autosklearn+mlp", "autosklearn+defaultmlp", "autosklearn+defaultcatboost")}}
KNOWN_SPACES = tuple(_BUILT_IN)


def get_space(name, task: str = "classification") -> SearchSpace:
    """The built-in search space ``name`` (one of :data:`KNOWN_SPACES`) for ``task``.

    A :class:`SearchSpace` instance is returned unchanged (after checking its task).
    """
    if isinstance(name, SearchSpace):
        if name.task != task:
            raise ValueError("search space %r is for %s, not %s" % (name.name, name.task, task))
        return name
    key = str(name).strip().lower().replace("-", "").replace("_", "")
    if key in _BUILT_IN:
        return _BUILT_IN[key](task)
    raise ValueError("unknown search space %r; known spaces: %s (or a SearchSpace built with "
                     "SearchSpace.from_configspace)" % (name, ", ".join(KNOWN_SPACES)))
