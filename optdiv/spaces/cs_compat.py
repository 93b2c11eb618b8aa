"""The one place that knows the differences between ConfigSpace versions.

optdiv supports three ConfigSpace lines, each pinned by a host framework:

* 0.4.21 (auto-sklearn 0.15's pin, Python 3.9), compiled with Cython;
* 0.6.1 (OpenBox 0.9's pin), compiled with Cython;
* 1.x (newest), pure Python.

Differences handled here (checked against the installed sources of all three):

* adding: 1.x has ``space.add(...)``; 0.4/0.6 only ``add_hyperparameters``/``add_conditions``/
  ``add_forbidden_clauses`` (1.x keeps them, deprecated with warnings);
* listing: 1.x is a mapping (``space.values()``, ``space[name]``); 0.4/0.6 have
  ``get_hyperparameters()``/``get_hyperparameter(name)`` (deprecated in 1.x);
* ``Configuration``: 1.x is a mapping (``dict(config)``) whose categorical values are
  ``numpy.str_``; 0.4/0.6 have ``get_dictionary()``. ``get_array()`` and
  ``Configuration(space, vector=...)`` exist everywhere (inactive entries are NaN);
* value <-> vector: 1.x ``hp.to_vector``/``hp.to_value``; 0.4/0.6 ``hp._inverse_transform``/
  ``hp._transform``. Integer vectors differ slightly between 0.x and 1.x (0.x widens the range
  by 0.5 on both sides), so vectors are comparable within one ConfigSpace version only;
* the vector of a ``Constant`` is 0 in 0.4/0.6 and 1 in 1.x;
* ``sample_configuration(size)`` returns one ``Configuration`` (not a list) when size is 1 in
  0.4/0.6, and warns for ``size=1`` in 1.x;
* ``get_one_exchange_neighbourhood(config, seed)`` takes an int seed in 0.4/0.6 and an int or a
  ``RandomState`` in 1.x;
* 1.x has no ``q`` (quantisation) argument on numerical hyperparameters, so optdiv never uses it.

Everything else in optdiv goes through the small functions below.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Mapping, Sequence

import numpy as np
import ConfigSpace
from ConfigSpace import Configuration, ConfigurationSpace
from ConfigSpace.conditions import EqualsCondition, InCondition
from ConfigSpace.forbidden import ForbiddenAndConjunction, ForbiddenEqualsClause, ForbiddenInClause
from ConfigSpace.hyperparameters import (
    CategoricalHyperparameter,
    Constant,
    OrdinalHyperparameter,
    UniformFloatHyperparameter,
    UniformIntegerHyperparameter,
)
import ConfigSpace.util as _cs_util

__all__ = [
    "CS_VERSION",
    "IS_V1",
    "categorical",
    "uniform_float",
    "uniform_int",
    "constant",
    "equals",
    "in_condition",
    "forbidden_equals",
    "forbidden_in",
    "forbidden_and",
    "new_space",
    "add_hyperparameters",
    "add_conditions",
    "add_forbiddens",
    "hyperparameters",
    "hyperparameter_names",
    "get_hyperparameter",
    "children_of",
    "choices_of",
    "is_categorical",
    "value_to_vector",
    "vector_to_value",
    "make_configuration",
    "check_configuration",
    "sample_configurations",
    "config_to_dict",
    "config_to_array",
    "array_to_config",
    "one_exchange_neighbours",
    "default_configuration",
    "space_of",
]


def _parse_version(text: str) -> tuple:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


CS_VERSION = _parse_version(ConfigSpace.__version__)
IS_V1 = CS_VERSION >= (1, 0, 0)
_MAX_SEED = 2**31 - 1


# --------------------------------------------------------------------------- constructors
def categorical(name: str, choices: Sequence[Any], default: Any = None) -> CategoricalHyperparameter:
    """Categorical hyperparameter; ``default`` None means the first choice."""
    choices = list(choices)
    if default is None:
        default = choices[0]
    return CategoricalHyperparameter(name, choices, default_value=default)


def uniform_float(name: str, lower: float, upper: float, default: float = None, log: bool = False):
    """Uniform (or log-uniform) float hyperparameter."""
    kwargs = {"log": bool(log)}
    if default is not None:
        kwargs["default_value"] = float(default)
    return UniformFloatHyperparameter(name, float(lower), float(upper), **kwargs)


def uniform_int(name: str, lower: int, upper: int, default: int = None, log: bool = False):
    """Uniform (or log-uniform) integer hyperparameter."""
    kwargs = {"log": bool(log)}
    if default is not None:
        kwargs["default_value"] = int(default)
    return UniformIntegerHyperparameter(name, int(lower), int(upper), **kwargs)


def constant(name: str, value: Any) -> Constant:
    return Constant(name, value)


def equals(child, parent, value) -> EqualsCondition:
    """``child`` is active only when ``parent == value``."""
    return EqualsCondition(child, parent, value)


def in_condition(child, parent, values: Sequence[Any]) -> InCondition:
    """``child`` is active only when ``parent`` is one of ``values``."""
    return InCondition(child, parent, list(values))


def forbidden_equals(hp, value) -> ForbiddenEqualsClause:
    return ForbiddenEqualsClause(hp, value)


def forbidden_in(hp, values: Sequence[Any]) -> ForbiddenInClause:
    return ForbiddenInClause(hp, list(values))


def forbidden_and(*clauses) -> ForbiddenAndConjunction:
    return ForbiddenAndConjunction(*clauses)


# --------------------------------------------------------------------------- space building
def new_space(name: str = None, seed: int = None) -> ConfigurationSpace:
    kwargs = {}
    if name is not None:
        kwargs["name"] = name
    if seed is not None:
        kwargs["seed"] = int(seed)
    return ConfigurationSpace(**kwargs)


def _add(space: ConfigurationSpace, items: Iterable, legacy_method: str) -> list:
    """1.x adds every kind of object with ``space.add``; 0.x has one method per kind."""
    items = list(items)
    if items:
        if IS_V1:
            space.add(items)
        else:
            getattr(space, legacy_method)(items)
    return items


def add_hyperparameters(space: ConfigurationSpace, hps: Iterable) -> list:
    return _add(space, hps, "add_hyperparameters")


def add_conditions(space: ConfigurationSpace, conditions: Iterable) -> list:
    return _add(space, conditions, "add_conditions")


def add_forbiddens(space: ConfigurationSpace, clauses: Iterable) -> list:
    return _add(space, clauses, "add_forbidden_clauses")


# --------------------------------------------------------------------------- introspection
def hyperparameters(space: ConfigurationSpace) -> list:
    """Hyperparameter objects in the space's own (vector) order."""
    if IS_V1:
        return list(space.values())
    return list(space.get_hyperparameters())


