"""The learned verdict calibrator: claim signals in, probability of hallucination out.

Logistic regressions over standardised signals (``signals.py``), one per answer regime
(``regime_of``: a summary of a record, a reply to a question, a task over passages),
trained offline by ``modelwork/train_calibrator.py`` and shipped as a small JSON file with
a manifest. The regimes get their own weights because the same signal means different
things in them (word coverage of a flattened record against fluent prose, say). At run
time it is a dot product in numpy - no training library is needed to use it - and its
output is a probability that was checked for calibration on rows it never saw
(EVALUATION.md has the reliability table).

Pure: it is built from an already-read payload; reading and hash-checking the file is
the loader's job (``streamproc.inference.calibrator_loader``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ALL_REGIMES",
    "CASE_REGIME",
    "REGIMES",
    "CalibratorError",
    "LinearPart",
    "VerdictCalibrator",
    "feature_row",
    "regime",
    "regime_of",
]

REGIMES = ("record", "question", "task")
"""The regimes every calibrator is fitted for."""

CASE_REGIME: Final = "case"
"""An answer about a customer's case: its evidence holds records with fields or tool
results. A calibrator without a part of its own for it reads it with its ``record``
part (:data:`REGIME_FALLBACK`)."""

ALL_REGIMES: Final = (*REGIMES, CASE_REGIME)
REGIME_FALLBACK: Final = {CASE_REGIME: "record"}


class CalibratorError(ValueError):
    """A calibrator payload that does not fit the signals this judge computes."""


def regime(structured_evidence: bool, has_question: bool, case_evidence: bool = False) -> str:
    """``case`` (records with fields, tool results: an answer about a customer's case),
    ``record`` (other structured evidence, e.g. a listing to describe), ``question`` (a
    reply to a question) or ``task`` (e.g. a summary of passages): what the answer is,
    known from the event itself."""
    if case_evidence:
        return CASE_REGIME
    if structured_evidence:
        return "record"
    return "question" if has_question else "task"


def regime_of(signals: Mapping[str, float]) -> str:
    """:func:`regime` of a claim, from its signals."""
    return regime(
        signals.get("structured_evidence", 0.0) > 0,
        signals.get("has_question", 0.0) > 0,
        signals.get("case_evidence", 0.0) > 0,
    )


def part_for(parts: Mapping[str, LinearPart], name: str) -> LinearPart:
    """A regime's part, or its fallback's when the payload has none of its own."""
    found = parts.get(name)
    return found if found is not None else parts[REGIME_FALLBACK[name]]


def feature_row(signals: Mapping[str, float], features: Sequence[str]) -> list[float]:
    """The calibrator's inputs from named signals; a feature ``a*b`` is the product of
    two signals."""
    out = []
    for feature in features:
        value = 1.0
        for part in feature.split("*"):
            value *= signals[part]
        out.append(value)
    return out


@dataclass(frozen=True, slots=True)
class LinearPart:
    """``p = sigmoid(intercept + coef . (x - mean) / scale)`` and the line on ``p``."""

    mean: NDArray[np.float64]
    scale: NDArray[np.float64]
    coef: NDArray[np.float64]
    intercept: float
    threshold: float

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any], width: int) -> LinearPart:
        try:
            arrays = [np.asarray(payload[k], dtype=np.float64) for k in ("mean", "scale", "coef")]
            intercept, threshold = float(payload["intercept"]), float(payload["threshold"])
        except (KeyError, TypeError, ValueError) as error:
            raise CalibratorError(f"calibrator part is incomplete: {error}") from None
        if any(a.shape != (width,) for a in arrays):
            raise CalibratorError("mean, scale and coef must each have one value per feature")
        if np.any(arrays[1] <= 0) or not 0.0 < threshold < 1.0:
            raise CalibratorError("scales must be positive and the threshold within (0, 1)")
        mean, scale, coef = arrays
        return cls(mean, scale, coef, intercept, threshold)

    def logits(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        out: NDArray[np.float64] = self.intercept + ((x - self.mean) / self.scale) @ self.coef
        return out

    def contributions(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        out: NDArray[np.float64] = ((x - self.mean) / self.scale) * self.coef
        return out


@dataclass(frozen=True, slots=True)
class VerdictCalibrator:
    """One ``LinearPart`` per regime over the same ``features``. A claim at or above its
    regime's threshold is not supported; weights and thresholds come from training."""

    name: str
    sha256: str
    features: tuple[str, ...]
    parts: Mapping[str, LinearPart]
    nli_model: str | None = None
    embedding_model: str | None = None

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any], *, sha256: str) -> VerdictCalibrator:
        """Build from the JSON the training script writes; refuses inconsistent shapes."""
        try:
            features = tuple(str(f) for f in payload["features"])
            name = str(payload["name"])
            raw_parts = dict(payload["regimes"])
        except (KeyError, TypeError, ValueError) as error:
            raise CalibratorError(f"calibrator payload is incomplete: {error}") from None
        if not set(REGIMES) <= set(raw_parts) <= set(ALL_REGIMES):
            raise CalibratorError(
                f"calibrator needs the regimes {list(REGIMES)} (and may have {CASE_REGIME!r})"
            )
        parts = {r: LinearPart.from_payload(raw_parts[r], len(features)) for r in raw_parts}
        nli_model, embedding_model = payload.get("nli_model"), payload.get("embedding_model")
        return cls(
            name,
            sha256,
            features,
            parts,
            None if nli_model is None else str(nli_model),
            None if embedding_model is None else str(embedding_model),
        )

    def check_models(self, nli_model: str, embedding_model: str) -> None:
        """Its weights only mean something for the models whose scores it learned: the
        NLI model's logits and the embedder's similarities (older calibrators name only
        the NLI model)."""
        for role, trained, running in (
            ("NLI", self.nli_model, nli_model),
            ("embedding", self.embedding_model, embedding_model),
        ):
            if trained is not None and trained != running:
                raise CalibratorError(
                    f"calibrator {self.name!r} was trained on {role} model {trained!r}, "
                    f"not {running!r}: train one for it (modelwork/train_calibrator.py)"
                )

    def check_signals(self, available: Sequence[str]) -> None:
        """Refuse to run on a judge that does not compute every feature it was trained on."""
        known = set(available)
        missing = [f for f in self.features if any(p not in known for p in f.split("*"))]
        if missing:
            raise CalibratorError(f"calibrator {self.name!r} needs unknown signals: {missing}")

    def threshold_for(self, signals: Mapping[str, float]) -> float:
        return part_for(self.parts, regime_of(signals)).threshold

    def probabilities(self, rows: Sequence[Mapping[str, float]]) -> NDArray[np.float64]:
        """One probability per signal row (vectorised per regime)."""
        out = np.zeros(len(rows), dtype=np.float64)
        if not rows:
            return out
        x = np.array([feature_row(row, self.features) for row in rows], dtype=np.float64)
        regimes = np.array([regime_of(row) for row in rows])
        for regime in ALL_REGIMES:
            mask = regimes == regime
            if mask.any():
                part = part_for(self.parts, regime)
                out[mask] = 1.0 / (1.0 + np.exp(-np.clip(part.logits(x[mask]), -30.0, 30.0)))
        return out

    def probability(self, signals: Mapping[str, float]) -> float:
        return float(self.probabilities([signals])[0])

    def contributions(self, signals: Mapping[str, float], top: int = 3) -> list[tuple[str, float]]:
        """The features that pushed this claim's log-odds most, for the audit reason."""
        x = np.array(feature_row(signals, self.features), dtype=np.float64)
        parts = part_for(self.parts, regime_of(signals)).contributions(x)
        order = np.argsort(-np.abs(parts))[:top]
        return [(self.features[i], round(float(parts[i]), 2)) for i in order if parts[i] != 0]

    def describe(self) -> dict[str, float]:
        """Thresholds an auditor needs to replay the decision."""
        return {
            f"calibrator_threshold_{r}": part_for(self.parts, r).threshold
            for r in sorted(ALL_REGIMES)
        }
