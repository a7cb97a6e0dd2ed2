"""Traces of the judging consumer, built from Kafka headers.

The consumer reads records itself (aiokafka's ``getmany``), so no instrumentation sees
them: this module extracts each message's W3C context from its headers and injects the
answer's context into every record written for it, through the configured propagator
(``opentelemetry.propagate``: tracecontext and baggage unless ``OTEL_PROPAGATORS`` says
otherwise).

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
  every answer span. The judge runs a whole batch in one thread-pool call and exposes no
  per-stage times (decompose, retrieval, NLI...), so the stages are the ones the caller
  measures around it (e.g. ``judge``, ``publish``) and an answer's stage spans show its
  batch's times;
- per judged answer one ``gen_ai.evaluation.result`` log record, and one per checked
  claim, through the Logs API with the answer span's trace and span ids.

With telemetry off (the API's no-op tracer) an answer's "span" is its producer's context:
records still carry the producer's ``traceparent`` and nothing is recorded.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

from opentelemetry import _logs, propagate, trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from streamproc.adapters import semconv
from streamproc.adapters.telemetry import Telemetry
from streamproc.events import Action, ClaimVerdict, Verdict, VerdictLabel

__all__ = [
    "BatchTrace",
    "Headers",
    "KafkaHeadersGetter",
    "KafkaHeadersSetter",
    "MessageRef",
    "MessageTrace",
    "StageClock",
    "StageTiming",
    "Tracing",
    "evaluation_records",
    "extract",
    "inject",
    "reason_codes",
    "traceparent_headers",
    "verdict_attributes",
]

Headers = Sequence[tuple[str, bytes | None]]
"""Kafka record headers as aiokafka gives them (the value may be None)."""
OutHeaders = tuple[tuple[str, bytes], ...]
"""Headers to send (``OutboundRecord.headers``)."""


# --- propagation over Kafka headers -------------------------------------------------------


class KafkaHeadersGetter(Getter[Headers]):
    """Reads propagation fields from Kafka headers; names compare case-insensitively and
    values decode as latin-1 (never fails: a garbled header just does not parse)."""

    def get(self, carrier: Headers, key: str) -> list[str] | None:
        wanted = key.lower()
        values = [
            value.decode("latin-1")
            for name, value in carrier
            if value is not None and name.lower() == wanted
        ]
        return values or None

    def keys(self, carrier: Headers) -> list[str]:
        return [name for name, _ in carrier]


class KafkaHeadersSetter(Setter[list[tuple[str, bytes]]]):
    """Writes propagation fields as Kafka headers, replacing a field already present."""

    def set(self, carrier: list[tuple[str, bytes]], key: str, value: str) -> None:
        carrier[:] = [(name, old) for name, old in carrier if name.lower() != key.lower()]
        carrier.append((key, value.encode("latin-1", "replace")))


_GETTER = KafkaHeadersGetter()
_EMPTY = Context()
_PROPAGATED = frozenset({"traceparent", "tracestate", "baggage"})
# W3C trace context exactly as OpenTelemetry's propagator reads it, for the pass-through.
_TRACEPARENT = re.compile(
    r"[ \t]*(?P<version>[0-9a-f]{2})-(?P<trace>[0-9a-f]{32})-(?P<span>[0-9a-f]{16})"
    r"-[0-9a-f]{2}(?:(?P<rest>-.*)|[ \t]*)"
)
_TRACEPARENT_MAX_CHARS = 512
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
_SETTER = KafkaHeadersSetter()


def extract(headers: Headers | None) -> Context:
    """The context the producer propagated in ``headers``. Absent or malformed headers
    give an empty context, so a span started in it is a new root (never a child of
    whatever span happens to be current)."""
    return propagate.extract(headers or (), context=Context(), getter=_GETTER)


def inject(context: Context) -> OutHeaders:
    """``traceparent`` (and ``tracestate``, ``baggage`` where set) for ``context``; empty
    when it holds no valid span."""
    carrier: list[tuple[str, bytes]] = []
    propagate.inject(carrier, context=context, setter=_SETTER)
    return tuple(carrier)


def traceparent_headers(span: Span, context: Context | None = None) -> OutHeaders:
    """The headers that make ``span`` the parent of whoever reads the record; ``context``
    is the span's parent context, to carry its baggage along."""
    return inject(trace.set_span_in_context(span, context))


def _traceparent_ids(header: str) -> tuple[str, str] | None:
    """(trace id, span id) of a valid ``traceparent``, by the propagator's own rules."""
    if len(header) > _TRACEPARENT_MAX_CHARS:
        return None
    match = _TRACEPARENT.fullmatch(header)
    if match is None or match["version"] == "ff" or (match["version"] == "00" and match["rest"]):
        return None
    if match["trace"] == _ZERO_TRACE or match["span"] == _ZERO_SPAN:
        return None
    return match["trace"], match["span"]


