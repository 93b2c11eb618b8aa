"""A tree-structured Parzen estimator (TPE; Bergstra et al. 2011) over the core's configuration encoding.

Observations are split at the ``gamma`` quantile of their losses into good and bad; each side gets a
per-dimension density: a Gaussian Parzen window over the active values (plus a uniform prior component,
so unseen regions keep some mass) and a smoothed probability of being inactive (-1). A candidate's score is
log l(x) - log g(x), the quantity TPE maximises (equivalent to its expected improvement). Scoring a given
candidate set, rather than sampling from l, lets TPE plug into the engine's candidate sources; it is the
inner optimiser of DACOpt's Hyperopt variants (DAC-HH, DAC-SH).
"""

from __future__ import annotations

import numpy as np


class ParzenRatio:
    def __init__(self, gamma: float = 0.25, prior_weight: float = 1.0, min_bandwidth: float = 0.03):
        if not 0 < gamma < 1:
            raise ValueError("gamma must lie in (0, 1)")
        self.gamma, self.prior_weight, self.min_bandwidth = float(gamma), float(prior_weight), float(min_bandwidth)

    def fit(self, X, losses) -> "ParzenRatio":
        X = np.asarray(X, dtype=np.float64)
        losses = np.asarray(losses, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 2 or losses.shape != (X.shape[0],):
            raise ValueError("TPE needs at least 2 observations as (t, d) configurations and t losses")
        n_good = max(1, int(np.ceil(self.gamma * len(losses))))
        order = np.argsort(losses, kind="stable")
        self.good_, self.bad_ = X[order[:n_good]], X[order[n_good:]]
        return self

    def score(self, C) -> np.ndarray:
        """log l(x) - log g(x) for each candidate row (larger = more promising)."""
        C = np.asarray(C, dtype=np.float64)
        return self._log_density(C, self.good_) - self._log_density(C, self.bad_)

    def _log_density(self, C: np.ndarray, S: np.ndarray) -> np.ndarray:
        n, total = S.shape[0], np.zeros(C.shape[0])
        for j in range(C.shape[1]):
            column = S[:, j]
            active = column[column >= 0]
            p_inactive = (np.sum(column < 0) + 0.5 * self.prior_weight) / (n + self.prior_weight)
            c = C[:, j]
            density = np.full(len(c), p_inactive)
            on = c >= 0
            if on.any():
                spread = np.std(active) if len(active) > 1 else 0.5
                bandwidth = max(self.min_bandwidth, spread * max(1, len(active)) ** (-0.2))  # Scott-like
                kernel = np.zeros(on.sum())
                if len(active):
                    z = (c[on, None] - active[None, :]) / bandwidth
                    kernel = np.exp(-0.5 * z * z).sum(axis=1) / (bandwidth * np.sqrt(2 * np.pi))
                mixture = (kernel + self.prior_weight * 1.0) / (len(active) + self.prior_weight)  # uniform on [0,1]
                density[on] = (1 - p_inactive) * mixture
            total += np.log(np.maximum(density, 1e-300))
        return total
