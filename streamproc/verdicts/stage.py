"""The judging stage as plain code: raw messages in, every record to publish out.

The consumer loop only moves bytes: it runs :func:`judge_messages` in an executor (off the
event loop) and sends the returned records - already serialised, keyed, sized and
addressed by their output topics (:mod:`~streamproc.verdicts.catalog`), with each
message's trace headers - in one transaction with the input offsets. So nothing after
this stage may fail for one message: every message is isolated here. Whatever goes wrong
while parsing, judging, serialising or keying one message - a judge bug, a lone surrogate
in a claim, an answer that overruns its deadline, a verdict too large for its topic -
turns that message into one dead letter (reason and original bytes) and the rest of the
batch goes on. No broker is needed to test it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache

from streamproc.contracts.audit_record import AuditRecord, build_audit_record
from streamproc.contracts.events import (
    Action,
    AnswerEvent,
    AnswerJudgement,
    AnswerOutcome,
    DeadLetter,
    DeadLetterReason,
    Flag,
    JudgeInfo,
    Timings,
    Verdict,
)
from streamproc.contracts.label_events import ReviewItem
from streamproc.contracts.topic_names import TopicNames
from streamproc.judge import Judge
from streamproc.judge.deadline import AnswerTimedOut
from streamproc.judge.stage_times import StageTime, collecting
from streamproc.verdicts.catalog import OutputTopics
from streamproc.verdicts.dead_letter import MessageOrigin, Rejection, prepare_dead_letter
from streamproc.verdicts.fit import TooLarge
from streamproc.verdicts.intake import parse_answer
from streamproc.verdicts.options import TopicSettings, WorkerSettings
from streamproc.verdicts.output_topic import OutHeaders
from streamproc.verdicts.record import OutboundRecord
from streamproc.verdicts.review_sampling import ReviewSampling
from streamproc.verdicts.task_type import task_type_of

__all__ = [
    "IncomingMessage",
    "JudgedAnswer",
    "StageLimits",
    "StageOutput",
    "judge_answers",
    "judge_messages",
    "outputs_for",
    "trace_id_from_traceparent",
    "verdict_for",
]

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")
_MAX_ERROR_CHARS = 2000


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    value: bytes | None
    origin: MessageOrigin
    trace_id: str | None = None
    headers: OutHeaders = ()
    """What every record written for this message carries (its ``traceparent``)."""
    notes: tuple[str, ...] = ()
    """Added to its verdict's ``judgement.limits`` (e.g. a trace-context field dropped)."""


@dataclass(frozen=True, slots=True)
class StageLimits:
    """Every bound the stage enforces on its inputs and the judge (output sizes are the
    output topics' own). The defaults bound only the event's size; a worker takes all of
    them from its settings (:func:`streamproc.wiring.stage_limits`)."""

    max_event_bytes: int = WorkerSettings.model_fields["max_event_bytes"].default
    judge_deadline_s: float | None = None
    """Per answer; None: no deadline."""
    event_time_max_future_s: float | None = None
    """How far ``occurred_at`` may lie ahead of the clock; None: unchecked."""
    event_time_max_past_s: float | None = None
    """How far ``occurred_at`` may lie behind the clock; None: unchecked."""
    audit_settings: Mapping[str, object] | None = None
    """The settings that shape a verdict (``verdicts.options.applied_settings``), written into
    every answer's audit record; None: no audit records."""
    review: ReviewSampling | None = None
    """Which answers go to the review queue; None: none."""


