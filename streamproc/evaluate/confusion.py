"""Confusion counts and their metrics with 95 % intervals, as the benchmark quotes them.

Intervals: Wilson for precision and recall (a rate of independent answers); a
percentile bootstrap over answers for F1 and balanced accuracy (no closed form), seeded
so a rerun prints the same digits. Claim-level numbers resample whole answers (a
cluster bootstrap), since the claims of one answer are not independent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from streamproc.rates.stats import wilson_interval

__all__ = [
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "METRICS",
    "BinaryReport",
    "Confusion",
    "binary_report",
    "bootstrap_intervals",
]

DEFAULT_SEED: Final = 20250106
DEFAULT_RESAMPLES: Final = 1000


@dataclass(frozen=True, slots=True)
class Confusion:
    """Counts for "hallucinated" (an answer) or "not supported" (a claim) as positive."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @classmethod
    def of(cls, label: bool, predicted: bool) -> Confusion:
        return cls(
            tp=int(label and predicted),
            fp=int(predicted and not label),
            fn=int(label and not predicted),
            tn=int(not label and not predicted),
        )

    def __add__(self, other: Confusion) -> Confusion:
        return Confusion(
            self.tp + other.tp, self.fp + other.fp, self.fn + other.fn, self.tn + other.tn
        )

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def positives(self) -> int:
        return self.tp + self.fn

    def as_row(self) -> tuple[int, int, int, int]:
        return self.tp, self.fp, self.fn, self.tn


METRICS: Final = ("precision", "recall", "f1", "balanced_accuracy")


def _metric_arrays(counts: NDArray[np.float64]) -> dict[str, NDArray[np.float64]]:
    """The four metrics for every row of (tp, fp, fn, tn); NaN where undefined (0/0)."""
    tp, fp, fn, tn = counts.T
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = tp / (tp + fn)
        return {
            "precision": tp / (tp + fp),
            "recall": recall,
            "f1": 2 * tp / (2 * tp + fp + fn),
            "balanced_accuracy": (recall + tn / (tn + fp)) / 2,
        }


def _value(counts: Confusion) -> dict[str, float | None]:
    arrays = _metric_arrays(np.array([counts.as_row()], dtype=np.float64))
    return {k: (None if np.isnan(v[0]) else float(v[0])) for k, v in arrays.items()}


def bootstrap_intervals(
    units: Sequence[Confusion],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict[str, tuple[float, float] | None]:
    """95 % percentile intervals of each metric, resampling ``units`` with replacement.

    A unit is one answer: its single outcome (answer level) or the sum over its claims
    (claim level). A fresh generator per call, so a group's interval does not depend on
    which other groups were computed first. Undefined resamples (0/0) are dropped.
    """
    if not units:
        return dict.fromkeys(METRICS)
    rng = np.random.default_rng(seed)
    table = np.array([u.as_row() for u in units], dtype=np.float64)
    sums = []
    for at in range(0, resamples, 200):  # bounded memory for a few thousand units
        picks = rng.integers(0, len(units), size=(min(200, resamples - at), len(units)))
        sums.append(table[picks].sum(axis=1))
    arrays = _metric_arrays(np.concatenate(sums))
    out: dict[str, tuple[float, float] | None] = {}
    for name, values in arrays.items():
        finite = values[~np.isnan(values)]
        low, high = np.percentile(finite, [2.5, 97.5]) if finite.size else (np.nan, np.nan)
        out[name] = None if np.isnan(low) else (float(low), float(high))
    return out


@dataclass(frozen=True, slots=True)
class BinaryReport:
    """Counts, point values and 95 % intervals (None where undefined)."""

    counts: Confusion
    units: int
    values: dict[str, float | None]
    intervals: dict[str, tuple[float, float] | None]
    methods: dict[str, str]


def binary_report(
    units: Sequence[Confusion],
    *,
    clustered: bool = False,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> BinaryReport:
    """Answer level (``clustered=False``): Wilson for precision/recall, bootstrap for F1
    and balanced accuracy. Claim level: a cluster bootstrap over answers for all four."""
    total = sum(units, Confusion())
    boot = bootstrap_intervals(units, resamples, seed)
    intervals = dict(boot)
    methods = dict.fromkeys(METRICS, "cluster bootstrap" if clustered else "bootstrap")
    if not clustered:
        intervals["precision"] = wilson_interval(total.tp, total.tp + total.fp)
        intervals["recall"] = wilson_interval(total.tp, total.tp + total.fn)
        methods["precision"] = methods["recall"] = "wilson"
    return BinaryReport(total, len(units), _value(total), intervals, methods)
