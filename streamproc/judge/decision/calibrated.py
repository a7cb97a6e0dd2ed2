"""Turn the calibrator's probability into the claim's verdict, keeping the reasons.

The rule-based decision still runs and still names *why* a claim looks wrong (a negation
flip, no entailing sentence, a number the evidence lacks); the calibrator decides
*whether* it is wrong. A hard finding (a record that contradicts the claim, a refused
call, a guessed sentence, the closest evidence sentence saying the opposite) is never
overruled. Every calibrated verdict carries one
``CALIBRATED_RISK`` reason with the probability, the threshold and the signals that
moved it most, so an auditor can see what decided.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamproc.contracts.events import VerdictLabel
from streamproc.contracts.reasons import Reason
from streamproc.judge.rules.settle import Settled

__all__ = ["calibrated_decision", "risk_reason"]


def risk_reason(
    probability: float, threshold: float, drivers: Sequence[tuple[str, float]]
) -> Reason:
    """``CALIBRATED_RISK: 0.81 >= 0.45 (entail_logit_max +1.3, coverage_evidence +0.6)``."""
    sign = ">=" if probability >= threshold else "<"
    pushed = ", ".join(f"{name} {value:+.2f}" for name, value in drivers)
    tail = f" ({pushed})" if pushed else ""
    line = f"{threshold:.2f}" if round(threshold, 2) == threshold else f"{threshold:.4g}"
    return Reason("CALIBRATED_RISK", f"{probability:.2f} {sign} {line}{tail}")


def calibrated_decision(
    rule: Settled,
    probability: float,
    threshold: float,
    drivers: Sequence[tuple[str, float]],
    soft_reasons: Sequence[Reason],
) -> Settled:
    """The verdict for a claim no hard finding settled. ``rule`` is the rule-based
    decision from the NLI scores; its label and reasons are kept when the calibrator
    agrees the claim is not supported."""
    reason = risk_reason(probability, threshold, drivers)
    score = round(1.0 - probability, 4)
    if probability < threshold:
        return Settled(VerdictLabel.SUPPORTED, score, (reason,), rule.evidence_ids[:1])
    if rule.verdict is VerdictLabel.SUPPORTED:
        extra = tuple(soft_reasons) or (Reason("NOT_SUPPORTED_BY_SIGNALS"),)
        return Settled(VerdictLabel.UNSUPPORTED, score, (*extra, reason), rule.evidence_ids)
    kept = tuple(dict.fromkeys((*rule.reasons, *soft_reasons)))
    return Settled(rule.verdict, score, (*kept, reason), rule.evidence_ids)
