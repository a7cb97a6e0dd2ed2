"""ClaimJudge: one checker call per batch, question as evidence, bad answers isolated."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from streamproc.contracts.events import Action, AnswerEvent, EvidenceItem, Outcome, VerdictLabel
from streamproc.inference.options import JudgeSettings
from streamproc.judge import PremiseCheck
from streamproc.judge.engine import ClaimJudge
from streamproc.judge.rules.checker import RulesChecker
from streamproc.wiring import available_judges, build_judge


class CountingChecker(RulesChecker):
    """The rules checker, remembering every call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[PremiseCheck]] = []

    def check(self, pairs: Sequence[PremiseCheck]) -> list[tuple[VerdictLabel, float]]:
        self.calls.append(list(pairs))
        return super().check(pairs)


def event(answer_id: str, answer: str, question: str | None = "Why is it blocked?") -> AnswerEvent:
    return AnswerEvent(
        event_id=answer_id,
        answer_id=answer_id,
        conversation_id="c",
        tenant="t",
        assistant_id="a",
        model="m",
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        question=question,
        answer=answer,
        evidence=[
            EvidenceItem(id="D1", text="The supplier delivered 90 of 100 pieces."),
            EvidenceItem(id="D2", text="The invoice was blocked for payment."),
        ],
    )


def test_one_deduplicated_checker_call_for_the_whole_batch() -> None:
    checker = CountingChecker()
    judge = ClaimJudge(checker, granularity="sentence")
    good = event("a", "The supplier delivered 90 of 100 pieces [D1]. The invoice was blocked [D2].")
    same = event("b", good.answer)
    judgements = judge.judge_batch([good, same, event("c", "It was 80 pieces [D1].")])
    assert len(checker.calls) == 1
    pairs = checker.calls[0]
    assert len(pairs) == len(set(pairs))
    assert [j.action for j in judgements] == [Action.PASS, Action.PASS, Action.WITHHOLD]
    bad = judgements[2].claims[0]
    assert bad.verdict is VerdictLabel.CONTRADICTED and bad.citation_supported is False
    assert bad.reasons == ["NUMBER_MISMATCH: 80 not in the evidence", "CITATION_NOT_SUPPORTING"]
    assert judgements[0].claims[1].citations_needed == [True]


def test_each_claim_brings_only_its_own_citation_checks() -> None:
    checker = CountingChecker()
    answer = event("p", "The supplier delivered 90 pieces [D1]. The invoice was blocked [D2].")
    ClaimJudge(checker, granularity="sentence").judge_batch([answer])
    (pairs,) = checker.calls
    assert len(pairs) == 4  # per claim: all evidence, then its one cited note
    assert [p.premise.endswith("pieces.") for p in pairs] == [False, True, False, False]


def test_the_question_counts_as_evidence() -> None:
    judge = build_judge(JudgeSettings(name="rules", granularity="sentence"))
    answer = event("q", "Order 4711 is blocked.", question="Why is order 4711 blocked?")
    claim = judge.judge_batch([answer])[0].claims[0]
    assert claim.verdict is VerdictLabel.SUPPORTED


def test_empty_answers_and_no_pairs_do_not_break_the_batch() -> None:
    judge = build_judge(JudgeSettings(name="rules"))
    empty, abstains = judge.judge_batch(
        [event("e", ""), event("n", "I don't know.", question=None)]
    )
    assert empty.claims == [] and empty.action is Action.PASS
    assert abstains.abstained and abstains.outcome is Outcome.ABSTAINED


def test_trim_lists_the_refuted_sentences_as_written() -> None:
    judge = build_judge(JudgeSettings(name="rules", granularity="atomic"))
    answer = "The invoice was blocked [D2]. The plant manager signs a waiver [D2]."
    judgement = judge.judge_batch([event("t", answer)])[0]
    assert judgement.action is Action.TRIM
    assert judgement.trim_sentences == ["The plant manager signs a waiver [D2]."]


def test_info_and_factory() -> None:
    judge = build_judge(JudgeSettings(name="rules", granularity="sentence", coverage_threshold=0.6))
    assert judge.info.name == "rules" and judge.info.granularity == "sentence"
    assert judge.info.thresholds == {
        "coverage": 0.6,
        "language_min_confidence": 0.99,
        "language_min_letters": 40.0,
    }
    assert available_judges() == ("nli", "rules")
