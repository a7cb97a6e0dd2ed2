"""The estimated true hallucination rate behind an observed flag rate - pure arithmetic.

The judge misses some hallucinations (sensitivity < 1) and flags some faithful answers
(specificity < 1), so the flagged share q is not the hallucinated share p:
``q = p * Se + (1 - p) * (1 - Sp)``. Rogan & Gladen (1978) invert it:

    p = (q + Sp - 1) / (Se + Sp - 1)

clipped to [0, 1]. Se and Sp are themselves measured on finitely many labelled answers
(EVALUATION.md's report split, or the deployment's reviewer labels, whose weighted counts
come as Kish effective counts, fractional), so the interval carries three sampling errors:
of q, of Se and of Sp.

Interval: Lang & Reiczigel (2014, Prev. Vet. Med. 113:13-22), an adjusted Wald interval on
the delta-method variance of the Rogan-Gladen estimator. It was chosen over the plain delta
method because it keeps its coverage on small counts (a quiet window, a judge measured on
17 summaries), where the plain Wald form collapses to zero width at q = 0 or Se = 1:

- adjusted inputs: q~ = (x + z^2/2) / (n + z^2); Se~ = (tp + 1) / (tp + fn + 2);
  Sp~ = (tn + 1) / (tn + fp + 2); J~ = Se~ + Sp~ - 1; p~ = (q~ + Sp~ - 1) / J~;
- variance (delta method, Rogan & Gladen): ``V = [q~(1-q~)/n~ + p~^2 Se~(1-Se~)/n_se~
  + (1-p~)^2 Sp~(1-Sp~)/n_sp~] / J~^2``;
- a shift for the estimator's bias: ``d = 2 z^2 [p~ Se~(1-Se~)/n_se~ - (1-p~)
  Sp~(1-Sp~)/n_sp~]``, as in the authors' script;
- limits ``p~ + d -+ z sqrt(V)``, clipped to [0, 1].

Not identifiable: the correction divides by Youden's J = Se + Sp - 1. When J is near 0 the
flags carry no information about the truth (a judge that flags everything has Se = 1,
Sp = 0) and any rate fits. We say so - ``identifiable=False``, no estimate - when
J <= ``min_youden`` (0.1 by default: the observed rate would be amplified more than 10x)
or when the 95 % lower bound of J (Wald, on the adjusted Se~ and Sp~) is not above 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from streamproc.contracts.events import CorrectedRate

__all__ = [
    "MIN_YOUDEN",
    "ConfusionCounts",
    "CorrectedRate",
    "corrected_rate",
    "corrected_rate_mixed",
    "identifiable",
    "judge_youden",
    "rogan_gladen",
]

MIN_YOUDEN: Final = 0.1


@dataclass(frozen=True, slots=True)
class ConfusionCounts:
    """The judge against labels: hallucinated answers flagged (tp) or missed (fn), faithful
    ones passed (tn) or flagged (fp). Whole counts from a benchmark, or fractional effective
    counts from weighted reviewer labels (``live_accuracy.live_confusion``): every formula
    here reads them as numbers of observations."""

    tp: float
    fn: float
    tn: float
    fp: float

    def __post_init__(self) -> None:
        counts = (self.tp, self.fn, self.tn, self.fp)
        if not all(math.isfinite(c) for c in counts) or min(counts) < 0:
            raise ValueError(f"confusion counts must be finite and >= 0: {self}")

    @property
    def sensitivity(self) -> float | None:
        positives = self.tp + self.fn
        return self.tp / positives if positives else None

    @property
    def specificity(self) -> float | None:
        negatives = self.tn + self.fp
        return self.tn / negatives if negatives else None


def rogan_gladen(observed: float, sensitivity: float, specificity: float) -> float:
    """The Rogan-Gladen true prevalence, clipped to [0, 1] (raises when Se + Sp = 1)."""
    youden = sensitivity + specificity - 1
    if youden == 0:
        raise ZeroDivisionError("sensitivity + specificity = 1: the flags say nothing")
    return min(1.0, max(0.0, (observed + specificity - 1) / youden))


def judge_youden(judge: ConfusionCounts) -> float | None:
    """Se + Sp - 1 as measured (None when a class is missing from the labels)."""
    se, sp = judge.sensitivity, judge.specificity
    return None if se is None or sp is None else se + sp - 1


def identifiable(
    judge: ConfusionCounts, *, z: float = 1.96, min_youden: float = MIN_YOUDEN
) -> bool:
    """Whether ``judge``'s flags can be turned into a true rate (see the module notes)."""
    youden = judge_youden(judge)
    if youden is None or youden <= min_youden:
        return False
    se, var_se, sp, var_sp = _adjusted(judge)
    return se + sp - 1 - z * math.sqrt(var_se + var_sp) > 0


