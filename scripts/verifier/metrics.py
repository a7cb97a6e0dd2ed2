"""AUROC without scikit-learn, so the training environment needs only the pinned packages."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["auroc"]


def auroc(labels: Sequence[int], scores: Sequence[float]) -> float:
    """Area under the ROC curve by the rank-sum formula (ties get average ranks);
    NaN when one class is absent."""
    y = np.asarray(labels, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    positives = int(y.sum())
    negatives = len(y) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    sorted_s = s[order]
    ranks = np.empty(len(s), dtype=np.float64)
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    rank_sum = float(ranks[y == 1].sum())
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)