def hyperparameter_names(space: ConfigurationSpace) -> List[str]:
    """Names in the space's own (vector) order."""
    return [hp.name for hp in hyperparameters(space)]


def get_hyperparameter(space: ConfigurationSpace, name: str):
    if IS_V1:
        return space[name]
    return space.get_hyperparameter(name)


def children_of(space: ConfigurationSpace, name: str) -> List[str]:
    """Names of the hyperparameters whose conditions mention ``name`` directly."""
    if IS_V1:
        children = space.children_of[name]
    else:
        children = space.get_children_of(name)
    return [hp.name for hp in children]


def is_categorical(hp) -> bool:
    """True for categorical and ordinal hyperparameters (finite, index-coded vectors)."""
    return isinstance(hp, (CategoricalHyperparameter, OrdinalHyperparameter))


def choices_of(hp) -> tuple:
    """The finite values of a categorical/ordinal hyperparameter, in vector (index) order."""
    if isinstance(hp, CategoricalHyperparameter):
        return tuple(hp.choices)
    if isinstance(hp, OrdinalHyperparameter):
        return tuple(hp.sequence)
    if isinstance(hp, Constant):
        return (hp.value,)
    raise TypeError("%s is not a categorical hyperparameter" % type(hp).__name__)


def value_to_vector(hp, value) -> float:
    """ConfigSpace's internal vector value of ``value`` (index for categoricals, [0, 1] otherwise)."""
    if IS_V1:
        return float(hp.to_vector(value))
    return float(hp._inverse_transform(value))


def vector_to_value(hp, x: float):
    """Inverse of :func:`value_to_vector`, returning a plain Python value."""
    if IS_V1:
        value = hp.to_value(x)
    else:
        value = hp._transform(x)
    return _native(value)


