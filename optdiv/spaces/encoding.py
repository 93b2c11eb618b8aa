"""ConfigSpace configurations -> the core's float vectors, in one place for the engine and every adapter.

The core's surrogates read ``(count, dims)`` float64 with every value in [0, 1] and inactive
hyperparameters -1. ConfigSpace's own vector form is almost that: numbers are already scaled to [0, 1]
(log scale where set) and inactive values are NaN; a categorical or ordinal holds its index, mapped here to
index / (k - 1); a constant (one choice) is 0 whatever its ConfigSpace vector (0 in 0.4 / 0.6, 1 in 1.x);
everything is clipped to [0, 1] (normal and beta hyperparameters of user spaces can leave it). Vectors are
comparable within one ConfigSpace version only (cs_compat explains why).
"""

from __future__ import annotations

from typing import List, Mapping, Optional, Sequence

import numpy as np

from optdiv.spaces import cs_compat


def choice_count(hp) -> int:
    """k, the number of values a categorical, ordinal or constant hyperparameter takes (1 for a constant);
    0 for a numerical one, whose ConfigSpace vector value is already in [0, 1]."""
    try:
        return len(cs_compat.choices_of(hp))
    except TypeError:
        return 0


class ConfigEncoder:
    """Encodes configurations of one ConfigSpace space, one column per hyperparameter in ``names`` order.

    ``names`` defaults to the space's own (vector) order; the engine's ``SearchSpace`` uses sorted names.
    The per-column arrays are computed once, so :meth:`encode_vectors` is a few numpy operations on the whole
    candidate matrix (thousands of rows per suggestion).
    """

    def __init__(self, configspace, names: Optional[Sequence[str]] = None):
        space_names = cs_compat.hyperparameter_names(configspace)
        self.names: List[str] = list(space_names if names is None else names)
        self.hyperparameters = [cs_compat.get_hyperparameter(configspace, name) for name in self.names]
        self.choices: List[int] = [choice_count(hp) for hp in self.hyperparameters]
        self.vector_width = len(space_names)
        position = {name: i for i, name in enumerate(space_names)}
        self._take = np.array([position[name] for name in self.names], dtype=np.intp)
        self._divisor = np.array([k - 1.0 if k > 1 else 1.0 for k in self.choices])
        self._constant = np.array([k == 1 for k in self.choices], dtype=bool)
        self._column = {name: j for j, name in enumerate(self.names)}

    @property
    def width(self) -> int:
        """Columns of the encoding."""
        return len(self.names)

    def column(self, name: str) -> int:
        """The encoding's column of hyperparameter ``name``."""
        return self._column[name]

    def choice_indices(self, encoded: np.ndarray, name: str) -> np.ndarray:
        """The choice index of the categorical ``name`` in each encoded row, read back without decoding
        (the inverse of index / (k - 1); only for rows where ``name`` is active)."""
        col = self.column(name)
        return np.rint(encoded[:, col] * (self.choices[col] - 1)).astype(np.intp)

    def vectors(self, configs: Sequence) -> np.ndarray:
        """ConfigSpace vectors (space order, NaN inactive) of ``Configuration`` objects, one row each."""
        if len(configs) == 0:
            return np.empty((0, self.vector_width), dtype=np.float64)
        vectors = np.array([c.get_array() for c in configs], dtype=np.float64)
        if vectors.ndim != 2 or vectors.shape[1] != self.vector_width:
            raise ValueError(f"configurations do not belong to this space: {self.vector_width} hyperparameters, "
                             f"vectors of shape {vectors.shape}")
        return vectors

    def encode_vectors(self, vectors) -> np.ndarray:
        """The encoding of ConfigSpace vectors (rows in space order, NaN inactive), with no per-value Python."""
        vectors = np.asarray(vectors, dtype=np.float64)
        x = vectors[:, self._take] / self._divisor
        x[:, self._constant] = np.where(np.isnan(x[:, self._constant]), np.nan, 0.0)
        x = np.clip(x, 0.0, 1.0)
        return np.where(np.isnan(x), -1.0, x)

    def encode(self, configs: Sequence) -> np.ndarray:
        """The encoding of ``Configuration`` objects or dicts of active values (dicts are not re-validated).

        A single configuration is encoded as a one-row matrix.
        """
        if isinstance(configs, Mapping) or hasattr(configs, "get_array"):
            configs = [configs]
        if len(configs) and all(hasattr(c, "get_array") for c in configs):
            return self.encode_vectors(self.vectors(configs))
        return self._encode_dicts(configs)

    def _encode_dicts(self, configs: Sequence) -> np.ndarray:
        """Per value, as ConfigSpace would vectorise it: dicts have no vector to start from."""
        out = np.full((len(configs), self.width), -1.0, dtype=np.float64)
        for row, config in enumerate(configs):
            values = cs_compat.config_to_dict(config)
            for col, (name, hp, k) in enumerate(zip(self.names, self.hyperparameters, self.choices)):
                if name not in values:
                    continue
                if k == 1:
                    out[row, col] = 0.0
                    continue
                x = cs_compat.value_to_vector(hp, values[name])
                if k > 1:
                    x = x / (k - 1)
                out[row, col] = min(max(x, 0.0), 1.0)
        return out
