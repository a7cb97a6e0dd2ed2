"""The learned verdict calibrator: claim signals in, probability of hallucination out.

A logistic regression over standardised signals (``signals.py``), trained offline by
``scripts/train_calibrator.py`` and shipped as a small JSON file with a manifest. At run
time it is a dot product in numpy - no training library is needed to use it - and its
output is a probability that was checked for calibration on rows it never saw
(EVALUATION.md has the reliability table).

Pure: it is built from an already-read payload; reading and hash-checking the file is
the loader's job (``streamproc.inference.calibrator_loader``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["CalibratorError", "VerdictCalibrator"]


class CalibratorError(ValueError):
    """A calibrator payload that does not fit the signals this judge computes."""


@dataclass(frozen=True, slots=True)
class VerdictCalibrator:
    """``p(hallucinated | signals) = sigmoid(intercept + coef . (x - mean) / scale)``.

    ``threshold`` is the probability at or above which a claim is not supported; it was
    chosen on the training split, like the weights.
    """

    name: str
    sha256: str
    features: tuple[str, ...]
    mean: NDArray[np.float64]
    scale: NDArray[np.float64]
    coef: NDArray[np.float64]
    intercept: float
    threshold: float

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any], *, sha256: str) -> VerdictCalibrator:
        """Build from the JSON the training script writes; refuses inconsistent shapes."""
        try:
            features = tuple(str(f) for f in payload["features"])
            arrays = [np.asarray(payload[k], dtype=np.float64) for k in ("mean", "scale", "coef")]
            intercept = float(payload["intercept"])
            threshold = float(payload["threshold"])
            name = str(payload["name"])
        except (KeyError, TypeError, ValueError) as error:
            raise CalibratorError(f"calibrator payload is incomplete: {error}") from None
        if any(a.shape != (len(features),) for a in arrays):
            raise CalibratorError("mean, scale and coef must each have one value per feature")
        if np.any(arrays[1] <= 0) or not 0.0 < threshold < 1.0:
            raise CalibratorError("scales must be positive and the threshold within (0, 1)")
        mean, scale, coef = arrays
        return cls(name, sha256, features, mean, scale, coef, intercept, threshold)

    def check_signals(self, available: Sequence[str]) -> None:
        """Refuse to run on a judge that does not compute every feature it was trained on."""
        missing = [f for f in self.features if f not in set(available)]
        if missing:
            raise CalibratorError(f"calibrator {self.name!r} needs unknown signals: {missing}")

    def probabilities(self, rows: Sequence[Mapping[str, float]]) -> NDArray[np.float64]:
        """One probability per signal row (vectorised over a batch)."""
        if not rows:
            return np.zeros(0, dtype=np.float64)
        x = np.array([[row[f] for f in self.features] for row in rows], dtype=np.float64)
        z = self.intercept + ((x - self.mean) / self.scale) @ self.coef
        out: NDArray[np.float64] = 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))
        return out

    def probability(self, signals: Mapping[str, float]) -> float:
        return float(self.probabilities([signals])[0])

    def contributions(self, signals: Mapping[str, float], top: int = 3) -> list[tuple[str, float]]:
        """The features that pushed this claim's log-odds most, for the audit reason."""
        x = np.array([signals[f] for f in self.features], dtype=np.float64)
        parts = ((x - self.mean) / self.scale) * self.coef
        order = np.argsort(-np.abs(parts))[:top]
        return [(self.features[i], round(float(parts[i]), 2)) for i in order if parts[i] != 0]

    def describe(self) -> dict[str, float]:
        """Thresholds an auditor needs to replay the decision."""
        return {
            "calibrator_threshold": self.threshold,
            "calibrator_logit_threshold": _logit(self.threshold),
        }


def _logit(p: float) -> float:
    return round(math.log(p / (1 - p)), 6)