# --------------------------------------------------------------------------- configurations
def _native(value):
    """numpy scalars (1.x hands back ``numpy.str_`` etc.) to plain Python objects."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def _coerce(hp, value):
    """Make a user/JSON value legal for ``hp`` (e.g. 3.0 for an integer, numpy scalars)."""
    value = _native(value)
    if isinstance(hp, UniformIntegerHyperparameter) or type(hp).__name__.endswith("IntegerHyperparameter"):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return int(value) if isinstance(value, (int, bool)) else value
    if isinstance(hp, UniformFloatHyperparameter) or type(hp).__name__.endswith("FloatHyperparameter"):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        return value
    return value


def make_configuration(space: ConfigurationSpace, values: Mapping[str, Any]) -> Configuration:
    """A validated ``Configuration`` from a dict (values are type-coerced first).

    Raises ``ValueError`` (or a ConfigSpace subclass of it) for illegal, missing or
    forbidden values, and for values given to inactive hyperparameters.
    """
    if isinstance(values, Configuration):
        return values
    names = set(hyperparameter_names(space))
    unknown = [k for k in values if k not in names]
    if unknown:
        raise ValueError("unknown hyperparameter(s) %s" % sorted(unknown))
    coerced = {k: _coerce(get_hyperparameter(space, k), v) for k, v in values.items()}
    config = Configuration(space, values=coerced)
    check_configuration(space, config)
    return config


def check_configuration(space: ConfigurationSpace, config: Configuration) -> None:
    """Raise ``ValueError`` if ``config`` breaks a condition or a forbidden clause."""
    if IS_V1:
        config.check_valid_configuration()  # space.check_configuration is deprecated in 1.x
    else:
        space.check_configuration(config)


def sample_configurations(space: ConfigurationSpace, n: int, seed: int) -> List[Configuration]:
    """``n`` random configurations, always as a list; the same seed gives the same list
    (within one ConfigSpace version)."""
    n = int(n)
    if n <= 0:
        return []
    space.seed(int(seed) % _MAX_SEED)
    if n == 1:
        sampled = space.sample_configuration() if IS_V1 else space.sample_configuration(1)
    else:
        sampled = space.sample_configuration(n)
    if isinstance(sampled, Configuration):
        return [sampled]
    return list(sampled)


def config_to_dict(config) -> dict:
    """Active hyperparameters of a ``Configuration`` (or a dict) as plain Python values."""
    if isinstance(config, Mapping) and not isinstance(config, Configuration):
        items = config.items()
    elif hasattr(config, "get_dictionary") and not IS_V1:
        items = config.get_dictionary().items()
    else:
        items = dict(config).items()
    return {str(k): _native(v) for k, v in items if v is not None}


def config_to_array(config: Configuration) -> np.ndarray:
    """ConfigSpace's internal vector (space order, inactive = NaN) as a float64 copy."""
    return np.array(config.get_array(), dtype=np.float64, copy=True)


def array_to_config(space: ConfigurationSpace, vector) -> Configuration:
    """Inverse of :func:`config_to_array`."""
    return Configuration(space, vector=np.asarray(vector, dtype=np.float64))


def _int_seed(rng) -> int:
    if rng is None:
        return int(np.random.randint(_MAX_SEED))
    if isinstance(rng, (int, np.integer)):
        return int(rng) % _MAX_SEED
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(_MAX_SEED))
    if isinstance(rng, np.random.RandomState):
        return int(rng.randint(_MAX_SEED))
    raise TypeError("rng must be an int, numpy Generator or RandomState, got %r" % type(rng))


def one_exchange_neighbours(config: Configuration, n: int, rng=None) -> List[Configuration]:
    """Up to ``n`` one-exchange neighbours of ``config`` (SMAC's local-search moves).

    Each neighbour changes one active hyperparameter; changing a choice also switches the
    choice's children (newly active children take their default values). Neighbours that
    break a forbidden clause are skipped. ``rng`` is an int, a numpy ``Generator`` or a
    ``RandomState``.
    """
    n = int(n)
    if n <= 0:
        return []
    space = space_of(config)
    seed = _int_seed(rng)
    out: List[Configuration] = []
    iterator = _cs_util.get_one_exchange_neighbourhood(config, seed=seed)
    for neighbour in iterator:
        try:
            check_configuration(space, neighbour)
        except ValueError:
            continue
        out.append(neighbour)
        if len(out) >= n:
            break
    return out


def default_configuration(space: ConfigurationSpace) -> Configuration:
    return space.get_default_configuration()


def with_defaults(space: ConfigurationSpace, values: Mapping[str, Any]) -> Configuration:
    """The configuration holding ``values``, every other active hyperparameter at its default and the inactive ones
    left out (e.g. a choice switched to another algorithm brings that algorithm's defaults)."""
    from ConfigSpace.util import deactivate_inactive_hyperparameters

    full = {hp.name: hp.default_value for hp in hyperparameters(space)}
    full.update({name: _coerce(get_hyperparameter(space, name), value) for name, value in values.items()})
    config = deactivate_inactive_hyperparameters(full, space)
    check_configuration(space, config)
    return config


def space_of(config: Configuration) -> ConfigurationSpace:
    """The space a ``Configuration`` belongs to (``configuration_space`` in 0.x, ``config_space`` in 1.x)."""
    if hasattr(config, "config_space"):
        return config.config_space
    return config.configuration_space