# --- messages and stage times -------------------------------------------------------------


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

    __slots__ = ("_headers", "_ids", "context", "message", "span", "verdict")

    def __init__(self, message: MessageRef, span: Span, context: Context) -> None:
        self.message = message
        self.span = span
        self.context = context
        """The span's context (with the producer's baggage): parent of stage spans."""
        self.verdict: Verdict | None = None
        self._headers: OutHeaders | None = None
        self._ids: tuple[str, str] | None = None

    @classmethod
    def passthrough(cls, message: MessageRef) -> MessageTrace:
        """Telemetry off: no span, no propagator; the producer's valid ``traceparent``
        (with its ``tracestate`` and ``baggage``) is handed on as it came, so tracing
        off costs a header scan and one regular expression per message."""
        traced = cls(message, trace.INVALID_SPAN, _EMPTY)
        traced._headers = ()
        for name, value in message.headers:
            if value is not None and name.lower() == "traceparent":
                ids = _traceparent_ids(value.decode("latin-1"))
                if ids is not None:
                    traced._ids = ids
                    traced._headers = tuple(
                        (key.lower(), raw)
                        for key, raw in message.headers
                        if raw is not None and key.lower() in _PROPAGATED
                    )
                break  # the propagator, too, reads only the first traceparent
        return traced

    @property
    def headers(self) -> OutHeaders:
        """``traceparent`` / ``tracestate`` for every record written for this message."""
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
        parents = [extract(message.headers) for message in messages]
        batch_span = self._tracer.start_span(
            _batch_span_name(messages),
            context=Context(),
            kind=SpanKind.CONSUMER,
            attributes=_batch_attributes(messages, self._tracing.group),
            links=_links(messages, parents),
            start_time=start_ns,
        )
        batch_link = [Link(batch_span.get_span_context())]
        for message, parent in zip(messages, parents, strict=True):
            span = self._tracer.start_span(
                semconv.ANSWER_SPAN,
                context=parent,
                kind=SpanKind.CONSUMER,
                attributes=_message_attributes(message, self._tracing.group),
                links=batch_link,
                start_time=start_ns,
            )
            context = trace.set_span_in_context(span, parent)
            self._order.append(MessageTrace(message, span, context))
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


# --- evaluation records (Logs API) --------------------------------------------------------


def reason_codes(reasons: Sequence[str]) -> list[str]:
    """The codes of reasons that read ``"CODE: detail"`` (details may quote the answer
    or evidence, so only codes leave the worker), sorted and unique."""
    return sorted({reason.split(":", 1)[0].strip() for reason in reasons} - {""})


def evaluation_records(
    logger: _logs.Logger,
    verdict: Verdict,
    span_context: SpanContext,
    *,
    claims: bool = True,
    timestamp_ns: int | None = None,
) -> int:
    """Emit ``gen_ai.evaluation.result`` for the answer (score: faithfulness, label: the
    action) and, with ``claims``, for each checked claim (score: its support score,
    label: its verdict), all carrying ``span_context``'s trace and span ids. Returns how
    many were emitted."""
    context = trace.set_span_in_context(trace.NonRecordingSpan(span_context))
    judgement = verdict.judgement
    answer: dict[str, AttributeValue] = {
        semconv.GEN_AI_RESPONSE_ID: verdict.answer_id,
        semconv.GEN_AI_EVALUATION_NAME: semconv.GROUNDEDNESS_EVALUATION,
        semconv.GEN_AI_EVALUATION_SCORE_LABEL: judgement.action.value,
        semconv.STREAMPROC_ASSISTANT_ID: verdict.assistant_id,
        semconv.STREAMPROC_TENANT: verdict.tenant,
        semconv.STREAMPROC_MODEL: verdict.model,
        semconv.STREAMPROC_HALLUCINATED: judgement.hallucinated,
    }
    if judgement.faithfulness is not None:
        answer[semconv.GEN_AI_EVALUATION_SCORE_VALUE] = judgement.faithfulness
    codes = reason_codes([reason for claim in judgement.claims for reason in claim.reasons])
    if codes:
        answer[semconv.GEN_AI_EVALUATION_EXPLANATION] = ", ".join(codes)
    severity = SeverityNumber.INFO if judgement.action is Action.PASS else SeverityNumber.WARN
    _emit(logger, context, answer, severity, timestamp_ns)
    emitted = 1
    if claims:
        for claim in judgement.claims:
            if claim.verdict is None:
                continue  # not checked (conversational): nothing was evaluated
            severity = (
                SeverityNumber.INFO
                if claim.verdict is VerdictLabel.SUPPORTED
                else SeverityNumber.WARN
            )
            attributes = _claim_attributes(verdict.answer_id, claim, claim.verdict)
            _emit(logger, context, attributes, severity, timestamp_ns)
            emitted += 1
    return emitted


def _claim_attributes(
    answer_id: str, claim: ClaimVerdict, label: VerdictLabel
) -> dict[str, AttributeValue]:
    """A claim's record: the answer's record beside it (same span) holds who and what."""
    attributes: dict[str, AttributeValue] = {
        semconv.GEN_AI_RESPONSE_ID: answer_id,
        semconv.GEN_AI_EVALUATION_NAME: semconv.CLAIM_EVALUATION,
        semconv.GEN_AI_EVALUATION_SCORE_LABEL: label.value,
        semconv.STREAMPROC_CLAIM_INDEX: claim.index,
    }
    if claim.score is not None:
        attributes[semconv.GEN_AI_EVALUATION_SCORE_VALUE] = claim.score
    codes = reason_codes(claim.reasons)
    if codes:
        attributes[semconv.GEN_AI_EVALUATION_EXPLANATION] = ", ".join(codes)
    return attributes


def _emit(
    logger: _logs.Logger,
    context: Context,
    attributes: dict[str, AttributeValue],
    severity: SeverityNumber,
    timestamp_ns: int | None,
) -> None:
    logger.emit(
        timestamp=timestamp_ns,
        context=context,
        severity_number=severity,
        severity_text=severity.name,
        attributes=attributes,
        event_name=semconv.EVALUATION_RESULT_EVENT,
    )
