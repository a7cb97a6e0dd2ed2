"""Review items as the judging stage makes them: answers judged by the rules judge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache

from streamproc.contracts.events import AnswerEvent, EvidenceItem
from streamproc.contracts.label_events import ReviewItem, SampledBecause
from streamproc.inference.options import JudgeSettings
from streamproc.judge.protocols import Judge
from streamproc.wiring import build_judge

EVIDENCE = (
    "Orders are packed daily. The order 7 was shipped on 5 May from the Lyon warehouse. "
    "Delivery takes two days."
)
QUESTION = "When was order 7 shipped?"
ANSWER = "The order 7 was shipped on 3 May from Lyon [D1]. It will arrive by Friday."
START = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


@cache
def _judge() -> Judge:
    return build_judge(JudgeSettings(name="rules"))


def review_item(
    answer_id: str,
    *,
    tenant: str = "acme",
    answer: str = ANSWER,
    evidence: tuple[EvidenceItem, ...] = (EvidenceItem(id="D1", text=EVIDENCE),),
    question: str | None = QUESTION,
    minutes: int = 0,
    assistant_id: str = "bot",
) -> ReviewItem:
    """``answer`` judged against ``evidence``; judged ``minutes`` after START."""
    event = AnswerEvent(
        event_id=f"ev-{answer_id}",
        answer_id=answer_id,
        conversation_id=f"conv-{answer_id}",
        tenant=tenant,
        assistant_id=assistant_id,
        model="llm-1",
        occurred_at=START + timedelta(minutes=minutes),
        question=question,
        answer=answer,
        evidence=list(evidence),
    )
    judge = _judge()
    judgement = judge.judge_batch([event])[0]
    flagged = judgement.action.value != "pass"
    return ReviewItem(
        answer_id=answer_id,
        event_id=event.event_id,
        conversation_id=event.conversation_id,
        tenant=tenant,
        assistant_id=assistant_id,
        model=event.model,
        task_type="QA",
        occurred_at=event.occurred_at,
        judged_at=event.occurred_at + timedelta(seconds=1),
        sampled_because=SampledBecause.FLAGGED if flagged else SampledBecause.RANDOM,
        inclusion_probability=1.0 if flagged else 0.02,
        question=question,
        answer=answer,
        evidence=list(evidence),
        judgement=judgement,
        judge=judge.info,
        judge_key="rules-1",
    )
