"""The NLI judge's logic with fake models: which level settles a claim, with which reason,
and that a batch makes one embedding call and one NLI call."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from streamproc.contracts.events import (
    Action,
    AnswerEvent,
    ConfidenceMark,
    TokenLogprob,
    VerdictLabel,
)
from streamproc.judge.nli.judge import NliJudge, NliOptions, NliThresholds
from streamproc.judge.protocols import NliScore
from streamproc.judge.records.record_values import ZeroLengthHours
from tests.unit.judge.nli_fakes import BagOfWordsEmbedder, OverlapScorer

NOTE = "Incomplete orders cannot be delivered or billed. The supplier delivered 90 of 100 pieces."


def event(answer: str, evidence: list[dict[str, Any]] | None = None, **extra: Any) -> AnswerEvent:
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
            **extra,
        }
    )


def judge(scorer: OverlapScorer, embedder: BagOfWordsEmbedder) -> NliJudge:
    return NliJudge(
        scorer,
        embedder,
        NliOptions(thresholds=NliThresholds(entailment=0.6), granularity="sentence"),
    )


def only_claim(judgement: Any) -> Any:
    [claim] = judgement.claims
    return claim


def test_verbatim_claim_is_supported_and_the_batch_is_scored_once(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    nli = judge(scorer, embedder)
    first, second = nli.judge_batch(
        [
            event("The supplier delivered 90 of 100 pieces [D1]."),
            event("Incomplete orders cannot be delivered."),
        ]
    )
    assert only_claim(first).verdict is VerdictLabel.SUPPORTED
    assert only_claim(first).evidence_ids == ["D1"]
    assert only_claim(first).citation_supported is True
    assert only_claim(second).verdict is VerdictLabel.SUPPORTED
    assert first.action is Action.PASS
    assert len(scorer.calls) == 1, "one NLI call for the whole batch"
    assert nli.info.models == {"fake-nli": "1" * 64, "fake-embedder": "0" * 64}


def test_changed_number_is_contradicted_without_the_model(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    [result] = judge(scorer, embedder).judge_batch(
        [event("The supplier delivered 80 of 100 pieces.")]
    )
    claim = only_claim(result)
    assert claim.verdict is VerdictLabel.CONTRADICTED
    assert claim.reasons[0].startswith("NUMBER_MISMATCH: 80")
    assert scorer.calls == [], "settled before NLI"


def test_negation_flip_is_contradicted(scorer: OverlapScorer, embedder: BagOfWordsEmbedder) -> None:
    [result] = judge(scorer, embedder).judge_batch([event("Incomplete orders can be billed.")])
    claim = only_claim(result)
    assert claim.verdict is VerdictLabel.CONTRADICTED
    assert claim.reasons[0].startswith("NEGATION_FLIP")
    assert claim.evidence_ids == ["D1"]


def test_unsupported_addition(scorer: OverlapScorer, embedder: BagOfWordsEmbedder) -> None:
    [result] = judge(scorer, embedder).judge_batch(
        [event("The plant manager must sign a waiver for incomplete orders.")]
    )
    claim = only_claim(result)
    assert claim.verdict is VerdictLabel.UNSUPPORTED
    assert claim.reasons[0].startswith("NOT_ENTAILED")
    assert result.action is Action.WITHHOLD


class _EntailsEverything(OverlapScorer):
    def score(self, pairs: Sequence[tuple[str, str]]) -> list[NliScore]:
        return [NliScore(entailment=0.9, contradiction=0.05, logits=(0.0, 0.0)) for _ in pairs]


def test_entailment_from_a_sentence_about_something_else_says_so(
    embedder: BagOfWordsEmbedder,
) -> None:
    """The reason names the coverage line, not "best 0.90 < 0.50" (which reads as a bug)."""
    strict = NliJudge(
        _EntailsEverything(),
        embedder,
        NliOptions(
            thresholds=NliThresholds(entailment=0.5, min_coverage=0.6), granularity="sentence"
        ),
    )
    [result] = strict.judge_batch([event("The supplier shipped wooden pallets by rail.")])
    claim = only_claim(result)
    assert claim.verdict is VerdictLabel.UNSUPPORTED
    assert re.fullmatch(
        r"NOT_ENTAILED: D1 entails 0\.90 but shares 0\.\d\d of the claim's words \(< 0\.60\)",
        claim.reasons[0],
    ), claim.reasons[0]


def test_swapped_entity_is_not_supported(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    evidence = [{"id": "D1", "text": "Globex acquired Initech in March."}]
    [result] = judge(scorer, embedder).judge_batch(
        [event("Initech was acquired by Umbrella in March.", evidence)]
    )
    assert only_claim(result).verdict is not VerdictLabel.SUPPORTED


def test_clear_contradiction_from_a_relevant_unit(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    evidence = [{"id": "D1", "text": "CONTRADICTS: the warehouse ships orders once a week."}]
    [result] = judge(scorer, embedder).judge_batch(
        [event("The warehouse ships orders every day.", evidence)]
    )
    claim = only_claim(result)
    assert claim.verdict is VerdictLabel.CONTRADICTED
    assert claim.reasons[0].startswith("NLI_CONTRADICTION")


RECORD = {
    "id": "ORDER-1",
    "kind": "record",
    "text": "order 55012: status processing, total 120.00 EUR",
    "fields": {"order_id": "55012", "status": "processing", "total": "120.00", "currency": "EUR"},
}


def test_record_state_mismatch(scorer: OverlapScorer, embedder: BagOfWordsEmbedder) -> None:
    [result] = judge(scorer, embedder).judge_batch(
        [event("Your order 55012 has been shipped.", [RECORD])]
    )
    claim = only_claim(result)
    assert claim.verdict is VerdictLabel.CONTRADICTED
    assert claim.reasons[0].startswith("RECORD_STATE_MISMATCH")


def test_refused_tool_call(scorer: OverlapScorer, embedder: BagOfWordsEmbedder) -> None:
    refused = {
        "id": "refund_order",
        "kind": "tool_result",
        "text": "refund_order(order_id=55012, amount=120.00): refused - over the agent's limit",
        "fields": {"order_id": "55012", "amount": "120.00"},
        "executed": False,
    }
    [result] = judge(scorer, embedder).judge_batch(
        [event("I have refunded 120.00 EUR for your order 55012.", [RECORD, refused])]
    )
    claim = only_claim(result)
    assert claim.verdict is VerdictLabel.CONTRADICTED
    assert claim.reasons[0].startswith("NOT_EXECUTED")


def test_shaky_number_in_logprobs_is_cut(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    answer = "The supplier delivered 90 of 100 pieces."
    words = ["The", " supplier", " delivered", " 90", " of", " 100", " pieces", "."]
    probabilities = [0.99, 0.95, 0.9, 0.05, 0.99, 0.97, 0.96, 0.99]
    tokens, offset = [], 0
    for text, p in zip(words, probabilities, strict=True):
        tokens.append(TokenLogprob(text=text, logprob=__import__("math").log(p), offset=offset))
        offset += len(text)
    [result] = judge(scorer, embedder).judge_batch([event(answer, tokens=tokens)])
    claim = only_claim(result)
    assert claim.confidence is ConfidenceMark.CUT
    assert claim.verdict is VerdictLabel.UNSUPPORTED
    assert any(r.startswith("SHAKY_SPECIFIC") for r in claim.reasons)


def test_overstatement(scorer: OverlapScorer, embedder: BagOfWordsEmbedder) -> None:
    evidence = [
        {
            "id": "S1",
            "text": "The trial suggests the drug may reduce symptoms in some patients. "
            "The effect on symptoms was small and not statistically significant.",
        }
    ]
    [result] = judge(scorer, embedder).judge_batch(
        [event("The drug always reduces symptoms in patients.", evidence)]
    )
    claim = only_claim(result)
    assert claim.verdict is VerdictLabel.UNSUPPORTED
    assert claim.reasons[0].startswith("OVERSTATED")


def test_citation_to_the_wrong_passage(scorer: OverlapScorer, embedder: BagOfWordsEmbedder) -> None:
    evidence = [
        {"id": "D1", "text": "The payment run pays every invoice that is due and not blocked."},
        {"id": "D2", "text": "Safety stock is a buffer quantity for uncertain demand."},
    ]
    [result] = judge(scorer, embedder).judge_batch(
        [event("The payment run pays every invoice that is due and not blocked [D2].", evidence)]
    )
    claim = only_claim(result)
    assert claim.verdict is VerdictLabel.SUPPORTED
    assert claim.citation_supported is False
    assert claim.citations_needed == [False]
    assert "CITATION_NOT_SUPPORTING" in claim.reasons


def test_confidence_thresholds_are_per_answering_model(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    from streamproc.judge.rules.confidence import ConfidenceThresholds

    answer = "Incomplete orders cannot be delivered."
    words = ["Incomplete", " orders", " cannot", " be", " delivered", "."]
    tokens, offset = [], 0
    for text in words:
        tokens.append(TokenLogprob(text=text, logprob=__import__("math").log(0.55), offset=offset))
        offset += len(text)
    strict = ConfidenceThresholds(cut_mean=0.6, low_mean=0.7)
    nli = NliJudge(
        scorer,
        embedder,
        NliOptions(granularity="sentence", confidence_by_model={"shaky-llm": strict}),
    )
    lenient, severe = nli.judge_batch(
        [event(answer, tokens=tokens), event(answer, tokens=tokens, model="shaky-llm")]
    )
    assert only_claim(lenient).confidence is ConfidenceMark.LOW
    assert only_claim(severe).confidence is ConfidenceMark.CUT
    assert only_claim(severe).verdict is VerdictLabel.UNSUPPORTED


def test_truncated_evidence_is_reported_on_the_claim(embedder: BagOfWordsEmbedder) -> None:
    from dataclasses import replace

    class Truncating(OverlapScorer):
        def score(self, pairs: Any) -> Any:
            return [replace(s, truncated=True) for s in super().score(pairs)]

    [result] = judge(Truncating(), embedder).judge_batch(
        [event("Incomplete orders cannot be delivered.")]
    )
    assert any(r.startswith("EVIDENCE_TRUNCATED: D1") for r in only_claim(result).reasons)


@pytest.mark.parametrize("decisive", [None, 0.6])
def test_nli_pairs_are_exactly_the_pairs_judging_sends_to_the_model(
    embedder: BagOfWordsEmbedder, decisive: float | None
) -> None:
    """The benchmark times the model alone on ``nli_pairs``: they must be what the judge
    scores, in the same order (with early decisions too, whose second round depends on
    the first round's scores)."""
    answers = [
        event("The supplier delivered 90 of 100 pieces [D1]. Orders can be billed."),
        event("Incomplete orders cannot be delivered."),
        event("The supplier is in Berlin."),
    ]
    sent: list[tuple[str, str]] = []

    class Recording(OverlapScorer):
        def score(self, pairs: Sequence[tuple[str, str]]) -> list[NliScore]:
            sent.extend(pairs)
            return super().score(pairs)

    scorer = Recording()
    nli = NliJudge(
        scorer,
        embedder,
        NliOptions(
            thresholds=NliThresholds(entailment=0.6),
            granularity="sentence",
            decisive_entailment=decisive,
        ),
    )
    asked = nli.nli_pairs(answers)
    assert asked == sent and len(asked) >= 3
    sent.clear()
    nli.judge_batch(answers)
    assert asked == sent


@pytest.mark.parametrize(("reading", "verdict"), [("closed", "contradicted"), ("unknown", None)])
def test_the_judge_reads_a_0_0_day_as_configured(
    scorer: OverlapScorer,
    embedder: BagOfWordsEmbedder,
    reading: ZeroLengthHours,
    verdict: str | None,
) -> None:
    """'Open seven days a week' about a business whose Monday reads "0:0-0:0": a value
    mismatch when the day reads closed (the default), no value finding when unknown; the
    reading is in the judge's info for the audit record."""
    days = ("Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
    hours = dict.fromkeys(days, "11:0-20:0")
    business = {"name": "Joe's", "hours": {**hours, "Monday": "0:0-0:0"}}
    judge = NliJudge(
        scorer, embedder, NliOptions(granularity="sentence", zero_length_hours=reading)
    )
    answer = event(
        "Joe's is open seven days a week.",
        evidence=[{"id": "R1", "text": json.dumps(business)}],
        question=None,
    )
    [result] = judge.judge_batch([answer])
    claim = only_claim(result)
    mismatch = [r for r in claim.reasons if r.startswith("VALUE_MISMATCH")]
    if verdict is None:
        assert not mismatch
    else:
        assert claim.verdict is VerdictLabel(verdict)
        assert "hours.Monday" in mismatch[0]
    assert judge.info.thresholds["zero_length_hours_closed"] == float(reading == "closed")


def test_a_name_spelt_otherwise_is_not_a_name_the_evidence_lacks(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    """ "UN" beside "U.N.": no NAME_NOT_IN_EVIDENCE; a name the evidence never writes
    still is one."""
    text = "Russia asked the U.N. Security Council to meet. Hugo Chávez was not there."
    [spelt, unknown] = judge(scorer, embedder).judge_batch(
        [
            event("Russia asked the UN Security Council to meet.", [{"id": "D1", "text": text}]),
            event("Russia asked the EU Council to meet.", [{"id": "D1", "text": text}]),
        ]
    )
    assert not any(r.startswith("NAME_NOT_IN_EVIDENCE") for r in only_claim(spelt).reasons)
    assert only_claim(unknown).reasons[0] == "NAME_NOT_IN_EVIDENCE: eu council"
