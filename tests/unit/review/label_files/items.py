"""Review items judged by the rules judge, and labels of them, for the export tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from streamproc.contracts.events import AnswerEvent, EvidenceItem
from streamproc.contracts.label_events import LabelEvent, ReviewItem, SampledBecause
from streamproc.inference.options import JudgeSettings
from streamproc.judge.protocols import Judge
from streamproc.wiring import build_judge

EVIDENCE = "The order 7 was shipped on 5 May from the Lyon warehouse. Delivery takes two days."
QUESTION = "When was order 7 shipped?"
ANSWER = "The order 7 was shipped on 3 May. Delivery takes two days."
START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


@cache
def _judge() -> Judge:
    return build_judge(JudgeSettings(name="rules", granularity="sentence"))


def review_item(answer_id: str, *, tenant: str = "acme", answer: str = ANSWER) -> ReviewItem:
    event = AnswerEvent(
        event_id=f"ev-{answer_id}",
        answer_id=answer_id,
        conversation_id=f"conv-{answer_id}",
        tenant=tenant,
        assistant_id="bot",
        model="llm-1",
        occurred_at=START,
        question=QUESTION,
        answer=answer,
        evidence=[EvidenceItem(id="D1", text=EVIDENCE)],
    )
    judge = _judge()
    judgement = judge.judge_batch([event])[0]
    flagged = judgement.hallucinated
    return ReviewItem(
        answer_id=answer_id,
        event_id=event.event_id,
        conversation_id=event.conversation_id,
        tenant=tenant,
        assistant_id="bot",
        model=event.model,
        task_type="QA",
        occurred_at=START,
        judged_at=START + timedelta(seconds=1),
        sampled_because=SampledBecause.FLAGGED if flagged else SampledBecause.RANDOM,
        inclusion_probability=1.0 if flagged else 0.02,
        question=QUESTION,
        answer=answer,
        evidence=event.evidence,
        judgement=judgement,
        judge=judge.info,
        judge_key="rules-1",
    )


def label(
    answer_id: str,
    reviewer: str,
    answer_label: str | None,
    claims: dict[int, str] | None = None,
    *,
    minutes: int = 0,
    tenant: str = "acme",
    **extra: Any,
) -> LabelEvent:
    return LabelEvent.model_validate(
        {
            "label_id": f"{answer_id}-{reviewer}-{minutes}",
            "answer_id": answer_id,
            "tenant": tenant,
            "reviewer": reviewer,
            "labelled_at": START + timedelta(days=1, minutes=minutes),
            "answer_label": answer_label,
            "claims": [{"index": i, "label": v} for i, v in (claims or {}).items()],
            **extra,
        }
    )
