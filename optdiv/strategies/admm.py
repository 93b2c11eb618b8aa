"""ADMM for AutoML (Liu et al., AAAI 2020, Algorithm 1 with BO for theta-min and CMAB Thompson sampling for z-min).

The pipeline's modules are the space's ``*:__choice__`` hyperparameters (rescaling, feature
preprocessor, estimator in the auto-sklearn space); ``z`` picks one algorithm per module. One ADMM
iteration ``t`` spends:

- theta-min: ``min(16 + 8 t, 128)`` evaluations of BO restricted to ``z`` (the paper's adaptive
  AdADMM-F8 schedule). The BO models the loss plus the known penalty ``rho/2 ||theta_d - b||^2`` on the
  active integer hyperparameters (normalised to [0, 1] by their range), with ``b = delta - lambda / rho``;
  its history is the theta-min evaluations made under the same ``z``, so it starts afresh when ``z``
  changes. The block's best penalised run gives ``theta^(t+1)``.
- delta-min, the inactive integers' closed form and the dual update (``admm_steps``).
- z-min: ``pulls`` (5) Thompson-sampling pulls over all modules' algorithms, Beta(10, 10) priors,
  Bernoulli rewards ``1 - min(f / 0.7, 1)``; statistics persist across iterations. Each pull evaluates
  the drawn ``z`` with every algorithm's current hyperparameters. ``z^(t+1)`` is the best of the pulls and
  of ``z^(t)`` at ``theta^(t+1)``.

With black-box constraints (``--constraint``; Algorithm 2) each constraint ``g <= eps`` (measures
normalised by ``|eps|``) adds ``rho/2 [g + u - eps + mu/rho]^2`` to theta-min's and z-min's objective,
with the slack ``u`` in ``[0, eps]`` at its closed-form optimum, and its multiplier is updated as
``mu += rho (g + u - eps)`` at ``z^(t+1)``'s run. Infeasible runs keep their loss for this objective
but, as for every strategy, never enter an ensemble. A lower bound ``g >= eps`` is used as ``-g <= -eps``
with an unbounded slack.

Decisions the paper leaves open or that a candidate-based engine forces (stated here, as the method
notes ask):
- Candidates are drawn from the run's source (the space, or a replay library's open members). A
  configuration with exactly ``z`` may not exist in a library, so theta-min and the pulls take the open
  candidates of ``z``'s estimator that match most of ``z``'s other modules; a pull takes, among those,
  the one nearest (L1 in the encoding) to the current hyperparameters of ``z``'s algorithms.
- Our integer hyperparameters are sampled as integers, so ``theta_d`` equals ``delta`` after every
  delta-min and the multipliers stay at zero; the penalty still pulls theta-min towards the previous
  integer solution, as in the paper.
- The reward needs a loss in [0, 1]: the error rate is used as is; any other loss (MSE, MAE, log loss,
  Brier) is replaced by its empirical quantile among the run's successful losses.
- The first pipeline is a draw from the priors, not Gaussian Naive Bayes (absent from regression
  spaces). A failed run counts as the worst loss (reward 0).
- The whole state is rebuilt from the history at every call with seeded generators per position, so a
  resumed run suggests exactly what an uninterrupted one would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from optdiv.evaluation.constraints import measure_value
from optdiv.spaces import cs_compat
from optdiv.spaces.candidates import SpaceCandidates, as_dict, seen_keys
from optdiv.strategies.admm_steps import ThompsonArms, delta_min, dual_update, inactive_theta
from optdiv.strategies.base import Suggestion
from optdiv.strategies.model_based import Optimizer

RHO = 1.0
PULLS = 5
FIRST_BLOCK, BLOCK_STEP, BLOCK_CAP = 16, 8, 128
_PULL_STREAM, _REWARD_STREAM, _THETA_STREAM = 13, 17, 19


def module_keys(space) -> List[str]:
    """The space's algorithm-choice hyperparameters (``prefix:__choice__``), estimator first."""
    keys = sorted(n for n in space.hyperparameter_names if n.endswith(":__choice__"))
    if space.algorithm_key in keys:
        keys.remove(space.algorithm_key)
        keys.insert(0, space.algorithm_key)
    return keys


def theta_block_size(t: int) -> int:
    return min(FIRST_BLOCK + BLOCK_STEP * t, BLOCK_CAP)