@dataclass(slots=True)
class StageOutput:
    """``records`` is what to send, the records of one input message next to each other
    in input order, each with its message's headers. The typed lists hold the same
    outputs as models, as published (a verdict possibly trimmed), for metrics, traces
    and logs."""

    records: list[OutboundRecord] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    verdict_origins: list[MessageOrigin] = field(default_factory=list)
    """Parallel to ``verdicts``: the message each judged (whose span it goes on; a dead
    letter names its message itself)."""
    flags: list[Flag] = field(default_factory=list)
    outcomes: list[AnswerOutcome] = field(default_factory=list)
    review_items: list[ReviewItem] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    stage_times: list[StageTime] = field(default_factory=list)
    """The judge's own stages for this batch (claims, retrieval, nli, decide...), for
    trace spans."""
    repeats: list[MessageOrigin] = field(default_factory=list)
    """Messages repeating a (tenant, ``event_id``) already in this batch (a producer
    retry), or, added by the judging loop, one judged within ``worker.dedup_horizon_s``:
    the first copy is judged, the repeat is logged, counted and acknowledged with it."""


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
    messages: Sequence[IncomingMessage],
    judge: Judge,
    *,
    limits: StageLimits | None = None,
    topics: OutputTopics | None = None,
    now: datetime | None = None,
) -> StageOutput:
    """Validate, judge and serialise one micro-batch. Never raises: what fails for one
    message becomes that message's dead letter.

    ``topics``: where the records go (default: the default settings' topics). ``now`` is
    the clock for event-time bounds and for the ``judged_at`` / ``received_at`` stamps
    (default: the wall clock, read before and after judging)."""
    limits = limits or StageLimits()
    topics = topics or _default_topics()
    received_at = now or datetime.now(UTC)

    # Per message: the index of its answer in ``accepted``, a rejection, or None for a
    # repeat of a (tenant, event_id) already in this batch (a producer retry counts once).
    slots: list[int | Rejection | None] = []
    accepted: list[AnswerEvent] = []
    seen: set[tuple[str, str]] = set()  # (tenant, event_id): ids are each tenant's own
    repeats: list[MessageOrigin] = []
    for message in messages:
        parsed = _parse(message, limits, received_at)
        if isinstance(parsed, Rejection):
            slots.append(parsed)
        elif (parsed.tenant, parsed.event_id) in seen:
            slots.append(None)
            repeats.append(message.origin)
        else:
            seen.add((parsed.tenant, parsed.event_id))
            slots.append(len(accepted))
            accepted.append(parsed)

    started = time.perf_counter()
    with collecting() as stage_times:
        judged = judge_answers(accepted, judge, limits.judge_deadline_s) if accepted else []
    judge_ms = (time.perf_counter() - started) * 1000
    results: list[JudgedAnswer | Rejection | None] = []
    for slot in slots:
        if slot is None or isinstance(slot, Rejection):
            results.append(slot)
        else:
            result = judged[slot]
            results.append(
                result if isinstance(result, Rejection) else JudgedAnswer(accepted[slot], result)
            )
    output = outputs_for(
        messages,
        results,
        judge_info=_judge_info(judge),
        judge_ms=judge_ms,
        batch_size=len(accepted),
        limits=limits,
        topics=topics,
        judged_at=now or datetime.now(UTC),
        received_at=received_at,
    )
    output.repeats = repeats
    output.stage_times = stage_times
    return output


@dataclass(frozen=True, slots=True)
class JudgedAnswer:
    """One message's answer as parsed and its judgement, made here or elsewhere."""

    answer: AnswerEvent
    judgement: AnswerJudgement


