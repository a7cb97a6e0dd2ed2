"""Traces of the judging consumer, built from Kafka headers.

The consumer reads records itself (aiokafka's ``getmany``), so no instrumentation sees
them: each message's W3C context is extracted from its headers and the answer's context
injected into every record written for it (:mod:`streamproc.telemetry.trace_headers`).

One micro-batch gives, following the messaging conventions for batch consumers:

- a ``process <topic>`` span (kind CONSUMER, a new root) with a *link* to every message's
  creation context and the batch's messaging attributes;
- per message a ``groundedness.check`` span, the CHILD of that message's ``traceparent``
  (a new root when it is absent or malformed), linked back to the batch span. It is
  started when the batch is read, so its trace id is known before judging (the verdict
  carries it) and its context is injected into the records written for the message; the
  verdict's facts are set on it once judged;
- stage spans (``groundedness.<stage>``) made after the fact from the times a
  :class:`StageClock` measured, under the batch span and, with ``stage_spans``, under
  every answer span. The judge runs a whole batch in one call: its own stages (claims,
  retrieval, nli, decide) come back as the batch's stage times, beside the ones the
  caller measures around it (e.g. ``judge``, ``publish``), so an answer's stage spans
  show its batch's times;
- per judged answer one ``gen_ai.evaluation.result`` log record, and one per checked
  claim, through the Logs API with the answer span's trace and span ids
  (:mod:`streamproc.telemetry.evaluation_log`), once the batch is published.

With telemetry off nothing is started or recorded and no propagator runs: each message's
valid ``traceparent`` (with ``tracestate`` and ``baggage``) is handed on to its records as
it came, so downstream consumers still continue the producer's trace. Either way a field
beyond W3C's limits is dropped first; :attr:`MessageTrace.dropped` says which.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from streamproc.contracts.events import Verdict
from streamproc.telemetry import semconv
from streamproc.telemetry.evaluation_log import evaluation_records
from streamproc.telemetry.log_context import bound_answer
from streamproc.telemetry.otel import Telemetry
from streamproc.telemetry.trace_headers import (
    DroppedField,
    Headers,
    OutHeaders,
    extract,
    inject,
    read_trace_context,
    traceparent_headers,
)

__all__ = [
    "BatchTrace",
    "MessageRef",
    "MessageTrace",
    "StageClock",
    "StageTiming",
    "Tracing",
    "verdict_attributes",
]


# --- messages and stage times -------------------------------------------------------------


_EMPTY = Context()


class _Located(Protocol):
    """Anything that names a record: MessageRef, intake's MessageOrigin, a DeadLetter."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...


class _KafkaRecord(_Located, Protocol):
    @property
    def key(self) -> bytes | None: ...

    @property
    def headers(self) -> Headers: ...


@dataclass(frozen=True, slots=True)
class MessageRef:
    """What tracing needs of one consumed record (no payload)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None = None
    headers: Headers = ()

    @classmethod
    def from_record(cls, record: _KafkaRecord) -> MessageRef:
        """From an aiokafka ``ConsumerRecord`` (or anything shaped like one)."""
        return cls(record.topic, record.partition, record.offset, record.key, record.headers)


@dataclass(frozen=True, slots=True)
class StageTiming:
    name: str
    start_ns: int
    """Wall clock, ns since the epoch (``time.time_ns``), as spans want."""
    end_ns: int


class StageClock:
    """Start and end times of named stages, measured where the work runs (in the event
    loop or inside the executor thread) and turned into spans later. Appending is
    thread-safe; costs two clock reads per stage."""

    def __init__(self) -> None:
        self._stages: list[StageTiming] = []

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the body as stage ``name`` (recorded even if it raises)."""
        start = time.time_ns()
        try:
            yield
        finally:
            self.record(name, start, time.time_ns())

    def record(self, name: str, start_ns: int, end_ns: int) -> None:
        self._stages.append(StageTiming(name, start_ns, max(start_ns, end_ns)))

    @property
    def stages(self) -> tuple[StageTiming, ...]:
        return tuple(self._stages)


# --- one batch ----------------------------------------------------------------------------


