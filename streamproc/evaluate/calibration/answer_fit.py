"""Fit the answer calibrator (``streamproc.judge.decision.answer``) on judged answers.

Input: the default judge's judgements (claim calibrator on, answer calibrator off) of
the calibrate split and the seeded HaluEval summarization sample. Per regime, a logistic
regression over a feature set (``answer.FEATURE_SETS``) of the answers no hard finding
settled - weighted so each source and each label weigh the same - and the threshold on
its probability that maximises the mean per-source balanced accuracy of the answer
decision as the judge makes it (a hard finding flags; otherwise some claim must be
unsupported *and* the answer's risk must reach the threshold).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamproc.contracts.events import AnswerJudgement, VerdictLabel
from streamproc.evaluate.calibration.fit import balanced_accuracy, fit_logistic
from streamproc.judge.decision.answer import FEATURE_DIRECTIONS, answer_features, claim_coverage
from streamproc.judge.decision.calibrator import REGIMES, LinearPart, regime_of

__all__ = ["AnswerRow", "FittedPart", "answer_row", "fit_answer_parts", "flags"]

_L2 = 0.01
_GRID = np.round(np.arange(0.02, 0.99, 0.01), 2)


@dataclass(frozen=True, slots=True)
class AnswerRow:
    """One judged answer, reduced to what the answer calibrator reads."""

    source: str
    regime: str
    label: bool
    hard: bool
    any_refuted: bool
    risks: tuple[float, ...]
    coverages: tuple[float, ...] = ()

    def x(self, features: Sequence[str]) -> list[float]:
        values = answer_features(self.risks, self.coverages)
        return [values[f] for f in features]


def answer_row(source: str, label: bool, judgement: AnswerJudgement) -> AnswerRow | None:
    """None for an answer with no checked claim (never flagged, nothing to learn)."""
    # an unverified claim was never checked: nothing to learn from it
    checked = [
        c
        for c in judgement.claims
        if c.verdict is not None and c.verdict is not VerdictLabel.UNVERIFIED
    ]
    if not checked:
        return None
    calibrated = [c for c in checked if any(r.code == "CALIBRATED_RISK" for r in c.reasons)]
    hard = any(c.verdict is not VerdictLabel.SUPPORTED and c not in calibrated for c in checked)
    return AnswerRow(
        source=source,
        regime=regime_of(checked[0].signals),
        label=label,
        hard=hard,
        any_refuted=any(c.verdict is not VerdictLabel.SUPPORTED for c in checked),
        risks=tuple(c.risk for c in calibrated if c.risk is not None),
        coverages=tuple(claim_coverage(c.signals) for c in calibrated if c.risk is not None),
    )


@dataclass(frozen=True, slots=True)
class FittedPart:
    """One regime's model (as the judge reads it) and its training score."""

    model: LinearPart
    score: float
    features: tuple[str, ...]

    def probabilities(self, rows: Sequence[AnswerRow]) -> NDArray[np.float64]:
        if not rows:
            return np.zeros(0)
        logits = self.model.logits(np.array([r.x(self.features) for r in rows]))
        out: NDArray[np.float64] = 1.0 / (1.0 + np.exp(-np.clip(logits, -30, 30)))
        return out


def flags(rows: Sequence[AnswerRow], p: NDArray[np.float64], threshold: float) -> list[bool]:
    """The judge's answer decision for each row at ``threshold``."""
    return [
        r.hard or (r.any_refuted and bool(q >= threshold)) for r, q in zip(rows, p, strict=True)
    ]


def _mean_balanced_accuracy(rows: Sequence[AnswerRow], flagged: Sequence[bool]) -> float:
    scores = []
    for source in sorted({r.source for r in rows}):
        pairs = [(r.label, f) for r, f in zip(rows, flagged, strict=True) if r.source == source]
        score = balanced_accuracy(pairs)  # nan for a source with one label only
        if not np.isnan(score):
            scores.append(score)
    return float(np.mean(scores)) if scores else 0.0


def _weights(rows: Sequence[AnswerRow]) -> NDArray[np.float64]:
    """Each (source, label) cell weighs the same in the fit."""
    cells: dict[tuple[str, bool], int] = {}
    for r in rows:
        cells[(r.source, r.label)] = cells.get((r.source, r.label), 0) + 1
    return np.array([len(rows) / len(cells) / cells[(r.source, r.label)] for r in rows])


def fit_answer_parts(
    rows: Sequence[AnswerRow], features: Sequence[str]
) -> Mapping[str, FittedPart]:
    """One fitted part per regime over ``features`` (every regime must have answers of
    both labels)."""
    names = tuple(features)
    parts = {}
    for regime in REGIMES:
        mine = [r for r in rows if r.regime == regime]
        soft = [r for r in mine if not r.hard]
        if len({r.label for r in soft}) < 2:
            raise ValueError(f"regime {regime!r}: answers of both labels are needed")
        x = np.array([r.x(names) for r in soft])
        # a feature constant in a regime (a third risk where answers have two claims at
        # most) keeps scale 1: its standardised column is 0 and its weight stays 0
        spread = x.std(axis=0)
        mean, scale = x.mean(axis=0), np.where(spread > 1e-6, spread, 1.0)
        y = np.array([float(r.label) for r in soft])
        signs = [FEATURE_DIRECTIONS[f] for f in names]
        coef, intercept = fit_logistic((x - mean) / scale, y, _weights(soft), _L2, signs)
        model = LinearPart(mean, scale, coef, intercept, 0.5)
        p = FittedPart(model, 0.0, names).probabilities(mine)
        scored = [
            (_mean_balanced_accuracy(mine, flags(mine, p, float(t))), -float(t)) for t in _GRID
        ]
        score, negative = max(scored)
        parts[regime] = FittedPart(
            LinearPart(mean, scale, coef, intercept, -negative), score, names
        )
    return parts
