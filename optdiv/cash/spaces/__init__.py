"""Search spaces for the standalone CASH engine.

``get_space(name, task)`` returns a built-in :class:`SearchSpace`:

* ``"autosklearn"`` -- DivBO's auto-sklearn/VolcanoML-style space (Appendix A.3): 11 classifiers
  (8 regressors), rescalers, feature preprocessors, balancing; about 100 hyperparameters;
* ``"autogluon"`` -- AutoGluon's model families with AutoGluon's own search ranges (LightGBM,
  RF, ExtraTrees, KNN, linear; CatBoost and XGBoost when installed).

A user space is ``SearchSpace.from_configspace(configspace, builder, task, name="user")``.
"""

from __future__ import annotations

from optdiv.cash.spaces.base import TASKS, SearchSpace

__all__ = ["SearchSpace", "get_space", "KNOWN_SPACES", "TASKS"]

KNOWN_SPACES = ("autogluon", "autosklearn")


def get_space(name, task: str = "classification") -> SearchSpace:
    """The built-in search space ``name`` ("autosklearn" or "autogluon") for ``task``.

    A :class:`SearchSpace` instance is returned unchanged (after checking its task).
    """
    if isinstance(name, SearchSpace):
        if name.task != task:
            raise ValueError("search space %r is for %s, not %s" % (name.name, name.task, task))
        return name
    key = str(name).strip().lower().replace("-", "").replace("_", "")
    if key == "autosklearn":
        from optdiv.cash.spaces.autosklearn_space import autosklearn_space

        return autosklearn_space(task)
    if key == "autogluon":
        from optdiv.cash.spaces.autogluon_space import autogluon_space

        return autogluon_space(task)
    raise ValueError("unknown search space %r; known spaces: %s (or a SearchSpace built with "
                     "SearchSpace.from_configspace)" % (name, ", ".join(KNOWN_SPACES)))