class Tracing:
    """Tracing of one consumer loop: its telemetry and consumer group."""

    def __init__(self, telemetry: Telemetry, *, group: str, claim_records: bool = True) -> None:
        self.telemetry = telemetry
        self.group = group
        self.claim_records = claim_records
        """Emit a ``gen_ai.evaluation.result`` per checked claim, not only per answer."""

    def start_batch(
        self, messages: Sequence[MessageRef], *, start_ns: int | None = None
    ) -> BatchTrace:
        """Start the batch span and one span per message (``start_ns``: when the batch was
        read; default now)."""
        return BatchTrace(self, messages, start_ns if start_ns is not None else time.time_ns())


class MessageTrace:
    """One message's span and what the records written for it carry."""

    __slots__ = ("_headers", "_ids", "context", "dropped", "message", "span", "verdict")

    def __init__(
        self,
        message: MessageRef,
        span: Span,
        context: Context,
        dropped: tuple[DroppedField, ...] = (),
    ) -> None:
        self.message = message
        self.span = span
        self.context = context
        """The span's context (with the producer's baggage): parent of stage spans."""
        self.dropped = dropped
        """Trace-context fields of the message left out for breaking W3C's limits."""
        self.verdict: Verdict | None = None
        self._headers: OutHeaders | None = None
        self._ids: tuple[str, str] | None = None

    @classmethod
    def passthrough(cls, message: MessageRef) -> MessageTrace:
        """Telemetry off: no span, no propagator; the producer's valid ``traceparent``
        (with its ``tracestate`` and ``baggage`` where they keep W3C's limits) is handed
        on as it came, so tracing off costs a header scan and a few regular expressions
        per message."""
        bounded = read_trace_context(message.headers)
        traced = cls(message, trace.INVALID_SPAN, _EMPTY, bounded.dropped)
        traced._ids, traced._headers = bounded.ids, bounded.handed_on
        return traced

    @property
    def notes(self) -> tuple[str, ...]:
        """``TRACE_CONTEXT_DROPPED`` notes for the verdict's ``judgement.limits``."""
        return tuple(dropped.note for dropped in self.dropped)

    @property
    def headers(self) -> OutHeaders:
        """``traceparent`` (and ``tracestate``, ``baggage``) for every record written for
        this message: ``OutboundRecord(..., headers=traced.headers)``."""
        if self._headers is None:
            self._headers = inject(self.context)
        return self._headers

    @property
    def trace_id(self) -> str | None:
        """The trace id as 32 hex digits (what ``Verdict.trace_id`` holds); None when
        there is none (telemetry off and no valid ``traceparent``)."""
        ids = self._span_ids()
        return ids[0] if ids is not None else None

    def log_fields(self) -> dict[str, str | int]:
        """trace_id, span_id, partition, offset (and answer_id once judged) for
        ``log_context.bound_answer(**fields)``. With telemetry off the span id is the
        producer's."""
        fields: dict[str, str | int] = {
            "partition": self.message.partition,
            "offset": self.message.offset,
        }
        ids = self._span_ids()
        if ids is not None:
            fields["trace_id"], fields["span_id"] = ids
        if self.verdict is not None:
            fields["answer_id"] = self.verdict.answer_id
        return fields

    def bound(self) -> AbstractContextManager[None]:
        """Bind :meth:`log_fields` to every line logged inside the block."""
        ids = self._span_ids()
        return bound_answer(
            answer_id=self.verdict.answer_id if self.verdict is not None else None,
            trace_id=ids[0] if ids is not None else None,
            span_id=ids[1] if ids is not None else None,
            partition=self.message.partition,
            offset=self.message.offset,
        )

    def _span_ids(self) -> tuple[str, str] | None:
        if self._ids is None:
            span_context = self.span.get_span_context()
            if span_context.is_valid:
                self._ids = (
                    trace.format_trace_id(span_context.trace_id),
                    trace.format_span_id(span_context.span_id),
                )
        return self._ids