def _adjusted(judge: ConfusionCounts) -> tuple[float, float, float, float]:
    """Se~, Var(Se~), Sp~, Var(Sp~): one success and one failure added to each."""
    n_se = judge.tp + judge.fn + 2
    se = (judge.tp + 1) / n_se
    n_sp = judge.tn + judge.fp + 2
    sp = (judge.tn + 1) / n_sp
    return se, se * (1 - se) / n_se, sp, sp * (1 - sp) / n_sp


def _centre_and_variance(
    flagged: int, n: int, judge: ConfusionCounts, z: float
) -> tuple[float, float]:
    """Lang-Reiczigel: the shifted centre p~ + d and the delta-method variance of p~."""
    z2 = z * z
    n_q = n + z2
    q = (flagged + z2 / 2) / n_q
    se, var_se, sp, var_sp = _adjusted(judge)
    youden = se + sp - 1
    p = (q + sp - 1) / youden
    variance = (q * (1 - q) / n_q + p * p * var_se + (1 - p) ** 2 * var_sp) / youden**2
    shift = 2 * z2 * (p * var_se - (1 - p) * var_sp)
    return p + shift, variance


def corrected_rate(
    flagged: int,
    n: int,
    judge: ConfusionCounts,
    *,
    z: float = 1.96,
    min_youden: float = MIN_YOUDEN,
) -> CorrectedRate:
    """The true hallucination rate of ``n`` judged answers of which ``flagged`` were
    flagged, corrected for ``judge``'s measured accuracy on one task type."""
    return corrected_rate_mixed([(flagged, n, judge)], z=z, min_youden=min_youden)


def corrected_rate_mixed(
    parts: Sequence[tuple[int, int, ConfusionCounts]],
    *,
    z: float = 1.96,
    min_youden: float = MIN_YOUDEN,
) -> CorrectedRate:
    """One window whose answers are of several task types, each judged with its own
    accuracy: ``parts`` = (flagged, n, judge) per task type. The estimate is the
    n-weighted mean of the per-type estimates; their variances add (the validation
    samples of the task types are disjoint, the answers independent). Not identifiable
    when any part is not. The interval is widened to hold the estimate if the adjusted
    centre moved it out (possible on a handful of answers)."""
    for flagged, n, _ in parts:
        if not 0 <= flagged <= n:
            raise ValueError(f"need 0 <= flagged <= n, got flagged={flagged}, n={n}")
    youdens = [judge_youden(judge) for _, _, judge in parts]
    youden = min((y for y in youdens if y is not None), default=None)
    total = sum(n for _, n, _ in parts)
    observed = sum(flagged for flagged, _, _ in parts) / total if total else None
    ok = bool(parts) and all(identifiable(j, z=z, min_youden=min_youden) for _, _, j in parts)
    empty = CorrectedRate(
        observed=observed,
        n=total,
        identifiable=ok,
        youden=youden,
        estimate=None,
        low=None,
        high=None,
    )
    if not ok or total == 0:
        return empty
    estimate = centre = variance = 0.0
    for flagged, n, judge in parts:
        if n == 0:
            continue
        weight = n / total
        se, sp = judge.sensitivity, judge.specificity
        assert se is not None and sp is not None  # identifiable
        estimate += weight * rogan_gladen(flagged / n, se, sp)
        part_centre, part_variance = _centre_and_variance(flagged, n, judge, z)
        centre += weight * part_centre
        variance += weight * weight * part_variance
    half = z * math.sqrt(variance)
    return empty.model_copy(
        update={
            "estimate": estimate,
            "low": min(estimate, _clip(centre - half)),
            "high": max(estimate, _clip(centre + half)),
            "clipped": centre - half < 0 or centre + half > 1,
        }
    )


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))