def outputs_for(
    messages: Sequence[IncomingMessage],
    results: Sequence[JudgedAnswer | Rejection | None],
    *,
    judge_info: JudgeInfo | Exception,
    judge_ms: float,
    batch_size: int,
    limits: StageLimits | None = None,
    topics: OutputTopics | None = None,
    judged_at: datetime | None = None,
    received_at: datetime | None = None,
) -> StageOutput:
    """The records of judgements already made - by :func:`judge_messages`, or by a caller
    that judged (or settled, or shed) the answers itself, such as the inline gate, which
    must publish exactly the judgement it answered with. ``results`` is parallel to
    ``messages``: a judged answer, a rejection (its dead letter), or None (a repeat: no
    records). Never raises for one message: what fails to build becomes its dead letter.

    ``judge_info``: the judge's identity (an exception when it could not be read: every
    judged message is then dead-lettered). ``judged_at`` stamps the verdicts, and
    ``received_at`` the dead letters (both default to the wall clock)."""
    limits = limits or StageLimits()
    topics = topics or _default_topics()
    context = _JudgedContext(
        judge=judge_info,
        judged_at=judged_at or datetime.now(UTC),
        judge_ms=judge_ms,
        batch_size=batch_size,
    )
    received = received_at or context.judged_at
    output = StageOutput()
    for message, result in zip(messages, results, strict=True):
        _add_outputs(output, message, result, context, limits, topics, received)
    return output


@cache
def _default_topics() -> OutputTopics:
    return OutputTopics.named(
        TopicNames(), TopicSettings.model_fields["output_max_message_bytes"].default
    )


def _add_outputs(
    output: StageOutput,
    message: IncomingMessage,
    result: JudgedAnswer | Rejection | None,
    context: _JudgedContext,
    limits: StageLimits,
    topics: OutputTopics,
    received_at: datetime,
) -> None:
    """The records of one message: its outputs, its dead letter, or none (a repeat)."""
    if result is None:
        return
    if isinstance(result, Rejection):
        rejection = result
    else:
        built = _build_isolated(result.answer, result.judgement, message, context, limits, topics)
        if isinstance(built, _Built):
            built.add_to(output, message.origin)
            return
        rejection = built
    letter = prepare_dead_letter(
        topics.dead_letters,
        rejection,
        message.origin,
        message.value,
        headers=message.headers,
        now=received_at,
    )
    output.records.append(letter.record)
    output.dead_letters.append(letter.model)


def _parse(message: IncomingMessage, limits: StageLimits, now: datetime) -> AnswerEvent | Rejection:
    try:
        return parse_answer(
            message.value,
            limits.max_event_bytes,
            now=now,
            max_future_s=limits.event_time_max_future_s,
            max_past_s=limits.event_time_max_past_s,
        )
    except Exception as exc:  # noqa: BLE001 - parse_answer should not raise; if it does, isolate
        return Rejection(DeadLetterReason.PROCESSING_ERROR, f"cannot parse: {_describe(exc)}")


# --- judging, with a deadline per answer -------------------------------------------------


def judge_answers(
    answers: Sequence[AnswerEvent], judge: Judge, deadline_s: float | None
) -> list[AnswerJudgement | Rejection]:
    """Judge the batch at once. An answer that overruns its deadline is set aside
    (``judge_timeout``) and the batch judged again without it; each round removes one
    answer, so this ends. Any other failure falls back to one answer at a time, so only
    the answer that breaks the judge is lost."""
    results: list[AnswerJudgement | Rejection | None] = [None] * len(answers)
    pending = list(range(len(answers)))
    while pending:
        try:
            judged = list(judge.judge_batch([answers[i] for i in pending], deadline_s=deadline_s))
            if len(judged) != len(pending):
                raise RuntimeError(f"{len(judged)} judgements for {len(pending)} answers")
        except AnswerTimedOut as exc:
            if 0 <= exc.index < len(pending):
                results[pending.pop(exc.index)] = _timed_out(exc)
                continue
            _judge_one_by_one(answers, pending, judge, deadline_s, results)
            break
        except Exception:  # noqa: BLE001 - one poison answer must not sink the batch
            _judge_one_by_one(answers, pending, judge, deadline_s, results)
            break
        for index, judgement in zip(pending, judged, strict=True):
            results[index] = judgement
        break
    return [
        Rejection(DeadLetterReason.PROCESSING_ERROR, "judge returned nothing")
        if result is None
        else result
        for result in results
    ]


