"""Whether an answer is hallucinated, knowing how many claims were tested.

Flagging an answer when *any* claim crosses the per-claim line turns a modest per-claim
false-alarm rate into a large per-answer one: with a 24 % false-alarm rate per claim,
six faithful claims are flagged together 1 - 0.76^6 = 81 % of the time. So the
answer-level decision is calibrated on its own, per answer regime
(``calibrator.regime_of``): a small logistic model, with its own threshold, fitted on
the calibrate split (``modelwork/train_answer_calibrator.py``) over one of
:data:`FEATURE_SETS` - the highest calibrated claim risk and the number of claims it was
the highest of, or the three highest risks, that number and the claims' mean evidence
coverage. A hard finding (a record that contradicts a claim, a guessed sentence cut, a
negation flip where those are reliable) still flags the answer outright. The claims keep
their own verdicts: they are what a trim removes.

A regime listed in ``hard_only_regimes`` (set by ``streamproc calibrate --from-labels``
where people's labels showed that no threshold reaches the target precision) flags an
answer only for a hard finding by reason code
(:data:`~streamproc.judge.decision.hard_findings.HARD_REASON_CODES`), whatever its risk.

Pure: built from an already-read payload (the loader checks the file's sha256).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from streamproc.judge.decision.calibrator import (
    ALL_REGIMES,
    REGIMES,
    CalibratorError,
    LinearPart,
    part_for,
)

__all__ = [
    "ANSWER_FEATURES",
    "FEATURE_DIRECTIONS",
    "FEATURE_SETS",
    "SORTED_RISK_FEATURES",
    "AnswerCalibrator",
    "AnswerCall",
    "answer_features",
    "claim_coverage",
]

ANSWER_FEATURES: Final = ("risk_logit_max", "claims_log")
"""The first answer model's inputs: the top claim risk as a logit, log(1 + calibrated
claims)."""
SORTED_RISK_FEATURES: Final = (
    "risk_logit_max",
    "risk_logit_2",
    "risk_logit_3",
    "claims_log",
    "coverage_mean",
)
"""The three highest claim risks as logits (a missing one at the floor), log(1 +
calibrated claims), and the calibrated claims' mean share of content words the evidence
holds (``coverage_evidence``)."""
FEATURE_SETS: Final = {"top-risk": ANSWER_FEATURES, "sorted-risks": SORTED_RISK_FEATURES}
FEATURE_DIRECTIONS: Final = {
    "risk_logit_max": 1,
    "risk_logit_2": 1,
    "risk_logit_3": 1,
    "claims_log": 0,
    "coverage_mean": -1,
}
"""The way each input may push the answer's risk (0: free), for the fit."""

_RISK_FLOOR: Final = 1e-4


def _logit(risk: float) -> float:
    bounded = min(max(risk, _RISK_FLOOR), 1 - _RISK_FLOOR)
    return math.log(bounded / (1 - bounded))


def claim_coverage(signals: Mapping[str, float] | None) -> float:
    """A calibrated claim's part of ``coverage_mean``: its ``coverage_evidence`` signal
    (1.0 when the claim has none)."""
    return (signals or {}).get("coverage_evidence", 1.0)


def answer_features(risks: Sequence[float], coverages: Sequence[float] = ()) -> dict[str, float]:
    """Every answer model input, from the calibrated (not hard-settled) claims' risks and
    evidence coverages."""
    ordered = sorted(risks, reverse=True) + [_RISK_FLOOR] * 3
    return {
        "risk_logit_max": _logit(ordered[0]),
        "risk_logit_2": _logit(ordered[1]),
        "risk_logit_3": _logit(ordered[2]),
        "claims_log": math.log1p(len(risks)),
        "coverage_mean": float(np.mean(coverages)) if len(coverages) else 1.0,
    }


@dataclass(frozen=True, slots=True)
class AnswerCall:
    """The answer-level decision and what it rested on, for the verdict and the audit."""

    hallucinated: bool
    risk: float | None
    threshold: float | None