class BatchTrace:
    """The spans of one micro-batch; see the module doc for the shape. Use as a context
    manager (ended on exit, marked failed if the body raises) or call :meth:`end`."""

    def __init__(self, tracing: Tracing, messages: Sequence[MessageRef], start_ns: int) -> None:
        self._tracing = tracing
        self._tracer = tracing.telemetry.tracer
        self._enabled = tracing.telemetry.enabled
        self.clock = StageClock()
        self._ended = False
        self._order: list[MessageTrace] = []
        if self._enabled:
            self.span = self._start_spans(messages, start_ns)
        else:
            self.span = trace.INVALID_SPAN
            self._order = [MessageTrace.passthrough(message) for message in messages]
        self._messages = {
            (traced.message.topic, traced.message.partition, traced.message.offset): traced
            for traced in self._order
        }

    def _start_spans(self, messages: Sequence[MessageRef], start_ns: int) -> Span:
        bounded = [read_trace_context(message.headers) for message in messages]
        parents = [
            extract(message.headers, read) for message, read in zip(messages, bounded, strict=True)
        ]
        batch_span = self._tracer.start_span(
            _batch_span_name(messages),
            context=Context(),
            kind=SpanKind.CONSUMER,
            attributes=_batch_attributes(messages, self._tracing.group),
            links=_links(messages, parents),
            start_time=start_ns,
        )
        batch_link = [Link(batch_span.get_span_context())]
        for message, parent, read in zip(messages, parents, bounded, strict=True):
            span = self._tracer.start_span(
                semconv.ANSWER_SPAN,
                context=parent,
                kind=SpanKind.CONSUMER,
                attributes=_message_attributes(message, self._tracing.group),
                links=batch_link,
                start_time=start_ns,
            )
            context = trace.set_span_in_context(span, parent)
            self._order.append(MessageTrace(message, span, context, read.dropped))
        return batch_span

    def __enter__(self) -> BatchTrace:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.end(error=exc)

    @property
    def messages(self) -> tuple[MessageTrace, ...]:
        """In the order given to :meth:`Tracing.start_batch`."""
        return tuple(self._order)

    @property
    def headers(self) -> OutHeaders:
        """The batch span's context, for a record tied to no message (an unreadable
        record's dead letter)."""
        return traceparent_headers(self.span) if self._enabled else ()

    def message(self, origin: _Located) -> MessageTrace:
        """The trace of the message at ``origin`` (topic, partition, offset). KeyError if
        it is not in this batch."""
        return self._messages[(origin.topic, origin.partition, origin.offset)]

    def verdict(self, origin: _Located, verdict: Verdict) -> MessageTrace:
        """Record the verdict on its message's span; its evaluation records are emitted
        when the batch ends without error."""
        traced = self.message(origin)
        traced.verdict = verdict
        if traced.span.is_recording():
            traced.span.set_attributes(verdict_attributes(verdict))
        return traced

    def dead_letter(self, origin: _Located, reason: str) -> MessageTrace:
        """Mark the message's span failed with the dead letter's reason code (never the
        error text, which may quote the event)."""
        traced = self.message(origin)
        if traced.span.is_recording():
            traced.span.set_attribute(semconv.ERROR_TYPE, reason)
            traced.span.set_status(Status(StatusCode.ERROR, reason))
        return traced

    def end(self, *, error: BaseException | None = None, end_ns: int | None = None) -> None:
        """End every span (stage spans first), then, unless ``error`` (the batch was not
        published and will be judged again), emit the evaluation records. Idempotent."""
        if self._ended:
            return
        self._ended = True
        if not self._enabled:
            return
        end_ns = end_ns if end_ns is not None else time.time_ns()
        stages = self.clock.stages
        per_answer = self._tracing.telemetry.stage_spans
        logger = self._tracing.telemetry.logger
        for traced in self._order:
            if traced.span.is_recording():
                if per_answer:
                    self._stage_spans(stages, traced.context)
                if error is not None:
                    _fail(traced.span, error)
            traced.span.end(end_time=end_ns)
            if error is None and traced.verdict is not None:
                evaluation_records(
                    logger,
                    traced.verdict,
                    traced.span.get_span_context(),
                    claims=self._tracing.claim_records,
                    timestamp_ns=end_ns,
                )
        if self.span.is_recording():
            self._stage_spans(stages, trace.set_span_in_context(self.span))
            if error is not None:
                _fail(self.span, error)
        self.span.end(end_time=end_ns)

    def _stage_spans(self, stages: Sequence[StageTiming], parent: Context) -> None:
        for stage in stages:
            self._tracer.start_span(
                semconv.STAGE_SPAN_PREFIX + stage.name,
                context=parent,
                start_time=stage.start_ns,
            ).end(end_time=stage.end_ns)


def _fail(span: Span, error: BaseException) -> None:
    span.set_attribute(semconv.ERROR_TYPE, type(error).__qualname__)
    span.set_status(Status(StatusCode.ERROR, type(error).__qualname__))