def _judge_one_by_one(
    answers: Sequence[AnswerEvent],
    pending: list[int],
    judge: Judge,
    deadline_s: float | None,
    results: list[AnswerJudgement | Rejection | None],
) -> None:
    for index in pending:
        try:
            results[index] = judge.judge_batch([answers[index]], deadline_s=deadline_s)[0]
        except AnswerTimedOut as exc:
            results[index] = _timed_out(exc)
        except Exception as exc:  # noqa: BLE001 - reported as a dead letter
            results[index] = Rejection(
                DeadLetterReason.PROCESSING_ERROR, f"judge failed: {_describe(exc)}"
            )


def _timed_out(exc: AnswerTimedOut) -> Rejection:
    return Rejection(
        DeadLetterReason.JUDGE_TIMEOUT,
        f"judge gave up on the answer after {exc.elapsed_s:.2f} s, over its "
        f"{exc.budget_s:g} s budget per answer",
    )


def _judge_info(judge: Judge) -> JudgeInfo | Exception:
    try:
        return judge.info
    except Exception as exc:  # noqa: BLE001 - surfaces per message, as a dead letter
        return exc


# --- building the records of one judged answer -------------------------------------------


@dataclass(frozen=True, slots=True)
class _JudgedContext:
    judge: JudgeInfo | Exception
    judged_at: datetime
    judge_ms: float
    batch_size: int


@dataclass(slots=True)
class _Built:
    """All records of one judged message; added to the output only once all are built."""

    records: list[OutboundRecord]
    verdict: Verdict
    flag: Flag | None
    outcome: AnswerOutcome
    review_item: ReviewItem | None = None

    def add_to(self, output: StageOutput, origin: MessageOrigin) -> None:
        output.records.extend(self.records)
        output.verdicts.append(self.verdict)
        output.verdict_origins.append(origin)
        if self.flag is not None:
            output.flags.append(self.flag)
        output.outcomes.append(self.outcome)
        if self.review_item is not None:
            output.review_items.append(self.review_item)


def _build_isolated(
    answer: AnswerEvent,
    judgement: AnswerJudgement,
    message: IncomingMessage,
    context: _JudgedContext,
    limits: StageLimits,
    topics: OutputTopics,
) -> _Built | Rejection:
    """:func:`_build`, with whatever it raises (an unencodable claim, a key the record
    cannot carry) as the message's rejection."""
    try:
        return _build(answer, judgement, message, context, limits, topics)
    except Exception as exc:  # noqa: BLE001 - one message's failure is its dead letter
        return Rejection(
            DeadLetterReason.PROCESSING_ERROR, f"cannot build outputs: {_describe(exc)}"
        )


def _build(
    answer: AnswerEvent,
    judgement: AnswerJudgement,
    message: IncomingMessage,
    context: _JudgedContext,
    limits: StageLimits,
    topics: OutputTopics,
) -> _Built | Rejection:
    if isinstance(context.judge, Exception):
        raise context.judge
    if message.notes:
        judgement = judgement.model_copy(update={"limits": [*judgement.limits, *message.notes]})
    verdict = verdict_for(
        answer,
        judgement,
        judge_info=context.judge,
        judged_at=context.judged_at,
        judge_ms=context.judge_ms,
        batch_size=context.batch_size,
        trace_id=message.trace_id,
    )
    headers = message.headers
    published = topics.verdicts.prepare(verdict, headers=headers)
    if isinstance(published, TooLarge):
        return Rejection(DeadLetterReason.OUTPUT_TOO_LARGE, published.detail)
    records = [published.record]
    flag = None
    if judgement.action is not Action.PASS:
        flag = _flag(verdict)  # from the whole verdict: its reasons cover every claim
        flag_record = topics.flags.prepare(flag, headers=headers)
        if isinstance(flag_record, TooLarge):
            return Rejection(DeadLetterReason.OUTPUT_TOO_LARGE, flag_record.detail)
        records.append(flag_record.record)
    outcome = _outcome(answer, judgement, context.judge_ms)
    outcome_record = topics.outcomes.prepare(outcome, headers=headers)
    if isinstance(outcome_record, TooLarge):
        return Rejection(DeadLetterReason.OUTPUT_TOO_LARGE, outcome_record.detail)
    records.append(outcome_record.record)
    if limits.audit_settings is not None:
        # The whole verdict, not the one trimmed for its topic.
        audit_record = topics.audit.prepare(_audit(message, verdict, limits), headers=headers)
        if isinstance(audit_record, TooLarge):
            return Rejection(DeadLetterReason.OUTPUT_TOO_LARGE, audit_record.detail)
        records.append(audit_record.record)
    review_item = None
    if limits.review is not None:
        # The whole verdict, so the reviewer sees every claim. An item too large for its
        # topic is left out: the answer is still monitored, just not offered for review.
        item = limits.review.item(answer, verdict, outcome.task_type)
        prepared = None if item is None else topics.review_items.prepare(item, headers=headers)
        if prepared is not None and not isinstance(prepared, TooLarge):
            records.append(prepared.record)
            review_item = prepared.model
    return _Built(records, published.model, flag, outcome, review_item)


