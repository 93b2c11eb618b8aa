"""``SearchSpace``: a ConfigSpace space plus a builder from configurations to estimators.

A search space gives the engine everything it needs from a CASH space:

* ``configspace`` -- the ConfigSpace object (any of the supported ConfigSpace versions);
* ``build(config, seed)`` -- an unfitted scikit-learn estimator for one configuration. It receives
  the numeric matrix left by optdiv's generic preprocessing (imputed, one-hot encoded, not scaled);
  the space's own rescaler / feature preprocessor / balancing choices live inside the estimator;
* ``encode(configs)`` -- the ``(count, dims)`` float64 matrix the core's surrogates read: ConfigSpace's
  vector values mapped to [0, 1] (a categorical with k choices takes index / (k - 1)), inactive
  hyperparameters -1, one column per hyperparameter in ``hyperparameter_names`` (sorted) order;
* ``sample``, ``neighbours``, ``default`` -- dict configurations for random search and local search;
* ``algorithm_of(config)`` -- the model family of a configuration (for reports and diversity checks).

Configurations travel as plain dicts of the active hyperparameters (JSON friendly).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from optdiv.spaces import cs_compat
from optdiv.spaces.encoding import ConfigEncoder

TASKS = ("classification", "regression")

Builder = Callable[[Dict[str, Any], int], Any]


def check_task(task: str) -> str:
    """``task`` itself when it is one of :data:`TASKS`, else a ValueError naming them."""
    if task not in TASKS:
        raise ValueError("task must be one of %s, got %r" % (", ".join(TASKS), task))
    return task


def searched_algorithms(space) -> List[str]:
    """The algorithms a suggestion may use: the space's own but those only its start list evaluates (a space object
    without start-only algorithms, such as a host's, offers them all)."""
    return list(getattr(space, "searched_algorithms", space.algorithms))


