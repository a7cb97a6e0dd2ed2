"""Fit the verdict calibrator: L2 logistic regression by Newton's method, in numpy.

A few thousand claims and two dozen signals need no training library, and numpy keeps
the fit exact and seed-free. Labels per claim:

- RAGTruth: a claim is positive when it overlaps a human-labelled span.
- HaluEval QA: answers are short, so every claim takes the answer's label.
- HaluEval summaries and dialogue: a faithful answer's claims are all negative; a
  hallucinated answer has *some* bad claim, not necessarily all (multiple-instance).
  The first fit weights its claims ``1/n``; the refit takes only the claim the first
  model finds most suspicious as the positive.

Every source gets the same total weight, so the many HaluEval QA rows do not decide
alone how summaries of records are judged. Classes are not re-balanced: the output stays
a probability, and the answer threshold is chosen separately.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamproc.judge.decision.calibrator import feature_row, regime_of

__all__ = [
    "Design",
    "FittedModel",
    "answer_flags",
    "balanced_accuracy",
    "build_design",
    "choose_regime_thresholds",
    "choose_threshold",
    "fit_calibrator",
    "fit_logistic",
    "fit_per_regime",
    "per_source_accuracy",
    "predict_per_regime",
    "regime_source_accuracy",
    "reliability_table",
    "subset",
]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class FittedModel:
    """Standardisation and weights, ready to write as the calibrator payload."""

    features: tuple[str, ...]
    mean: FloatArray
    scale: FloatArray
    coef: FloatArray
    intercept: float

    def probabilities(self, x: FloatArray) -> FloatArray:
        z = self.intercept + ((x - self.mean) / self.scale) @ self.coef
        out: FloatArray = 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))
        return out


def fit_logistic(
    x: FloatArray,
    y: FloatArray,
    weights: FloatArray,
    l2: float,
    signs: Sequence[int] | None = None,
    iterations: int = 50,
) -> tuple[FloatArray, float]:
    """Weighted L2-penalised logistic regression (the intercept is not penalised).

    ``signs`` (one per column: +1, -1 or 0 for free) constrains the direction a signal
    may push the risk: more entailment must never *raise* it, whatever collinear quirk
    of the training data would reward that. Solved by an active set: a coefficient
    that ends on the wrong side is pinned to zero and the rest refitted, until none is.
    """
    d = x.shape[1]
    wanted = np.asarray(signs if signs is not None else [0] * d, dtype=np.float64)
    free = np.ones(d, dtype=bool)
    for _ in range(d + 1):
        coef, intercept = _newton(x[:, free], y, weights, l2, iterations)
        full = np.zeros(d)
        full[free] = coef
        wrong = (wanted * full) < 0
        if not wrong.any():
            return full, intercept
        free &= ~wrong
    return full, intercept


def _newton(
    x: FloatArray, y: FloatArray, weights: FloatArray, l2: float, iterations: int
) -> tuple[FloatArray, float]:
    n, d = x.shape
    design = np.hstack([np.ones((n, 1)), x])
    beta = np.zeros(d + 1)
    penalty = np.full(d + 1, l2)
    penalty[0] = 0.0
    total = float(weights.sum())
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(design @ beta, -30, 30)))
        gradient = design.T @ (weights * (p - y)) / total + penalty * beta
        curvature = (design * (weights * p * (1 - p))[:, None]).T @ design / total
        step = np.linalg.solve(curvature + np.diag(penalty) + 1e-9 * np.eye(d + 1), gradient)
        beta -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return beta[1:], float(beta[0])


@dataclass(frozen=True, slots=True)
class Design:
    """The claims as a matrix, with what each row belongs to."""

    x: FloatArray
    rows: list[dict[str, Any]]
    source: list[str]
    answer: list[str]


def _source(row: Mapping[str, Any]) -> str:
    return f"{row['dataset']}-{row['task']}"


def build_design(rows: Sequence[dict[str, Any]], features: Sequence[str]) -> Design:
    x = np.array([feature_row(r["signals"], features) for r in rows], dtype=np.float64)
    return Design(x, list(rows), [_source(r) for r in rows], [str(r["row_id"]) for r in rows])


def _targets(design: Design, suspicion: FloatArray | None) -> tuple[FloatArray, FloatArray]:
    """Claim targets and weights (before source balancing); see the module docstring."""
    n = len(design.rows)
    y, w = np.zeros(n), np.zeros(n)
    members: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(design.rows):
        if row["hard"]:
            continue  # settled before the calibrator: not its decision to learn
        if row["claim_label"] is not None:
            y[i], w[i] = float(row["claim_label"]), 1.0
        elif row["answer_label"] is False:
            y[i], w[i] = 0.0, 1.0
        elif row["answer_label"] is True and row["task"] == "QA":
            y[i], w[i] = 1.0, 1.0
        elif row["answer_label"] is True:
            members[design.answer[i]].append(i)
    for indices in members.values():
        if suspicion is None:
            y[indices], w[indices] = 1.0, 1.0 / len(indices)
        else:
            top = max(indices, key=lambda k: suspicion[k])
            y[top], w[top] = 1.0, 1.0
    return y, w


def _balance(design: Design, weights: FloatArray) -> FloatArray:
    """Scale weights so every source has the same total."""
    out = weights.copy()
    sources = np.array(design.source)
    for source in set(design.source):
        mask = sources == source
        total = float(out[mask].sum())
        if total > 0:
            out[mask] /= total
    return out * len(out) / max(float(out.sum()), 1e-12)


def fit_calibrator(
    design: Design, features: Sequence[str], l2: float, signs: Sequence[int] | None = None
) -> FittedModel:
    """Two fits: weighted multiple-instance positives, then the most suspicious claim."""
    mean = design.x.mean(axis=0)
    scale = design.x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = (design.x - mean) / scale
    model: FittedModel | None = None
    for _ in range(2):
        suspicion = None if model is None else model.probabilities(design.x)
        y, w = _targets(design, suspicion)
        coef, intercept = fit_logistic(z, y, _balance(design, w), l2, signs)
        model = FittedModel(tuple(features), mean, scale, coef, intercept)
    assert model is not None
    return model


def fit_per_regime(
    design: Design, features: Sequence[str], l2: float, signs: Sequence[int] | None = None
) -> dict[str, FittedModel]:
    """One model per answer regime (``calibrator.regime_of``), each on its own claims."""
    regimes = _regimes(design)
    return {
        regime: fit_calibrator(subset(design, regimes == regime), features, l2, signs)
        for regime in sorted(set(regimes.tolist()))
    }


def predict_per_regime(models: Mapping[str, FittedModel], design: Design) -> FloatArray:
    """Each claim's probability from its regime's model."""
    regimes = _regimes(design)
    p = np.zeros(len(design.rows))
    for regime, model in models.items():
        mask = regimes == regime
        if mask.any():
            p[mask] = model.probabilities(design.x[mask])
    return p


def answer_flags(design: Design, p: FloatArray, threshold: float) -> dict[str, tuple[bool, bool]]:
    """Per answer: (people's label, flagged) - flagged when a hard finding settled a
    claim as not supported or some claim's probability reaches the threshold."""
    out: dict[str, tuple[bool, bool]] = {}
    for i, row in enumerate(design.rows):
        label = row["answer_label"]
        if label is None:
            continue
        flagged = bool(row["hard"]) or bool(p[i] >= threshold)
        previous = out.get(design.answer[i], (bool(label), False))
        out[design.answer[i]] = (bool(label), previous[1] or flagged)
    return out


def balanced_accuracy(pairs: Sequence[tuple[bool, bool]]) -> float:
    pos = [f for label, f in pairs if label]
    neg = [not f for label, f in pairs if not label]
    if not pos or not neg:
        return float("nan")
    return 0.5 * (sum(pos) / len(pos) + sum(neg) / len(neg))


def per_source_accuracy(design: Design, p: FloatArray, threshold: float) -> dict[str, float]:
    flags = answer_flags(design, p, threshold)
    source_of = dict(zip(design.answer, design.source, strict=True))
    grouped: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for answer, pair in flags.items():
        grouped[source_of[answer]].append(pair)
    return {s: balanced_accuracy(v) for s, v in sorted(grouped.items())}


def choose_threshold(design: Design, p: FloatArray) -> tuple[float, float]:
    """The claim threshold with the best mean answer-level balanced accuracy over the
    sources (each source counts once, whatever its size)."""
    best = (0.5, -1.0)
    for threshold in np.round(np.arange(0.05, 0.96, 0.01), 2):
        scores = [v for v in per_source_accuracy(design, p, float(threshold)).values() if v == v]
        score = float(np.mean(scores)) if scores else -1.0
        if score > best[1] + 1e-9:
            best = (float(threshold), score)
    return best


def _regimes(design: Design) -> NDArray[np.str_]:
    return np.array([regime_of(r["signals"]) for r in design.rows])


def subset(design: Design, mask: NDArray[np.bool_]) -> Design:
    keep = np.flatnonzero(mask)
    return Design(
        design.x[keep],
        [design.rows[i] for i in keep],
        [design.source[i] for i in keep],
        [design.answer[i] for i in keep],
    )


def choose_regime_thresholds(design: Design, p: FloatArray) -> tuple[dict[str, float], float]:
    """One threshold per answer regime (``calibrator.regime_of``), each chosen on that
    regime's answers; and the mean per-source balanced accuracy they give together."""
    regimes = _regimes(design)
    chosen: dict[str, float] = {}
    scores: list[float] = []
    for regime in sorted(set(regimes.tolist())):
        mask = regimes == regime
        part = subset(design, mask)
        chosen[regime], _ = choose_threshold(part, p[mask])
        per_source = per_source_accuracy(part, p[mask], chosen[regime]).values()
        scores += [v for v in per_source if v == v]
    return chosen, float(np.mean(scores)) if scores else -1.0


def regime_source_accuracy(
    design: Design, p: FloatArray, thresholds: Mapping[str, float], default: float
) -> dict[str, float]:
    """Per-source balanced accuracy with each regime's own threshold."""
    regimes = _regimes(design)
    out: dict[str, float] = {}
    for regime in sorted(set(regimes.tolist())):
        mask = regimes == regime
        part = subset(design, mask)
        out |= per_source_accuracy(part, p[mask], thresholds.get(regime, default))
    return dict(sorted(out.items()))


def reliability_table(
    p: FloatArray, y: FloatArray, bins: int = 10
) -> list[tuple[str, int, float, float]]:
    """(bin, claims, mean predicted, observed rate) for claims with a known label."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    out = []
    for lo, hi in itertools.pairwise(edges):
        mask = (p >= lo) & ((p < hi) if hi < 1.0 else (p <= hi))
        if mask.any():
            out.append(
                (
                    f"{lo:.1f}-{hi:.1f}",
                    int(mask.sum()),
                    float(p[mask].mean()),
                    float(y[mask].mean()),
                )
            )
    return out