# --- attributes ---------------------------------------------------------------------------


def _batch_span_name(messages: Sequence[MessageRef]) -> str:
    topics = {message.topic for message in messages}
    return (
        f"{semconv.BATCH_OPERATION} {topics.pop()}" if len(topics) == 1 else semconv.BATCH_OPERATION
    )


def _batch_attributes(messages: Sequence[MessageRef], group: str) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        semconv.MESSAGING_SYSTEM: semconv.MESSAGING_SYSTEM_KAFKA,
        semconv.MESSAGING_OPERATION_TYPE: semconv.OPERATION_PROCESS,
        semconv.MESSAGING_OPERATION_NAME: semconv.OPERATION_PROCESS,
        semconv.MESSAGING_CONSUMER_GROUP_NAME: group,
        semconv.MESSAGING_BATCH_MESSAGE_COUNT: len(messages),
    }
    topics = {message.topic for message in messages}
    if len(topics) == 1:
        attributes[semconv.MESSAGING_DESTINATION_NAME] = next(iter(topics))
    partitions = {message.partition for message in messages}
    if len(partitions) == 1:
        attributes[semconv.MESSAGING_DESTINATION_PARTITION_ID] = str(next(iter(partitions)))
    return attributes


def _links(messages: Sequence[MessageRef], parents: Sequence[Context]) -> list[Link]:
    """A link to each message's creation context that has one, saying which record it
    is (a message without a valid ``traceparent`` has nothing to link to)."""
    links: list[Link] = []
    for message, parent in zip(messages, parents, strict=True):
        span_context = trace.get_current_span(parent).get_span_context()
        if span_context.is_valid:
            links.append(
                Link(
                    span_context,
                    {
                        semconv.MESSAGING_DESTINATION_NAME: message.topic,
                        semconv.MESSAGING_DESTINATION_PARTITION_ID: str(message.partition),
                        semconv.MESSAGING_KAFKA_OFFSET: message.offset,
                    },
                )
            )
    return links


def _message_attributes(message: MessageRef, group: str) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        semconv.MESSAGING_SYSTEM: semconv.MESSAGING_SYSTEM_KAFKA,
        semconv.MESSAGING_OPERATION_TYPE: semconv.OPERATION_PROCESS,
        semconv.MESSAGING_OPERATION_NAME: semconv.OPERATION_PROCESS,
        semconv.MESSAGING_DESTINATION_NAME: message.topic,
        semconv.MESSAGING_CONSUMER_GROUP_NAME: group,
        semconv.MESSAGING_DESTINATION_PARTITION_ID: str(message.partition),
        semconv.MESSAGING_KAFKA_OFFSET: message.offset,
    }
    if message.key is not None:
        # A binary key has no faithful string form: leave it out.
        with suppress(UnicodeDecodeError):
            attributes[semconv.MESSAGING_KAFKA_MESSAGE_KEY] = message.key.decode("utf-8")
    return attributes


def verdict_attributes(verdict: Verdict) -> dict[str, AttributeValue]:
    """The facts of a verdict on its answer's span: ids and counts, never texts. Kept
    few on purpose (the SDK validates and the exporter encodes each one, per answer);
    the judge's name, version and thresholds are on the verdict and in the audit trail."""
    judgement = verdict.judgement
    attributes: dict[str, AttributeValue] = {
        semconv.STREAMPROC_ANSWER_ID: verdict.answer_id,
        semconv.STREAMPROC_ASSISTANT_ID: verdict.assistant_id,
        semconv.STREAMPROC_TENANT: verdict.tenant,
        semconv.STREAMPROC_MODEL: verdict.model,
        semconv.STREAMPROC_ACTION: judgement.action.value,
        semconv.STREAMPROC_HALLUCINATED: judgement.hallucinated,
        semconv.STREAMPROC_CLAIMS_CHECKED: judgement.checked_claims,
        semconv.STREAMPROC_CLAIMS_CONTRADICTED: judgement.contradicted_claims,
        semconv.STREAMPROC_CLAIMS_UNSUPPORTED: judgement.unsupported_claims,
    }
    if judgement.faithfulness is not None:
        attributes[semconv.STREAMPROC_FAITHFULNESS] = judgement.faithfulness
    return attributes