def verdict_for(
    answer: AnswerEvent,
    judgement: AnswerJudgement,
    *,
    judge_info: JudgeInfo,
    judged_at: datetime,
    judge_ms: float,
    batch_size: int,
    trace_id: str | None,
) -> Verdict:
    """The verdict event of one judged answer, whole (before any trim for its topic)."""
    end_to_end_ms = (judged_at - answer.occurred_at).total_seconds() * 1000
    return Verdict(
        event_id=answer.event_id,
        answer_id=answer.answer_id,
        conversation_id=answer.conversation_id,
        tenant=answer.tenant,
        assistant_id=answer.assistant_id,
        model=answer.model,
        occurred_at=answer.occurred_at,
        judged_at=judged_at,
        judgement=judgement,
        judge=judge_info,
        timings=Timings(
            judge_ms=judge_ms,
            batch_size=batch_size,
            end_to_end_ms=max(0.0, end_to_end_ms),
        ),
        trace_id=trace_id,
    )


def _audit(message: IncomingMessage, verdict: Verdict, limits: StageLimits) -> AuditRecord:
    """The answer's audit record: the event exactly as received and the verdict, with the
    settings that applied."""
    origin = message.origin
    return build_audit_record(
        message.value or b"",
        verdict,
        origin_topic=origin.topic,
        origin_partition=origin.partition,
        origin_offset=origin.offset,
        settings_applied=limits.audit_settings or {},
        trace_id=message.trace_id,
    )


def _outcome(answer: AnswerEvent, judgement: AnswerJudgement, judge_ms: float) -> AnswerOutcome:
    return AnswerOutcome(
        event_id=answer.event_id,
        answer_id=answer.answer_id,
        assistant_id=answer.assistant_id,
        tenant=answer.tenant,
        model=answer.model,
        occurred_at=answer.occurred_at,
        hallucinated=judgement.hallucinated,
        abstained=judgement.abstained,
        contradicted_claims=judgement.contradicted_claims,
        unsupported_claims=judgement.unsupported_claims,
        faithfulness=judgement.faithfulness,
        judge_ms=judge_ms,
        verified=judgement.verified,
        task_type=task_type_of(answer, judgement),
    )


def _flag(verdict: Verdict) -> Flag:
    judgement = verdict.judgement
    # A flag carries the reasons' codes, the verdict their details.
    reasons = sorted({reason.code for claim in judgement.claims for reason in claim.reasons})
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


# --- wording ------------------------------------------------------------------------------


def _describe(exc: BaseException) -> str:
    """``Type: message``, even when the exception's own ``str`` fails."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not lose the dead letter
        text = "<unprintable>"
    return f"{type(exc).__name__}: {text}"[:_MAX_ERROR_CHARS]
