"""Where suggestions come from: the whole search space (live runs) or a fixed library (replay runs).

Every optimiser draws its random picks, its acquisition candidates and its mutations through one of
these two sources, so a method behaves the same in both modes and differs only in what it may choose:
- `SpaceCandidates`: random samples of the space plus one-exchange neighbours of good observations;
- `LibraryCandidates`: the library members not yet evaluated (see optdiv.bench.library).
Both can restrict themselves to one algorithm (the arms of Rising Bandit and per-algorithm BO), and both say
whether an algorithm still has something to offer (:meth:`can_offer`) and what a random pick chooses among
(:meth:`random_choices`), so no strategy needs to know which kind of source it draws from.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from optdiv.spaces.base import searched_algorithms
from optdiv.spaces.cs_compat import config_to_dict


def config_key(config: Dict) -> tuple:
    """A hashable identity of a configuration dict (values compared by repr, so 1 and 1.0 differ)."""
    return tuple(sorted((k, repr(v)) for k, v in config.items()))


def observation_key(obs) -> tuple:
    """``config_key`` of an observation's configuration, computed once and kept on the observation
    (``Observation.config_key``: every suggestion needs the keys of the whole history). A history may also hold
    other records with a ``config`` (a host's own); they get the attribute on first use."""
    key = getattr(obs, "config_key", None)
    if key is None:
        key = obs.config_key = config_key(obs.config)
    return key


def seen_keys(history) -> set:
    return {observation_key(obs) for obs in history}


def _allowed(algorithm) -> Optional[frozenset]:
    """None (any algorithm), or the set of algorithm names a restriction allows (a name or a collection)."""
    if algorithm is None:
        return None
    return frozenset([algorithm]) if isinstance(algorithm, str) else frozenset(algorithm)


def algorithm_codes(space, encoded: np.ndarray) -> np.ndarray:
    """Algorithm name of each encoded row, read from the algorithm column without decoding."""
    algorithms = list(space.algorithms)
    if space.algorithm_key is None or len(algorithms) == 1:
        return np.full(len(encoded), algorithms[0], dtype=object)
    return np.asarray(algorithms, dtype=object)[space.encoder.choice_indices(encoded, space.algorithm_key)]


class SpaceCandidates:
    """Live mode: anything in the space can be suggested."""

    def __init__(self, space):
        self.space = space

    def algorithms(self) -> List[str]:
        return searched_algorithms(self.space)

    def can_offer(self, seen: set, algorithm=None) -> bool:
        """Whether a configuration (of ``algorithm``, a name or a collection) not in ``seen`` can still be offered:
        a live space never runs out."""
        return True

    def random_choices(self, rng: np.random.Generator, seen: set, algorithm=None, tries: int = 20) -> List[Dict]:
        """What a random pick chooses among: ``tries`` random new configurations (of ``algorithm``)."""
        return [self.random(rng, seen, algorithm) for _ in range(tries)]

    def offer(self, config: Dict) -> Optional[Dict]:
        """``config`` as the space validates it, or None when it is not a configuration of this space."""
        try:
            return self.space.validate(config)
        except Exception:  # unknown or missing hyperparameters, values out of range, a forbidden combination
            return None

    def random(self, rng: np.random.Generator, seen: set, algorithm: Optional[str] = None, tries: int = 20) -> Dict:
        config = None
        allowed = _allowed(algorithm)
        for _ in range(tries):
            batch = self.space.sample(1 if allowed is None else 64, seed=int(rng.integers(2**31)))
            for config in batch:
                if allowed is not None and self.space.algorithm_of(config) not in allowed:
                    continue
                if config_key(config) not in seen:
                    return config
        if config is None or (allowed is not None and self.space.algorithm_of(config) not in allowed):
            raise RuntimeError(f"could not sample a configuration of algorithm(s) {sorted(allowed)}")
        return config  # a tiny space may be exhausted: re-evaluating beats stopping

    def candidates(
        self, history: Sequence, obs_x: np.ndarray, rng: np.random.Generator, n_random: int, n_local: int,
        algorithm: Optional[str] = None, seen: Optional[set] = None,
    ) -> Tuple[list, np.ndarray]:
        """Random plus local candidates (``Configuration`` objects) and their encoding, minus duplicates and
        configurations already evaluated (compared on the encoded vectors)."""
        configs = list(self.space.sample_configurations(n_random, seed=int(rng.integers(2**31))))
        ranked = sorted((obs for obs in history if obs.status == "ok"), key=lambda obs: (obs.val_loss, obs.index))
        per_parent = max(1, n_local // max(1, min(5, len(ranked))))
        for obs in ranked[:5]:
            configs.extend(self.space.neighbour_configurations(obs.config, per_parent, rng))
        if not configs:
            return [], np.empty((0, obs_x.shape[1]))
        cand_x = self.space.encode(configs)
        if algorithm is not None:
            mine = np.flatnonzero(np.isin(algorithm_codes(self.space, cand_x), list(_allowed(algorithm))))
            configs, cand_x = [configs[i] for i in mine], cand_x[mine]
            if not configs:
                return [], np.empty((0, obs_x.shape[1]))
        keys = np.round(np.vstack([obs_x, cand_x]), 9)
        _, first = np.unique(keys, axis=0, return_index=True)
        keep = np.sort(first[first >= len(obs_x)]) - len(obs_x)
        seen_rows = {row.tobytes() for row in keys[: len(obs_x)]}
        keep = np.array([i for i in keep if keys[len(obs_x) + i].tobytes() not in seen_rows], dtype=np.intp)
        configs, cand_x = [configs[i] for i in keep], cand_x[keep]
        if seen is not None and len(seen) > len(history):  # part of the run only: drop the rest's configurations
            mine = [i for i, c in enumerate(configs) if config_key(as_dict(c)) not in seen]
            configs, cand_x = [configs[i] for i in mine], cand_x[mine]
        return configs, cand_x

    def encode_history(self, history) -> np.ndarray:
        """The observations' encoding, each configuration encoded once per source."""
        cache = self.__dict__.setdefault("_encoded", {})
        missing = [obs for obs in history if observation_key(obs) not in cache]
        if missing:
            for obs, row in zip(missing, self.space.encode([obs.config for obs in missing])):
                cache[observation_key(obs)] = row
        if not history:
            return np.empty((0, self.space.n_hyperparameters))
        return np.stack([cache[observation_key(obs)] for obs in history])

    def mutate(self, config: Dict, rng: np.random.Generator, seen: set) -> Dict:
        """A random one-exchange neighbour not evaluated yet (the parent's own algorithm may change)."""
        for neighbour in self.space.neighbours(config, 20, rng):
            if config_key(neighbour) not in seen:
                return neighbour
        return self.random(rng, seen)


class LibraryCandidates:
    """Replay mode: suggestions are library members not evaluated yet."""

    def __init__(self, library):
        self.library = library
        self.keys = [config_key(c) for c in library.configs]
        first: Dict[tuple, int] = {}
        for i, key in enumerate(self.keys):
            first.setdefault(key, i)
        self.index_of = first
        # a duplicate member (a tiny sub-space sampled twice) is never offered: it would repeat a run
        self.offerable = np.array([first[key] == i for i, key in enumerate(self.keys)])
        self.codes = np.asarray(library.algorithms, dtype=object)

    def algorithms(self) -> List[str]:
        return sorted(set(self.codes[self.offerable]))

    def open_members(self, seen: set, algorithm: Optional[str] = None) -> np.ndarray:
        mask = self.offerable.copy()
        if algorithm is not None:
            mask &= np.isin(self.codes, list(_allowed(algorithm)))
        return np.array([i for i in np.flatnonzero(mask) if self.keys[i] not in seen], dtype=np.intp)

    def can_offer(self, seen: set, algorithm=None) -> bool:
        """Whether a member (of ``algorithm``) outside ``seen`` is left: an arm runs out once its members are all
        evaluated."""
        return len(self.open_members(seen, algorithm)) > 0

    def random_choices(self, rng: np.random.Generator, seen: set, algorithm=None, tries: int = 0) -> List[Dict]:
        """What a random pick chooses among: every open member (of ``algorithm``), or, when it has none left, one
        random open member of any algorithm."""
        members = self.open_members(seen, algorithm)
        if len(members) == 0:
            return [self.random(rng, seen, algorithm)]
        return [dict(self.library.configs[i]) for i in members]

    def offer(self, config: Dict) -> Optional[Dict]:
        """The library member equal to ``config``, or None when the library lacks it."""
        i = self.index_of.get(config_key(config))
        return None if i is None or not self.offerable[i] else dict(self.library.configs[i])

    def random(self, rng: np.random.Generator, seen: set, algorithm: Optional[str] = None, tries: int = 0) -> Dict:
        members = self.open_members(seen, algorithm)
        if len(members) == 0:
            members = self.open_members(seen, None)
        if len(members) == 0:
            raise LibraryExhausted("every library member has been evaluated: grow the library or lower the budget")
        return dict(self.library.configs[int(rng.choice(members))])

    def candidates(self, history, obs_x, rng, n_random: int, n_local: int, algorithm: Optional[str] = None,
                   seen: Optional[set] = None):
        """Every open member (of ``algorithm``); ``seen``: keys of all evaluated configurations when
        ``history`` is only part of the run (a bandit arm's or a sub-space's observations)."""
        members = self.open_members(seen if seen is not None else seen_keys(history), algorithm)
        return [dict(self.library.configs[i]) for i in members], self.library.encoded[members]

    def encode_history(self, history) -> np.ndarray:
        """The observations' rows of the library's encoding (a replay only ever evaluates members)."""
        if not history:
            return np.empty((0, self.library.encoded.shape[1]))
        return self.library.encoded[[self.index_of[observation_key(obs)] for obs in history]]

    def mutate(self, config: Dict, rng: np.random.Generator, seen: set) -> Dict:
        """The library's stand-in for a one-exchange move: one of the three open members nearest to the
        parent in the encoding, preferring the parent's algorithm."""
        algorithm = self.library.algorithms[self.index_of[config_key(config)]] if config_key(config) in self.index_of \
            else None
        members = self.open_members(seen, algorithm)
        if len(members) == 0:
            members = self.open_members(seen, None)
        if len(members) == 0:
            raise LibraryExhausted("every library member has been evaluated: grow the library or lower the budget")
        parent = self.library.encoded[self.index_of[config_key(config)]] if config_key(config) in self.index_of \
            else self.library.encoded[members].mean(axis=0)
        distance = np.abs(self.library.encoded[members] - parent).sum(axis=1)
        nearest = members[np.argsort(distance, kind="stable")[:3]]
        return dict(self.library.configs[int(rng.choice(nearest))])


class LibraryExhausted(RuntimeError):
    pass


def as_dict(config) -> Dict:
    return config if isinstance(config, dict) else config_to_dict(config)
