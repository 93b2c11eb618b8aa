"""Pairwise diversity between models' validation predictions: DivBO's and OptDivBO's per-loss terms.

All pairs are computed at once. ``mse``, ``mae``, ``brier`` and regression ``divbo`` reduce to matrix
products; ``ce`` and classification ``divbo`` need an element-wise term per pair, computed in tiles on
threads (numpy releases the GIL) over the upper triangle only. Inputs are float32, sums are float64.

Conventions (docs/method.md, "Pairwise diversity"): errors ``e_i = y - f_i`` (regression), ``E_i = onehot(y) - p_i``
(classification), ``q_i = p_i[y]``. ``divbo`` is larger-is-more-diverse; every OptDiv kind is
smaller-is-better, because it is the pair's contribution to an upper bound of the ensemble's loss.
The diagonal holds each model paired with itself (e.g. ``2 * MSE_i`` for ``mse``); callers that
want only distinct pairs ignore it.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

import numpy as np

from .arrays import PROB_CLIP, as_predictions, as_targets, one_hot, true_class_probability
from .metric_vocabulary import diversity_kind

REGRESSION_KINDS = ("divbo", "mse", "mae")
CLASSIFICATION_KINDS = ("divbo", "brier", "ce", "zero_one", "zero_one_paper")
KINDS = ("divbo", "mse", "mae", "brier", "ce", "zero_one", "zero_one_paper")

#: Weights of the black-box combination used for 0/1 loss and any other classification metric (OptDivBO, eq. 12).
BLACK_BOX_CE_WEIGHT = 0.2
BLACK_BOX_BRIER_WEIGHT = 0.1

#: Floor on the true class's probability inside the black-box mix's cross-entropy term (``zero_one``). In the
#: paper's bound the term's bonus for a row a model gets confidently wrong is cancelled by that model's own
#: cross-entropy; ranked next to EI on 0/1 error nothing cancels it, and at the metric's clip (1e-15) one such
#: row is worth -34.5, so confidently wrong models looked the most diverse. ``zero_one_paper`` keeps the clip
#: at 1e-15. The value was chosen on validation predictions only (docs/method.md, "The 0/1-loss floor").
ZERO_ONE_CE_FLOOR = 0.1

#: Elements per tile of the element-wise kinds: ~16 MB of float32, small enough for L2/L3-friendly passes.
_TILE_ELEMENTS = 1 << 22


def higher_is_more_diverse(kind: str) -> bool:
    """True for DivBO's prediction-disagreement measure, False for OptDivBO's loss-bound terms."""
    _check_kind(kind)
    return kind == "divbo"


def kind_for_metric(metric: str, paper: bool = False) -> str:
    """The OptDiv kind that bounds a task metric: its own kind where derived, else the black-box mix
    (``paper=True``: the mix with the papers' 1e-15 clip instead of :data:`ZERO_ONE_CE_FLOOR`).
    The names are the metric vocabulary's (:func:`optdiv.core.metric_vocabulary.diversity_kind`)."""
    return diversity_kind(metric, paper)


def pairwise_diversity(preds, y, kind: str, ensemble_size: int = 25) -> np.ndarray:
    """Symmetric (m, m) matrix of the pairwise diversity ``kind`` between all m models.

    ``preds`` is (m, n) for regression or (m, n, k) probabilities; ``y`` holds n targets or class indices.
    ``ensemble_size`` is N in OptDivBO's cross-entropy term, which carries a 1/N factor.
    """
    preds = as_predictions(preds)
    y = as_targets(y, preds)
    _check_kind_for(kind, preds)
    out = _cross(preds, preds, y, kind, ensemble_size, symmetric=True)
    out = 0.5 * (out + out.T)  # matrix products are symmetric only up to rounding
    if kind == "divbo":
        np.fill_diagonal(out, 0.0)
    return out


def diversity_to_pool(cand_preds, pool_preds, y, kind: str, ensemble_size: int = 25) -> np.ndarray:
    """(c, p) diversity between each of c candidate models and each of p pool members."""
    cand = as_predictions(cand_preds)
    pool = as_predictions(pool_preds)
    if cand.shape[1:] != pool.shape[1:]:
        raise ValueError(
            f"candidate predictions {cand.shape} and pool predictions {pool.shape} differ in rows or classes"
        )
    y = as_targets(y, cand)
    _check_kind_for(kind, cand)
    return _cross(cand, pool, y, kind, ensemble_size, symmetric=False)


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown diversity kind {kind!r}; choose one of {', '.join(KINDS)}")


def _check_kind_for(kind: str, preds: np.ndarray) -> None:
    _check_kind(kind)
    classification = preds.ndim == 3
    allowed = CLASSIFICATION_KINDS if classification else REGRESSION_KINDS
    if kind not in allowed:
        task = "classification (m, n, k)" if classification else "regression (m, n)"
        raise ValueError(f"diversity kind {kind!r} does not apply to {task} predictions; use one of {allowed}")


def _cross(a: np.ndarray, b: np.ndarray, y: np.ndarray, kind: str, ensemble_size: int, symmetric: bool):
    n = a.shape[1]
    if kind == "mse":
        return _gram(_errors(a, y), None if symmetric else _errors(b, y), 2.0 / n)
    if kind == "mae":  # sqrt|e_i e_j| = sqrt|e_i| sqrt|e_j|
        root_b = None if symmetric else np.sqrt(np.abs(_errors(b, y)))
        return _gram(np.sqrt(np.abs(_errors(a, y))), root_b, math.sqrt(2.0) / n)
    if kind == "brier":
        return _brier(a, b, y, symmetric)
    if kind == "ce":
        return _cross_entropy(a, b, y, ensemble_size, symmetric)
    if kind in ("zero_one", "zero_one_paper"):
        floor = ZERO_ONE_CE_FLOOR if kind == "zero_one" else PROB_CLIP
        return BLACK_BOX_CE_WEIGHT * _cross_entropy(a, b, y, ensemble_size, symmetric, floor) + (
            BLACK_BOX_BRIER_WEIGHT * _brier(a, b, y, symmetric)
        )
    if a.ndim == 2:  # divbo, regression: mean (f_i - f_j)^2 expanded into squared norms and a product
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        sq = (fa * fa).sum(1)[:, None] + (fb * fb).sum(1)[None, :] - 2.0 * fa @ fb.T
        return np.maximum(sq, 0.0) / n
    return _divbo_classification(a, b, symmetric)


def _errors(preds: np.ndarray, y: np.ndarray) -> np.ndarray:
    return y[None, :] - preds.astype(np.float64)


def _gram(xa: np.ndarray, xb: Optional[np.ndarray], factor: float) -> np.ndarray:
    """factor * xa @ xb.T; with xb None the symmetric product xa @ xa.T."""
    return factor * (xa @ (xa if xb is None else xb).T)


def _brier(a: np.ndarray, b: np.ndarray, y: np.ndarray, symmetric: bool) -> np.ndarray:
    n, k = a.shape[1], a.shape[2]
    if k == 2 and _normalised(a, b):
        # E_i[0] = -E_i[1] for normalised binary rows, so the class sum is twice the class-1 product
        target = (y == 1).astype(np.float64)[None]
        k_factor = 2.0
        a, b = a[:, :, 1], b[:, :, 1]
    else:
        target = one_hot(y, k).reshape(1, n * k)
        k_factor = 1.0

    def flat_errors(p: np.ndarray) -> np.ndarray:
        return np.subtract(target, p.reshape(p.shape[0], -1), dtype=np.float64)

    return _gram(flat_errors(a), None if symmetric else flat_errors(b), 2.0 * k_factor / n)


def _normalised(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether every binary probability row sums to one (to 1e-5), which licenses the binary shortcuts."""
    stacks = (a,) if a is b else (a, b)
    return all(float(np.abs(x[:, :, 0] + x[:, :, 1] - 1.0).max()) < 1e-5 for x in stacks)


def _cross_entropy(a, b, y, ensemble_size: int, symmetric: bool, floor: float = PROB_CLIP) -> np.ndarray:
    """(1/N) mean log(q_i q_j / (q_i + q_j)^2) with q clipped to [floor, 1]: the separable logs are sums, only
    log(q_i + q_j) is tiled."""
    if ensemble_size <= 0:
        raise ValueError("ensemble_size must be positive")
    qa = np.clip(true_class_probability(a, y), floor, 1.0).astype(np.float32)
    qb = qa if symmetric else np.clip(true_class_probability(b, y), floor, 1.0).astype(np.float32)
    n = qa.shape[1]
    mean_log_a = np.log(qa.astype(np.float64)).mean(1)
    mean_log_b = mean_log_a if symmetric else np.log(qb.astype(np.float64)).mean(1)

    def mean_log_sum(xa: np.ndarray, xb: np.ndarray) -> np.ndarray:
        s = xa[:, None, :] + xb[None, :, :]
        np.log(s, out=s)
        return s.sum(axis=2, dtype=np.float64) / n

    joint = _tiled(qa, qb, mean_log_sum, symmetric)
    return (mean_log_a[:, None] + mean_log_b[None, :] - 2.0 * joint) / ensemble_size


def _divbo_classification(a: np.ndarray, b: np.ndarray, symmetric: bool) -> np.ndarray:
    """(sqrt 2 / 2) mean ||p_i - p_j||; for normalised binary probabilities that is mean |p_i1 - p_j1|."""
    n, k = a.shape[1], a.shape[2]
    if k == 2 and _normalised(a, b):
        xa = np.ascontiguousarray(a[:, :, 1])
        xb = xa if symmetric else np.ascontiguousarray(b[:, :, 1])

        def mean_abs(ta: np.ndarray, tb: np.ndarray) -> np.ndarray:
            d = ta[:, None, :] - tb[None, :, :]
            np.abs(d, out=d)
            return d.sum(axis=2, dtype=np.float64) / n

        return _tiled(xa, xb, mean_abs, symmetric)

    xa = np.ascontiguousarray(np.moveaxis(a, 2, 1))  # (m, k, n): one contiguous row per class
    xb = xa if symmetric else np.ascontiguousarray(np.moveaxis(b, 2, 1))

    def mean_norm(ta: np.ndarray, tb: np.ndarray) -> np.ndarray:
        acc = np.zeros((ta.shape[0], tb.shape[0], n), dtype=np.float32)
        for c in range(k):
            d = ta[:, None, c, :] - tb[None, :, c, :]
            np.multiply(d, d, out=d)
            acc += d
        np.sqrt(acc, out=acc)
        return acc.sum(axis=2, dtype=np.float64) * (math.sqrt(2.0) / 2.0 / n)

    return _tiled(xa, xb, mean_norm, symmetric)


def _tiled(
    xa: np.ndarray,
    xb: np.ndarray,
    pair_fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
    symmetric: bool,
    threads: Optional[int] = None,
) -> np.ndarray:
    """Apply ``pair_fn`` to tiles of rows of ``xa`` x rows of ``xb``; only the upper triangle if symmetric."""
    ma, mb = xa.shape[0], xb.shape[0]
    row_elems = int(np.prod(xa.shape[1:]))
    side = max(1, int(math.sqrt(_TILE_ELEMENTS / max(row_elems, 1))))
    out = np.empty((ma, mb), dtype=np.float64)
    tiles = [
        (i0, min(i0 + side, ma), j0, min(j0 + side, mb))
        for i0 in range(0, ma, side)
        for j0 in range(0, mb, side)
        if not symmetric or j0 + side > i0
    ]

    def run(tile):
        i0, i1, j0, j1 = tile
        out[i0:i1, j0:j1] = pair_fn(xa[i0:i1], xb[j0:j1])

    workers = threads or min(4, os.cpu_count() or 1)
    if workers > 1 and len(tiles) > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(run, tiles))
    else:
        for tile in tiles:
            run(tile)
    if symmetric:
        lower = np.tril_indices(ma, -1)
        out[lower] = out.T[lower]
    return out
