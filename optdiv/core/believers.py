"""Believed outcomes of configurations still being evaluated (parallel search).

A suggestion made while other evaluations run should not ignore them: DivBO / OptDivBO would otherwise
pick a configuration whose behaviour a running one already covers. Until a running configuration ends, its
validation predictions are believed to be the mean of its nearest finished neighbours' predictions in the
encoded space (a Kriging believer for the diversity side). The standalone engine and the host adapters use
this one rule (through :mod:`optdiv.core.pending`). The engine also believes a running configuration's loss
(:func:`believed_losses`), so its own expected improvement is pushed away from it.
"""

from __future__ import annotations

from typing import List

import numpy as np

#: Nearest finished configurations whose predictions make a running configuration's believed predictions.
BELIEVER_NEIGHBOURS = 3


def believed_predictions(finished_x, finished_preds, running_x, neighbours: int = BELIEVER_NEIGHBOURS
                         ) -> List[np.ndarray]:
    """One float32 prediction array per row of ``running_x``: the mean of the ``neighbours`` finished
    predictions nearest to it by L1 distance between encodings (ties: the earlier finished one).

    ``finished_x`` (f, d) and ``running_x`` (r, d) are encoded configurations; ``finished_preds`` (f, ...)
    their validation predictions.
    """
    finished_x = np.asarray(finished_x, dtype=np.float64)
    running_x = np.asarray(running_x, dtype=np.float64)
    preds = np.asarray(finished_preds).astype(np.float64)
    if finished_x.ndim != 2 or running_x.ndim != 2 or finished_x.shape[1] != running_x.shape[1]:
        raise ValueError(f"encodings must be (count, dims) matrices of equal width; got {finished_x.shape} "
                         f"and {running_x.shape}")
    if finished_x.shape[0] == 0 or preds.shape[0] != finished_x.shape[0]:
        raise ValueError(f"need predictions of at least one finished configuration, one per row; got "
                         f"{finished_x.shape[0]} encodings and predictions of shape {preds.shape}")
    if isinstance(neighbours, bool) or not isinstance(neighbours, (int, np.integer)) or neighbours < 1:
        raise ValueError(f"neighbours must be a positive integer; got {neighbours!r}")
    out = []
    for row in running_x:
        distance = np.abs(finished_x - row).sum(axis=1)
        nearest = np.argsort(distance, kind="stable")[:neighbours]
        out.append(preds[nearest].mean(axis=0).astype(np.float32))
    return out


#: Trees of the forest behind :func:`believed_losses`: a rough belief suffices, and it is fitted per suggestion.
BELIEVER_TREES = 20


def believed_losses(finished_x, finished_losses, running_x, fallback: float, seed: int,
                    n_trees: int = BELIEVER_TREES) -> np.ndarray:
    """One believed loss per row of ``running_x`` (a Kriging believer): the mean of a random forest over the
    finished encodings ``finished_x`` and their losses, or ``fallback`` where the forest's mean is not finite
    and for every row while fewer than two configurations are finished (a forest needs two).

    ``finished_losses`` must be finite (a host imputes its failures first); ``seed`` seeds the forest.
    """
    running_x = np.asarray(running_x, dtype=np.float64)
    finished_losses = np.asarray(finished_losses, dtype=np.float64)
    if finished_losses.shape[0] < 2:
        return np.full(len(running_x), fallback)
    from .surrogates import ProbabilisticRandomForest  # LightGBM, only once a forest is needed

    forest = ProbabilisticRandomForest(n_trees=int(n_trees), seed=int(seed)).fit(finished_x, finished_losses)
    mean, _ = forest.predict(running_x)
    return np.where(np.isfinite(mean), mean, fallback)