class SearchSpace:
    """A CASH search space: ConfigSpace space + estimator builder.

    Parameters
    ----------
    name : str
        Short name ("autosklearn", "autogluon", "user", ...).
    task : {"classification", "regression"}
    configspace : ConfigSpace.ConfigurationSpace
    builder : callable(config: dict, seed: int) -> unfitted estimator
    algorithm_key : str, optional
        Name of the categorical hyperparameter that chooses the model family; ``algorithm_of``
        returns its value. Without it, ``algorithm_of`` returns ``name``.
    start_only : sequence of str, optional
        Algorithms evaluated only where a start list names them and never suggested by the search: a family
        offered to the ensemble at fixed settings without taking evaluations from the others' tuning.
    """

    def __init__(self, name: str, task: str, configspace, builder: Builder,
                 algorithm_key: Optional[str] = None, start_only: Sequence[str] = ()):
        if not callable(builder):
            raise TypeError("builder must be callable(config: dict, seed: int) -> estimator")
        self.name = str(name)
        self.task = check_task(task)
        self.configspace = configspace
        self._builder = builder
        names = cs_compat.hyperparameter_names(configspace)
        if algorithm_key is not None and algorithm_key not in names:
            raise ValueError("algorithm_key %r is not a hyperparameter of the space" % algorithm_key)
        self.algorithm_key = algorithm_key
        self.start_only = frozenset(str(a) for a in start_only)
        unknown = self.start_only - set(self.algorithms)
        if unknown:
            raise ValueError("start_only names algorithms the space lacks: %s" % ", ".join(sorted(unknown)))
        self.hyperparameter_names: List[str] = sorted(names)
        self.encoder = ConfigEncoder(configspace, self.hyperparameter_names)
        # (name, hyperparameter, number of choices or 0 for numerical) in encoding order
        self.columns = list(zip(self.encoder.names, self.encoder.hyperparameters, self.encoder.choices))

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_configspace(cls, configspace, builder: Builder, task: str, name: str = "user",
                         algorithm_key: Optional[str] = None, start_only: Sequence[str] = ()) -> "SearchSpace":
        """Wrap a user's ConfigSpace space and ``builder(config_dict, seed) -> estimator``."""
        return cls(name=name, task=task, configspace=configspace, builder=builder,
                   algorithm_key=algorithm_key, start_only=start_only)

    # ------------------------------------------------------------------ basic facts
    @property
    def n_hyperparameters(self) -> int:
        """Width of :meth:`encode`'s output."""
        return len(self.hyperparameter_names)

    def __len__(self) -> int:
        return self.n_hyperparameters

    @property
    def algorithms(self) -> List[str]:
        """The model families the space can choose (``[name]`` without an ``algorithm_key``)."""
        if self.algorithm_key is None:
            return [self.name]
        hp = cs_compat.get_hyperparameter(self.configspace, self.algorithm_key)
        return [str(c) for c in cs_compat.choices_of(hp)]

    @property
    def searched_algorithms(self) -> List[str]:
        """The algorithms the search may suggest: all but the start-only ones."""
        return [a for a in self.algorithms if a not in self.start_only]

    def __repr__(self) -> str:
        return "SearchSpace(name=%r, task=%r, hyperparameters=%d, algorithms=%d)" % (
            self.name, self.task, self.n_hyperparameters, len(self.algorithms))

    # ------------------------------------------------------------------ configurations
    def to_configuration(self, config):
        """A validated ConfigSpace ``Configuration`` (raises ``ValueError`` if illegal)."""
        return cs_compat.make_configuration(self.configspace, config)

    def validate(self, config) -> Dict[str, Any]:
        """``config`` as a checked plain dict (raises ``ValueError`` if illegal)."""
        return cs_compat.config_to_dict(self.to_configuration(config))

    def default(self) -> Dict[str, Any]:
        return cs_compat.config_to_dict(cs_compat.default_configuration(self.configspace))

    def sample(self, n: int, seed: int) -> List[Dict[str, Any]]:
        """``n`` random configurations; the same seed gives the same list."""
        return [cs_compat.config_to_dict(c)
                for c in cs_compat.sample_configurations(self.configspace, n, seed)]

    def neighbours(self, config, n: int, rng=None) -> List[Dict[str, Any]]:
        """Up to ``n`` one-exchange neighbours of ``config``: each changes one active
        hyperparameter (a changed choice also switches its children, which start at their defaults).
        ``rng`` is an int seed, a numpy ``Generator`` or a ``RandomState``."""
        base = self.to_configuration(config)
        return [cs_compat.config_to_dict(c) for c in cs_compat.one_exchange_neighbours(base, n, rng)]

    def algorithm_of(self, config) -> str:
        if self.algorithm_key is None:
            return self.name
        values = cs_compat.config_to_dict(config)
        if self.algorithm_key not in values:
            raise ValueError("configuration has no %r" % self.algorithm_key)
        return str(values[self.algorithm_key])

    # ------------------------------------------------------------------ model building
    def build(self, config, seed: int = 0):
        """An unfitted estimator for ``config`` (dict or ``Configuration``), seeded with ``seed``."""
        values = self.validate(config)
        return self._builder(values, int(seed))

    # ------------------------------------------------------------------ encoding
    def encode(self, configs: Sequence) -> np.ndarray:
        """``(len(configs), n_hyperparameters)`` float64: active values in [0, 1], inactive -1.

        Numerical hyperparameters use ConfigSpace's own [0, 1] vector value (log scale where the
        hyperparameter is log-scaled); a categorical with k choices is index / (k - 1); constants 0.
        Accepts dicts or ``Configuration`` objects; values are not re-validated (optdiv.spaces.encoding).
        """
        return self.encoder.encode(configs)

    def encode_vectors(self, vectors: np.ndarray) -> np.ndarray:
        """:meth:`encode` for ConfigSpace vectors (space order, NaN inactive), with no per-value Python.

        The engine samples thousands of candidates per suggestion; converting each to a dict costs
        far more than sampling, so candidates stay ``Configuration`` objects and are encoded here.
        """
        return self.encoder.encode_vectors(vectors)

    def sample_configurations(self, n: int, seed: int) -> list:
        """``n`` random ``Configuration`` objects (cheap; :meth:`sample` converts them to dicts)."""
        return cs_compat.sample_configurations(self.configspace, n, seed)

    def neighbour_configurations(self, config, n: int, rng=None) -> list:
        """:meth:`neighbours` as ``Configuration`` objects."""
        return cs_compat.one_exchange_neighbours(self.to_configuration(config), n, rng)

