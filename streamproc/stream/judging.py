"""The judging stage as plain code: raw messages in, everything to publish out.

The faust agent only moves bytes; this function (run in an executor, off the event loop)
validates, judges a whole micro-batch at once and builds the output events. No broker is
needed to test it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from streamproc.events import (
    Action,
    AnswerEvent,
    AnswerJudgement,
    DeadLetter,
    DeadLetterReason,
    Flag,
    Timings,
    Verdict,
)
from streamproc.judge import Judge
from streamproc.stream.intake import MessageOrigin, Rejection, dead_letter_for, parse_answer
from streamproc.stream.windows import AnswerOutcome

__all__ = ["IncomingMessage", "StageOutput", "judge_messages", "trace_id_from_traceparent"]

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    value: bytes | None
    origin: MessageOrigin
    trace_id: str | None = None


@dataclass(slots=True)
class StageOutput:
    verdicts: list[Verdict] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    outcomes: list[AnswerOutcome] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)


def trace_id_from_traceparent(header: str | bytes | None) -> str | None:
    """The trace id of a W3C ``traceparent`` header, or None if absent or malformed."""
    if header is None:
        return None
    text = header.decode("latin-1") if isinstance(header, bytes) else header
    match = _TRACEPARENT.match(text.strip().lower())
    if match is None or set(match.group(1)) == {"0"}:
        return None
    return match.group(1)


def judge_messages(
    messages: Sequence[IncomingMessage], judge: Judge, *, max_event_bytes: int
) -> StageOutput:
    """Validate and judge one micro-batch. Never raises: what fails becomes a dead letter."""
    output = StageOutput()
    accepted: list[tuple[AnswerEvent, IncomingMessage]] = []
    seen: set[str] = set()
    for message in messages:
        parsed = parse_answer(message.value, max_event_bytes)
        if isinstance(parsed, Rejection):
            output.dead_letters.append(dead_letter_for(parsed, message.origin, message.value))
        elif parsed.event_id not in seen:  # a producer retry inside one batch counts once
            seen.add(parsed.event_id)
            accepted.append((parsed, message))
    if not accepted:
        return output

    started = time.perf_counter()
    results = _judge_all([answer for answer, _ in accepted], judge)
    judge_ms = (time.perf_counter() - started) * 1000
    judged_at = datetime.now(UTC)
    timing_base = {"judge_ms": judge_ms, "batch_size": len(accepted)}

    for (answer, message), result in zip(accepted, results, strict=True):
        if isinstance(result, Exception):
            detail = f"judge failed: {type(result).__name__}: {result}"
            rejection = Rejection(DeadLetterReason.PROCESSING_ERROR, detail)
            output.dead_letters.append(dead_letter_for(rejection, message.origin, message.value))
            continue
        end_to_end_ms = (judged_at - answer.occurred_at).total_seconds() * 1000
        verdict = Verdict(
            event_id=answer.event_id,
            answer_id=answer.answer_id,
            conversation_id=answer.conversation_id,
            tenant=answer.tenant,
            assistant_id=answer.assistant_id,
            model=answer.model,
            occurred_at=answer.occurred_at,
            judged_at=judged_at,
            judgement=result,
            judge=judge.info,
            timings=Timings(**timing_base, end_to_end_ms=max(0.0, end_to_end_ms)),
            trace_id=message.trace_id,
        )
        output.verdicts.append(verdict)
        output.outcomes.append(_outcome(answer, result))
        if result.action is not Action.PASS:
            output.flags.append(_flag(verdict))
    return output


def _judge_all(answers: list[AnswerEvent], judge: Judge) -> list[AnswerJudgement | Exception]:
    """Judge the batch at once; if that fails, isolate the answer that breaks it."""
    try:
        return list(judge.judge_batch(answers))
    except Exception:  # noqa: BLE001 - one poison answer must not sink the batch
        results: list[AnswerJudgement | Exception] = []
        for answer in answers:
            try:
                results.append(judge.judge_batch([answer])[0])
            except Exception as exc:  # noqa: BLE001 - reported as a dead letter
                results.append(exc)
        return results


def _outcome(answer: AnswerEvent, judgement: AnswerJudgement) -> AnswerOutcome:
    return AnswerOutcome(
        event_id=answer.event_id,
        assistant_id=answer.assistant_id,
        tenant=answer.tenant,
        model=answer.model,
        occurred_at=answer.occurred_at,
        hallucinated=judgement.hallucinated,
        abstained=judgement.abstained,
        contradicted_claims=judgement.contradicted_claims,
        unsupported_claims=judgement.unsupported_claims,
        faithfulness=judgement.faithfulness,
    )


def _flag(verdict: Verdict) -> Flag:
    judgement = verdict.judgement
    # Claim reasons read "CODE: detail"; a flag carries the codes, the verdict the details.
    reasons = sorted(
        {reason.split(":", 1)[0] for claim in judgement.claims for reason in claim.reasons}
    )
    return Flag(
        event_id=verdict.event_id,
        answer_id=verdict.answer_id,
        conversation_id=verdict.conversation_id,
        tenant=verdict.tenant,
        assistant_id=verdict.assistant_id,
        model=verdict.model,
        occurred_at=verdict.occurred_at,
        action=judgement.action,
        severity=judgement.severity,
        reasons=reasons,
        trim_sentences=judgement.trim_sentences,
        faithfulness=judgement.faithfulness,
        trace_id=verdict.trace_id,
    )