@dataclass
class _State:
    """ADMM's variables after replaying the history; ``next`` says what the next evaluation is for."""

    z: Dict[str, str]
    t: int = 0
    theta: Dict[str, float] = field(default_factory=dict)  # relaxed integer hyperparameters
    delta: Dict[str, int] = field(default_factory=dict)
    lam: Dict[str, float] = field(default_factory=dict)
    targets: Dict[Tuple[str, str], int] = field(default_factory=dict)  # (module, algorithm) -> history position
    phase: str = "theta"
    block: List[int] = field(default_factory=list)  # history positions of the current phase
    theta_history: List[int] = field(default_factory=list)  # theta-min positions under the current z
    mu: List[float] = field(default_factory=list)  # one multiplier per black-box constraint


class ADMM:
    """Suggests configurations by ADMM's alternation; ``suggest(history, y_val)`` like every strategy."""

    def __init__(self, space, metric: str, seed: int = 0, candidates=None, rho: float = RHO, pulls: int = PULLS,
                 constraints: Sequence = (), **bo_options):
        if rho <= 0 or pulls < 1:
            raise ValueError("ADMM needs rho > 0 and at least one z-min pull")
        self.space = space
        self.source = candidates if candidates is not None else SpaceCandidates(space)
        self.metric, self.seed, self.rho, self.pulls = metric, int(seed), float(rho), int(pulls)
        self.bo_options = bo_options
        self.modules = module_keys(space)
        choices = {m: [str(c) for c in cs_compat.choices_of(cs_compat.get_hyperparameter(space.configspace, m))]
                   for m in self.modules}
        if self.modules and space.algorithm_key in choices:
            offered = set(self.source.algorithms())
            choices[space.algorithm_key] = [a for a in choices[space.algorithm_key] if a in offered]
        self.choices = choices
        self.integers = self._integer_hyperparameters()
        #: the run's black-box constraints (Constraint objects), which enter the ADMM objective
        self.constraints: List = list(constraints)

    # ------------------------------------------------------------------ facts about the space
    def _integer_hyperparameters(self) -> Dict[str, Tuple[int, int, int, Tuple[str, str]]]:
        """name -> (lower, upper, default, owning (module, algorithm)) for integer hyperparameters of a component."""
        out = {}
        for name, hp, _ in self.space.columns:
            if "Integer" not in type(hp).__name__:
                continue
            owner = self._owner(name)
            if owner is not None:
                out[name] = (int(hp.lower), int(hp.upper), int(hp.default_value), owner)
        return out

    def _owner(self, name: str) -> Optional[Tuple[str, str]]:
        for module in self.modules:
            prefix = module[: -len("__choice__")]
            if name.startswith(prefix):
                algorithm = name[len(prefix):].split(":", 1)[0]
                if algorithm in self.choices[module]:
                    return module, algorithm
        return None

    def z_of(self, config: Dict) -> Dict[str, str]:
        return {m: str(config[m]) for m in self.modules if m in config}

    # ------------------------------------------------------------------ replaying the history
    def _losses(self, history: Sequence) -> np.ndarray:
        """Validation losses; infeasible runs keep theirs (the constraint penalty judges them), failures inf."""
        losses = np.array([obs.val_loss if obs.status in ("ok", "infeasible") else np.inf for obs in history],
                          dtype=np.float64)
        return np.where(np.isfinite(losses), losses, np.inf)

    def _scaled(self, obs, constraint) -> Optional[Tuple[float, float, float]]:
        """(g, eps, slack cap) of ``constraint`` for ``obs`` in the ``g <= eps`` form, scaled by ``|bound|``."""
        value = measure_value(obs, constraint.measure)
        if value is None or not np.isfinite(value):
            return None
        scale = abs(constraint.bound) or 1.0
        if constraint.upper:
            g, eps = value / scale, constraint.bound / scale
        else:
            g, eps = -value / scale, -constraint.bound / scale
        return g, eps, (eps if eps > 0 else np.inf)

    def _constraint_terms(self, obs, mu: Sequence[float]) -> List[Tuple[float, float]]:
        """Per constraint: (residual g + u - eps, with u at its optimum given mu; penalty)."""
        terms = []
        for constraint, m in zip(self.constraints, mu):
            scaled = self._scaled(obs, constraint)
            if scaled is None:
                terms.append((0.0, 0.0))
                continue
            g, eps, cap = scaled
            u = float(np.clip(eps - g - m / self.rho, 0.0, cap))
            residual = g + u - eps
            terms.append((residual, 0.5 * self.rho * (residual + m / self.rho) ** 2))
        return terms

    def _objective(self, history, losses: np.ndarray, i: int, mu: Sequence[float]) -> float:
        """Loss plus the constraints' augmented-Lagrangian terms (the loss alone without constraints)."""
        if not np.isfinite(losses[i]) or not self.constraints:
            return float(losses[i])
        return float(losses[i]) + sum(p for _, p in self._constraint_terms(history[i], mu))

    def _reward_loss(self, objectives: np.ndarray, i: int) -> float:
        """The pull's objective on the reward's [0, 1] scale (error as is, other losses by quantile)."""
        if not np.isfinite(objectives[i]):
            return np.inf
        if self.metric == "error":
            return float(objectives[i])
        finite = objectives[: i + 1][np.isfinite(objectives[: i + 1])]
        return float(np.mean(finite <= objectives[i]))

    def _penalty(self, config: Dict, state: _State) -> float:
        total = 0.0
        for name, value in config.items():
            if name in self.integers and name in state.delta:
                lower, upper, _, _ = self.integers[name]
                b = state.delta[name] - state.lam[name] / self.rho
                total += ((float(value) - b) / max(upper - lower, 1)) ** 2
        return 0.5 * self.rho * total

    def replay(self, history: Sequence) -> Tuple[_State, ThompsonArms]:
        arms = ThompsonArms({m: self.choices[m] for m in self.modules} or {"_": ["_"]})
        losses = self._losses(history)
        state = _State(z=self._draw_z(arms, 0), mu=[0.0] * len(self.constraints))
        for name, (_, _, default, _) in self.integers.items():
            state.theta[name], state.delta[name], state.lam[name] = float(default), default, 0.0
        blocks_by_z: Dict[tuple, List[int]] = {}
        pos = 0
        while True:
            size = theta_block_size(state.t)
            z_key = tuple(sorted(state.z.items()))
            block = list(range(pos, min(pos + size, len(history))))
            state.theta_history = blocks_by_z.get(z_key, []) + block
            if len(block) < size:
                state.phase, state.block = "theta", block
                return state, arms
            blocks_by_z[z_key] = state.theta_history
            best = self._theta_step(history, losses, block, state)
            pos += size
            pulls = list(range(pos, min(pos + self.pulls, len(history))))
            objectives = np.array([self._objective(history, losses, i, state.mu) for i in range(len(history))])
            for i in pulls:
                arms.update(self.z_of(history[i].config) or {"_": "_"}, self._reward_loss(objectives, i),
                            np.random.default_rng([self.seed, i, _REWARD_STREAM]))
            if len(pulls) < self.pulls:
                state.phase, state.block = "pull", pulls
                return state, arms
            contenders = ([best] if best is not None else []) + pulls
            finite = [i for i in contenders if np.isfinite(objectives[i])]
            if finite:
                winner = min(finite, key=lambda i: (objectives[i], i))
                if self.modules:
                    state.z = {**state.z, **self.z_of(history[winner].config)}
                residuals = self._constraint_terms(history[winner], state.mu)
                state.mu = [m + self.rho * r for m, (r, _) in zip(state.mu, residuals)]
            pos += self.pulls
            state.t += 1

    def _theta_step(self, history, losses, block: List[int], state: _State) -> Optional[int]:
        """theta-min's result, then delta-min, the inactive closed form and the dual update."""
        ok = [i for i in block if np.isfinite(losses[i])]
        if not ok:
            return None
        best = min(ok, key=lambda i: (self._objective(history, losses, i, state.mu)
                                      + self._penalty(history[i].config, state), i))
        config = history[best].config
        active = {(m, a) for m, a in state.z.items()}
        for module, algorithm in {(m, str(config[m])) for m in self.modules if m in config}:
            state.targets[(module, algorithm)] = best
        names = sorted(self.integers)
        for name in names:
            lower, upper, _, owner = self.integers[name]
            if owner in active and name in config:
                state.theta[name] = float(config[name])
            else:
                state.theta[name] = float(inactive_theta(state.delta[name], state.lam[name], self.rho, lower, upper))
            state.delta[name] = int(delta_min(state.theta[name], state.lam[name], self.rho, lower, upper))
            state.lam[name] = float(dual_update(state.lam[name], self.rho, state.theta[name], state.delta[name]))
        return best

    def _draw_z(self, arms: ThompsonArms, position: int) -> Dict[str, str]:
        if not self.modules:
            return {}
        return arms.choose(np.random.default_rng([self.seed, position, _PULL_STREAM]))

    # ------------------------------------------------------------------ suggesting
    def suggest(self, history: Sequence, y_val=None) -> Suggestion:
        start = time.perf_counter()
        state, arms = self.replay(history)
        seen = seen_keys(history)
        if state.phase == "theta":
            suggestion = self._theta_suggestion(history, state, seen, y_val)
        else:
            z = self._draw_z(arms, len(history))
            suggestion = self._pull_suggestion(history, state, z, seen)
        suggestion.info = {**suggestion.info, "admm_iteration": state.t, "phase": state.phase,
                           "z": dict(state.z) if state.phase == "theta" else suggestion.info.get("z")}
        suggestion.seconds = time.perf_counter() - start
        return suggestion

    def _theta_suggestion(self, history, state: _State, seen: set, y_val) -> Suggestion:
        source = _MatchingSource(self.source, self, state.z)
        losses = self._losses(history)
        # the proxies copy every field of the real observations, their cached configuration keys included
        penalised = [replace(history[i], status="ok", val_loss=self._objective(history, losses, i, state.mu)
                             + self._penalty(history[i].config, state))
                     if np.isfinite(losses[i]) else history[i] for i in state.theta_history]
        inner = Optimizer(self.space, "bo", self.metric, seed=self.seed, candidates=source, **self.bo_options)
        algorithm = state.z.get(self.space.algorithm_key) if self.modules else None
        suggestion = inner.suggest(penalised, y_val, algorithm=algorithm, stream=_THETA_STREAM + state.t, seen=seen)
        suggestion.info = {**suggestion.info, "strategy": "admm theta-min"}
        return suggestion

    def _pull_suggestion(self, history, state: _State, z: Dict[str, str], seen: set) -> Suggestion:
        rng = np.random.default_rng([self.seed, len(history), _THETA_STREAM])
        source = _MatchingSource(self.source, self, z)
        algorithm = z.get(self.space.algorithm_key) if self.modules else None
        obs_x = self.source.encode_history(history)
        configs, cand_x = source.candidates(history, obs_x, rng, 2000, 0, algorithm, seen=seen)
        if not configs:
            return Suggestion(source.random(rng, seen, algorithm), 0.0, {"strategy": "admm z-min pull", "z": z})
        distance = np.zeros(len(configs))
        for (module, algo), position in state.targets.items():
            if z.get(module) != algo:
                continue
            columns = self._columns_of(module, algo)
            target = self.source.encode_history([history[position]])[0, columns]
            distance += np.abs(cand_x[:, columns] - target).sum(axis=1)
        nearest = np.flatnonzero(distance == distance.min())
        index = int(rng.choice(nearest))
        return Suggestion(as_dict(configs[index]), 0.0, {"strategy": "admm z-min pull", "z": z})

    def _columns_of(self, module: str, algorithm: str) -> np.ndarray:
        cache = self.__dict__.setdefault("_column_cache", {})
        if (module, algorithm) not in cache:
            prefix = module[: -len("__choice__")] + algorithm + ":"
            cache[(module, algorithm)] = np.array(
                [i for i, (name, _, _) in enumerate(self.space.columns) if name.startswith(prefix)], dtype=np.intp)
        return cache[(module, algorithm)]


class _MatchingSource:
    """A candidate source narrowed to the configurations that match most of ``z``'s modules."""

    def __init__(self, source, admm: ADMM, z: Dict[str, str]):
        self.source, self.admm, self.z = source, admm, z

    def _best_matches(self, configs: list) -> List[int]:
        if not configs or not self.z:
            return list(range(len(configs)))
        score = np.array([sum(as_dict(c).get(m) == v for m, v in self.z.items()) for c in configs])
        return list(np.flatnonzero(score == score.max()))

    def candidates(self, history, obs_x, rng, n_random, n_local, algorithm=None, seen=None):
        configs, cand_x = self.source.candidates(history, obs_x, rng, n_random, n_local, algorithm, seen=seen)
        keep = self._best_matches(configs)
        return [configs[i] for i in keep], cand_x[keep]

    def random(self, rng, seen, algorithm=None, tries: int = 20):
        drawn = self.source.random_choices(rng, seen, algorithm, tries)
        return dict(drawn[int(rng.choice(self._best_matches(drawn)))])

    def encode_history(self, history):
        return self.source.encode_history(history)

    def algorithms(self):
        return self.source.algorithms()
