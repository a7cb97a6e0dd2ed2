"""``settle_batch``: the cheap checks alone, what the inline gate answers with when the
model stage cannot finish in time. Hard findings keep their verdicts; the rest is
unverified, never supported."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from streamproc.contracts.events import Action, AnswerEvent, Outcome, UnverifiedReason, VerdictLabel
from streamproc.inference.options import JudgeSettings
from streamproc.judge.nli.judge import NliJudge, NliOptions, NliThresholds
from streamproc.judge.protocols import SettlesCheaply
from streamproc.wiring import build_judge
from tests.unit.judge.nli_fakes import BagOfWordsEmbedder, OverlapScorer

NOTE = "Incomplete orders cannot be delivered or billed. The supplier delivered 90 of 100 pieces."
RECORD = {
    "id": "ORDER-1",
    "kind": "record",
    "text": "order 55012: status processing, total 120.00 EUR",
    "fields": {"order_id": "55012", "status": "processing", "total": "120.00", "currency": "EUR"},
}


def event(answer: str, evidence: list[dict[str, Any]] | None = None) -> AnswerEvent:
    return AnswerEvent.model_validate(
        {
            "event_id": "e",
            "answer_id": "a",
            "conversation_id": "c",
            "tenant": "t",
            "assistant_id": "bot",
            "model": "m",
            "occurred_at": datetime(2026, 1, 1, tzinfo=UTC),
            "question": "What about the order?",
            "answer": answer,
            "evidence": evidence if evidence is not None else [{"id": "D1", "text": NOTE}],
        }
    )


class _CountingEmbedder(BagOfWordsEmbedder):
    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Any) -> Any:
        self.calls += 1
        return super().embed(texts)


def nli(scorer: OverlapScorer, embedder: BagOfWordsEmbedder) -> NliJudge:
    return NliJudge(
        scorer,
        embedder,
        NliOptions(thresholds=NliThresholds(entailment=0.6), granularity="sentence"),
    )


def test_a_record_contradiction_is_settled_as_contradicted_without_any_model(
    scorer: OverlapScorer,
) -> None:
    embedder = _CountingEmbedder()
    judge = nli(scorer, embedder)
    assert isinstance(judge, SettlesCheaply)
    [settled] = judge.settle_batch(
        [event("Your order 55012 has been shipped.", [RECORD])],
        reason=UnverifiedReason.BUDGET_EXCEEDED,
    )
    [claim] = settled.claims
    assert claim.verdict is VerdictLabel.CONTRADICTED
    assert claim.reasons[0].startswith("RECORD_STATE_MISMATCH")
    assert settled.hallucinated
    assert settled.action in (Action.TRIM, Action.WITHHOLD)
    assert settled.outcome is Outcome.WRONG
    assert scorer.calls == [] and embedder.calls == 0


def test_a_passage_claim_is_unverified_not_supported(scorer: OverlapScorer) -> None:
    embedder = _CountingEmbedder()
    [settled] = nli(scorer, embedder).settle_batch(
        [event("Incomplete orders cannot be delivered.")], reason=UnverifiedReason.BUDGET_EXCEEDED
    )
    [claim] = settled.claims
    assert claim.verdict is VerdictLabel.UNVERIFIED
    assert claim.reasons == ["BUDGET_EXCEEDED"]
    assert settled.verified is False
    assert settled.unverified_reason is UnverifiedReason.BUDGET_EXCEEDED
    assert settled.outcome is Outcome.UNVERIFIED
    assert settled.action is Action.PASS and not settled.hallucinated
    assert settled.checked_claims == 0 and settled.faithfulness is None
    assert scorer.calls == [] and embedder.calls == 0


def test_a_mixed_answer_keeps_its_hard_finding_and_leaves_the_rest_open(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    [settled] = nli(scorer, embedder).settle_batch(
        [event("The supplier delivered 80 of 100 pieces. Incomplete orders cannot be billed.")],
        reason=UnverifiedReason.OVERLOADED,
    )
    verdicts = [c.verdict for c in settled.claims]
    assert verdicts == [VerdictLabel.CONTRADICTED, VerdictLabel.UNVERIFIED]
    assert settled.verified is False
    assert settled.unverified_reason is UnverifiedReason.OVERLOADED
    assert settled.hallucinated and settled.outcome is Outcome.WRONG
    # nothing checked is supported, so no claim survives a trim
    assert settled.action is Action.WITHHOLD


def test_the_rules_judge_settles_by_judging() -> None:
    judge = build_judge(JudgeSettings(name="rules"))
    assert isinstance(judge, SettlesCheaply)
    answers = [event("The supplier delivered 90 of 100 pieces."), event("Orders ship on Mars.")]
    assert judge.settle_batch(answers, reason=UnverifiedReason.BUDGET_EXCEEDED) == (
        judge.judge_batch(answers)
    )