@dataclass(frozen=True, slots=True)
class AnswerCalibrator:
    """One ``LinearPart`` per regime over ``ANSWER_FEATURES``; the answer is hallucinated
    at or above its regime's threshold, or when a hard finding settled one claim."""

    name: str
    sha256: str
    parts: Mapping[str, LinearPart]
    claim_calibrator: str | None = None
    hard_only: frozenset[str] = frozenset()
    """Regimes where only a hard finding flags the answer (its risk is still reported)."""
    features: tuple[str, ...] = ANSWER_FEATURES
    """One of :data:`FEATURE_SETS`, in the order the weights read them."""

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any], *, sha256: str) -> AnswerCalibrator:
        """Build from the JSON the training script writes; refuses inconsistent shapes."""
        try:
            name = str(payload["name"])
            features = tuple(str(f) for f in payload["features"])
            raw_parts = dict(payload["regimes"])
        except (KeyError, TypeError, ValueError) as error:
            raise CalibratorError(f"answer calibrator payload is incomplete: {error}") from None
        if features not in FEATURE_SETS.values():
            raise CalibratorError(
                f"answer calibrator {name!r} reads {features}, not one of "
                f"{sorted(FEATURE_SETS.values())}"
            )
        if not set(REGIMES) <= set(raw_parts) <= set(ALL_REGIMES):
            raise CalibratorError(
                f"answer calibrator needs the regimes {list(REGIMES)} (and may have 'case')"
            )
        parts = {r: LinearPart.from_payload(raw_parts[r], len(features)) for r in raw_parts}
        claim = payload.get("claim_calibrator")
        hard_only = payload.get("hard_only_regimes") or []
        if not isinstance(hard_only, list) or not set(map(str, hard_only)) <= set(ALL_REGIMES):
            raise CalibratorError(
                f"answer calibrator {name!r}: hard_only_regimes must list regimes of {ALL_REGIMES}"
            )
        return cls(
            name,
            sha256,
            parts,
            None if claim is None else str(claim),
            frozenset(map(str, hard_only)),
            features,
        )

    def check_claim_calibrator(self, name: str | None) -> None:
        """Its weights read one claim calibrator's risks; refuse any other's."""
        if self.claim_calibrator is not None and self.claim_calibrator != name:
            raise CalibratorError(
                f"answer calibrator {self.name!r} was fitted on the risks of "
                f"{self.claim_calibrator!r}, not {name!r}: refit it "
                "(modelwork/train_answer_calibrator.py)"
            )

    def decide(
        self,
        regime: str,
        risks: Sequence[float],
        hard: bool,
        *,
        hard_finding: bool = False,
        coverages: Sequence[float] = (),
    ) -> AnswerCall:
        """Hallucinated when ``hard`` (a hard finding settled a claim), else when the
        answer's risk reaches the regime's threshold; no calibrated claim, no risk. In a
        hard-only regime, only ``hard_finding`` (some claim's reason is a hard reason
        code) flags it. ``coverages``: the calibrated claims' ``coverage_evidence``."""
        part = part_for(self.parts, regime)
        hard_only = regime in self.hard_only
        if not risks:
            return AnswerCall(hard_finding if hard_only else hard, None, part.threshold)
        values = answer_features(risks, coverages)
        x = np.array([values[f] for f in self.features], dtype=np.float64)
        logit = float(np.clip(part.logits(x[None, :])[0], -30.0, 30.0))
        risk = round(1.0 / (1.0 + math.exp(-logit)), 4)
        if hard_only:
            return AnswerCall(hard_finding, risk, part.threshold)
        return AnswerCall(hard or risk >= part.threshold, risk, part.threshold)

    def describe(self) -> dict[str, float]:
        """Thresholds an auditor needs to replay the decision (and, when any regime is
        hard-only, which: ``answer_hard_only_<regime>`` = 1.0)."""
        out = {f"answer_threshold_{r}": part_for(self.parts, r).threshold for r in ALL_REGIMES}
        if self.hard_only:
            out.update({f"answer_hard_only_{r}": float(r in self.hard_only) for r in ALL_REGIMES})
        return out
