"""The judging stage without a broker: validation, batching, flags, outcomes, isolation
of a failing answer."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from streamproc.config import JudgeSettings
from streamproc.events import (
    Action,
    AnswerEvent,
    AnswerJudgement,
    DeadLetterReason,
    JudgeInfo,
)
from streamproc.judge import build_judge
from streamproc.stream.intake import MessageOrigin
from streamproc.stream.judging import IncomingMessage, judge_messages, trace_id_from_traceparent


def answer(event_id: str, text: str, evidence: str) -> dict[str, object]:
    return {
        "event_id": event_id,
        "answer_id": f"ans-{event_id}",
        "conversation_id": "conv",
        "tenant": "t",
        "assistant_id": "bot",
        "model": "llm",
        "occurred_at": datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
        "question": "What happened to the order?",
        "answer": text,
        "evidence": [{"id": "D1", "text": evidence}],
    }


def message(document: object, offset: int, trace: str | None = None) -> IncomingMessage:
    raw = document if isinstance(document, bytes) else json.dumps(document).encode()
    return IncomingMessage(
        value=raw, origin=MessageOrigin("answers", 0, offset, b"conv"), trace_id=trace
    )


GOOD = answer("e1", "The order was shipped on Monday [D1].", "The order was shipped on Monday.")
BAD = answer("e2", "The order was shipped on 3 May [D1].", "The order 7 was shipped on 5 May.")


def test_one_batch_gives_verdicts_flags_outcomes_and_dead_letters() -> None:
    judge = build_judge(JudgeSettings(name="rules"))
    output = judge_messages(
        [message(GOOD, 0, "abc"), message(b"{oops", 1), message(BAD, 2)],
        judge,
        max_event_bytes=100_000,
    )
    assert [v.event_id for v in output.verdicts] == ["e1", "e2"]
    good, bad = output.verdicts
    assert good.judgement.action is Action.PASS and not good.judgement.hallucinated
    assert bad.judgement.hallucinated and bad.judgement.action is not Action.PASS
    assert [f.event_id for f in output.flags] == ["e2"]
    assert [o.event_id for o in output.outcomes] == ["e1", "e2"]
    assert output.outcomes[1].hallucinated
    assert good.trace_id == "abc" and good.timings.batch_size == 2
    assert good.judge == judge.info
    [letter] = output.dead_letters
    assert letter.reason is DeadLetterReason.BAD_JSON and letter.offset == 1


def test_duplicate_event_in_one_batch_is_judged_once() -> None:
    output = judge_messages(
        [message(GOOD, 0), message(GOOD, 1)],
        build_judge(JudgeSettings(name="rules")),
        max_event_bytes=10**6,
    )
    assert len(output.verdicts) == 1


class _BreaksOn:
    """A judge that fails on one answer, to prove the rest of the batch survives."""

    info = JudgeInfo(name="breaks", version="0", granularity="sentence")

    def __init__(self, poison: str) -> None:
        self._poison = poison
        self._inner = build_judge(JudgeSettings(name="rules"))

    def judge_batch(self, answers: Sequence[AnswerEvent]) -> list[AnswerJudgement]:
        if any(a.event_id == self._poison for a in answers):
            raise RuntimeError("model exploded")
        return self._inner.judge_batch(answers)


def test_a_failing_answer_becomes_a_dead_letter_and_the_rest_is_judged() -> None:
    output = judge_messages(
        [message(GOOD, 0), message(BAD, 1)], _BreaksOn("e2"), max_event_bytes=10**6
    )
    assert [v.event_id for v in output.verdicts] == ["e1"]
    [letter] = output.dead_letters
    assert letter.reason is DeadLetterReason.PROCESSING_ERROR
    assert "model exploded" in letter.error and letter.offset == 1


def test_traceparent_parsing() -> None:
    header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert trace_id_from_traceparent(header) == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace_id_from_traceparent(header.encode()) == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace_id_from_traceparent("garbage") is None
    assert trace_id_from_traceparent(None) is None
    assert trace_id_from_traceparent("00-" + "0" * 32 + "-00f067aa0ba902b7-01") is None
