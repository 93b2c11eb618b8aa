"""The closed-form steps of ADMM for AutoML (Liu et al., AAAI 2020, Algorithm 1 and A1), as small pure functions.

- ``delta_min``: the integer projection ``round(clip(theta_tilde + lambda / rho, l, u))``;
- ``inactive_theta``: inactive relaxed integers follow ``clip(delta - lambda / rho, l, u)``;
- ``dual_update``: ``lambda + rho (theta_tilde - delta)``;
- ``reward``: the CMAB's continuous reward ``1 - min(max(f / f_hat, 0), 1)`` (f_hat = 0.7);
- ``ThompsonArms``: Beta(alpha0 + r, delta0 + n - r) posteriors per algorithm (alpha0 = delta0 = 10), one draw per
  arm and the argmax per module, counts updated on the pulled arms only.
The search strategy that drives them lives beside its peers in this package.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np

F_HAT = 0.7
BETA_PRIOR = 10.0


def delta_min(theta_tilde, lam, rho: float, lower, upper) -> np.ndarray:
    """The nearest integers (within bounds) to ``theta_tilde + lam / rho``."""
    a = np.asarray(theta_tilde, dtype=np.float64) + np.asarray(lam, dtype=np.float64) / rho
    return np.rint(np.clip(a, lower, upper)).astype(np.int64)


def inactive_theta(delta, lam, rho: float, lower, upper) -> np.ndarray:
    """theta-min's closed form for hyperparameters of algorithms z does not select."""
    return np.clip(np.asarray(delta, dtype=np.float64) - np.asarray(lam, dtype=np.float64) / rho, lower, upper)


def dual_update(lam, rho: float, theta_tilde, delta) -> np.ndarray:
    return np.asarray(lam, dtype=np.float64) + rho * (np.asarray(theta_tilde, dtype=np.float64) - np.asarray(delta))


def reward(loss: float, f_hat: float = F_HAT) -> float:
    """1 for a perfect pipeline, 0 at or beyond ``f_hat``, linear between."""
    return 1.0 - min(max(loss / f_hat, 0.0), 1.0)


class ThompsonArms:
    """Thompson sampling over the algorithms of each module with probabilistic (Bernoulli) rewards."""

    def __init__(self, modules: Dict[str, Sequence[str]], alpha0: float = BETA_PRIOR, delta0: float = BETA_PRIOR):
        if not modules or any(len(arms) == 0 for arms in modules.values()):
            raise ValueError("every module needs at least one algorithm")
        self.modules = {m: list(arms) for m, arms in modules.items()}
        self.alpha0, self.delta0 = float(alpha0), float(delta0)
        self.pulls = {(m, a): 0 for m, arms in self.modules.items() for a in arms}
        self.rewards = {(m, a): 0.0 for m, arms in self.modules.items() for a in arms}

    def choose(self, rng: np.random.Generator) -> Dict[str, str]:
        """One algorithm per module: the argmax of a Beta draw per arm."""
        choice = {}
        for module, arms in self.modules.items():
            draws = [rng.beta(self.alpha0 + self.rewards[(module, a)],
                              self.delta0 + self.pulls[(module, a)] - self.rewards[(module, a)]) for a in arms]
            choice[module] = arms[int(np.argmax(draws))]
        return choice

    def update(self, choice: Dict[str, str], loss: float, rng: np.random.Generator) -> int:
        """Bernoulli(reward(loss)) credited to the pulled arms; returns the binary reward."""
        r = int(rng.random() < reward(loss))
        for module, arm in choice.items():
            self.pulls[(module, arm)] += 1
            self.rewards[(module, arm)] += r
        return r

    def counts(self) -> List[tuple]:
        return [(key, self.pulls[key], self.rewards[key]) for key in sorted(self.pulls)]
