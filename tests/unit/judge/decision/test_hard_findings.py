"""Hard findings by reason code, and the answer calibrator's hard-only regimes in the NLI
judge: there, only a record / value / name / number finding flags the answer."""

from __future__ import annotations

import json
from typing import Any

from streamproc.contracts.events import Action, ClaimClass, ClaimVerdict, VerdictLabel
from streamproc.judge.decision.answer import ANSWER_FEATURES, AnswerCalibrator
from streamproc.judge.decision.calibrator import REGIMES, VerdictCalibrator
from streamproc.judge.decision.hard_findings import has_hard_finding
from streamproc.judge.nli.judge import NliJudge, NliOptions, NliThresholds
from tests.unit.judge.nli.test_judge import event
from tests.unit.judge.nli_fakes import BagOfWordsEmbedder, OverlapScorer

QUAKE = "A magnitude 7.8 quake struck central Nepal on Saturday."
UNSUPPORTED = "Tourists were evacuated by helicopter from the mountain villages."


def verdict(label: VerdictLabel | None, *reasons: str) -> ClaimVerdict:
    return ClaimVerdict(
        index=0,
        sentence_index=0,
        text="x",
        start=0,
        end=1,
        claim_class=ClaimClass.RULE,
        verdict=label,
        reasons=list(reasons),
    )


def test_a_hard_finding_is_a_not_supported_claim_with_a_hard_reason_code() -> None:
    assert has_hard_finding(verdict(VerdictLabel.CONTRADICTED, "VALUE_MISMATCH: hours.Monday"))
    assert has_hard_finding(verdict(VerdictLabel.UNSUPPORTED, "NUMBER_MISMATCH: 7 not in it"))
    assert not has_hard_finding(verdict(VerdictLabel.UNSUPPORTED, "NOT_ENTAILED: 0.12"))
    assert not has_hard_finding(verdict(VerdictLabel.CONTRADICTED, "NEGATION_FLIP: against D1"))
    assert not has_hard_finding(verdict(VerdictLabel.SUPPORTED, "VALUE_MISMATCH: x"))
    assert not has_hard_finding(verdict(None))


def claim_calibrator() -> VerdictCalibrator:
    """Every claim the calibrator decides gets risk 0.5 >= 0.4: not supported."""
    part = {"mean": [0.0], "scale": [1.0], "coef": [0.0], "intercept": 0.0, "threshold": 0.4}
    payload = {"name": "cal", "features": ["negation_flip"], "regimes": {r: part for r in REGIMES}}
    return VerdictCalibrator.from_payload(payload, sha256="2" * 64)


def answer_calibrator(hard_only: list[str]) -> AnswerCalibrator:
    """Answer risk 0.5 for a claim at risk 0.5; threshold 0.1, so risk alone flags."""
    part = {
        "mean": [0.0, 0.0],
        "scale": [1.0, 1.0],
        "coef": [1.0, 0.0],
        "intercept": 0.0,
        "threshold": 0.1,
    }
    payload: dict[str, Any] = {
        "name": "answers-from-labels",
        "features": list(ANSWER_FEATURES),
        "claim_calibrator": "cal",
        "regimes": {r: part for r in REGIMES},
        "hard_only_regimes": hard_only,
    }
    return AnswerCalibrator.from_payload(payload, sha256="3" * 64)


def judge(hard_only: list[str]) -> NliJudge:
    return NliJudge(
        OverlapScorer(),
        BagOfWordsEmbedder(),
        NliOptions(thresholds=NliThresholds(entailment=0.9), granularity="sentence"),
        calibrator=claim_calibrator(),
        answer_calibrator=answer_calibrator(hard_only),
    )


def summary(answer: str) -> Any:
    return event(answer, [{"id": "D1", "text": QUAKE}], question=None)


def record_answer() -> Any:
    days = ("Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
    business = {"name": "Joe's", "hours": {**dict.fromkeys(days, "11:0-20:0"), "Monday": "0:0-0:0"}}
    evidence = [{"id": "R1", "text": json.dumps(business)}]
    return event("Joe's is open seven days a week.", evidence, question=None)


def test_soft_unsupported_claims_pass_in_a_hard_only_regime() -> None:
    [risky] = judge([]).judge_batch([summary(UNSUPPORTED)])
    assert risky.hallucinated and risky.action is not Action.PASS, "risk alone flags it"
    [cleared] = judge(["task"]).judge_batch([summary(UNSUPPORTED)])
    assert cleared.claims[0].verdict is VerdictLabel.UNSUPPORTED, "the claim keeps its verdict"
    assert not any(has_hard_finding(c) for c in cleared.claims)
    assert not cleared.hallucinated and cleared.action is Action.PASS
    assert cleared.answer_risk == risky.answer_risk, "the risk is still reported"


def test_a_record_value_mismatch_still_flags_in_a_hard_only_regime() -> None:
    hard_only = judge(["record", "task"])
    [result] = hard_only.judge_batch([record_answer()])
    assert result.claims[0].verdict is VerdictLabel.CONTRADICTED
    assert any(r.startswith("VALUE_MISMATCH") for r in result.claims[0].reasons)
    assert result.hallucinated and result.action is not Action.PASS
    info = hard_only.info
    assert info.thresholds["answer_hard_only_record"] == 1.0
    assert info.thresholds["answer_hard_only_question"] == 0.0
    assert info.models["answers-from-labels"] == "3" * 64, "audit records name the calibrator"


def test_without_hard_only_regimes_the_judge_info_is_unchanged() -> None:
    assert not any(k.startswith("answer_hard_only") for k in judge([]).info.thresholds)
