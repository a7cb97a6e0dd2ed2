"""Small statistics shared by the offline reports and the live window aggregates."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["auroc", "wilson_interval"]


def wilson_interval(hits: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """Wilson score interval for a rate measured on ``n`` trials (95 % for z = 1.96).

    Chosen over the normal approximation because it stays inside [0, 1] and is honest
    on the tiny samples a quiet assistant produces in one window. None when n == 0:
    there is no rate to bound.
    """
    if n < 0 or hits < 0 or hits > n:
        raise ValueError(f"need 0 <= hits <= n, got hits={hits}, n={n}")
    if n == 0:
        return None
    p = hits / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def auroc(labels: Sequence[int] | Sequence[bool], scores: Sequence[float]) -> float:
    """Area under the ROC curve by the rank-sum formula, ties at their average rank:
    the chance that a random positive scores above a random negative. NaN when one
    class is absent."""
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    positives = int(y.sum())
    negatives = len(y) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    _, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    average_rank = np.cumsum(counts) - (counts - 1) / 2.0  # 1-based, ties averaged
    rank_sum = float(average_rank[inverse][y].sum())
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)
