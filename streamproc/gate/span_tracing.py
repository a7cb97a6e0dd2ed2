"""The gate's decision spans over OpenTelemetry (``streamproc.gate.tracing``'s port).

A streamed answer's decision span covers the stream, with one ``groundedness.sentence``
child per checked sentence (from its completion to its release).

One ``groundedness.check`` span per decision - the name the worker gives an answer's span,
so one query finds streamed and gated answers - the CHILD of the caller's
``traceparent`` (the HTTP header, or the Kafka request's header), a new root without
one. Kind SERVER over HTTP, CONSUMER over Kafka. It starts at the request's arrival; its
context goes into every record published for the answer, so the verdict on the topic is
in the caller's trace; it ends with the verdict's facts and the decision's
(``streamproc.gate.*``), then the ``gen_ai.evaluation.result`` records are emitted with its
trace and span ids, as the worker emits them. With telemetry off the caller's headers
are handed on as they came (:class:`~streamproc.gate.tracing.PassThroughTracing`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from streamproc.contracts.gate_events import GateReply
from streamproc.gate.request import HTTP_ORIGIN_TOPIC, GateRequest
from streamproc.gate.tracing import (
    DecisionSpan,
    DecisionTracing,
    PassThroughTracing,
    SentenceCheck,
)
from streamproc.telemetry import semconv
from streamproc.telemetry.evaluation_log import evaluation_records
from streamproc.telemetry.otel import Telemetry
from streamproc.telemetry.trace_headers import OutHeaders, extract, inject
from streamproc.telemetry.tracing import verdict_attributes

__all__ = ["GateTracing", "gate_tracing"]

GATE_DECISION: Final = "streamproc.gate.decision"
GATE_VERIFIED: Final = "streamproc.gate.verified"
GATE_REASON: Final = "streamproc.gate.reason"
GATE_POLICY: Final = "streamproc.gate.policy"
GATE_BUDGET_MS: Final = "streamproc.gate.budget_ms"
SENTENCE_SPAN: Final = "groundedness.sentence"
SENTENCE_INDEX: Final = "streamproc.gate.sentence.index"


def gate_tracing(telemetry: Telemetry) -> DecisionTracing:
    """Spans when telemetry is on; the pass-through otherwise (no propagator runs)."""
    return GateTracing(telemetry) if telemetry.enabled else PassThroughTracing()


class GateTracing:
    """Starts one span per decision; see the module doc."""

    def __init__(self, telemetry: Telemetry, *, claim_records: bool = True) -> None:
        self._telemetry = telemetry
        self._claim_records = claim_records

    def start(self, request: GateRequest) -> DecisionSpan:
        parent = extract(request.headers)
        http = request.origin.topic == HTTP_ORIGIN_TOPIC
        began = request.arrived if request.span_from is None else request.span_from
        ago_ns = int(max(0.0, time.monotonic() - began) * 1e9)
        span = self._telemetry.tracer.start_span(
            semconv.ANSWER_SPAN,
            context=parent,
            kind=SpanKind.SERVER if http else SpanKind.CONSUMER,
            attributes={GATE_BUDGET_MS: request.budget_ms},
            start_time=time.time_ns() - ago_ns,
        )
        return _Span(self, span, trace.set_span_in_context(span, parent))

    def sentences(self, parent: OutHeaders, checks: Sequence[SentenceCheck]) -> None:
        context = extract(parent)
        now_ns, now = time.time_ns(), time.monotonic()
        for check in checks:
            span = self._telemetry.tracer.start_span(
                SENTENCE_SPAN,
                context=context,
                kind=SpanKind.INTERNAL,
                start_time=now_ns - int(max(0.0, now - check.complete) * 1e9),
                attributes={
                    SENTENCE_INDEX: check.index,
                    GATE_DECISION: check.decision,
                    GATE_VERIFIED: check.verified,
                },
            )
            span.end(end_time=now_ns - int(max(0.0, now - check.released) * 1e9))


class _Span:
    __slots__ = ("_context", "_ended", "_headers", "_span", "_tracing")

    def __init__(self, tracing: GateTracing, span: Span, context: Context) -> None:
        self._tracing = tracing
        self._span = span
        self._context = context
        self._headers: OutHeaders | None = None
        self._ended = False

    @property
    def trace_id(self) -> str | None:
        span_context = self._span.get_span_context()
        return trace.format_trace_id(span_context.trace_id) if span_context.is_valid else None

    @property
    def headers(self) -> OutHeaders:
        if self._headers is None:
            self._headers = inject(self._context)
        return self._headers

    def end(self, reply: GateReply | None, *, error: BaseException | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        span = self._span
        if span.is_recording():
            if reply is not None:
                span.set_attributes(verdict_attributes(reply.verdict))
                span.set_attributes(
                    {
                        GATE_DECISION: reply.decision.value,
                        GATE_VERIFIED: reply.verified,
                        GATE_POLICY: reply.policy,
                    }
                )
                if reply.reason is not None:
                    span.set_attribute(GATE_REASON, reply.reason.value)
            if error is not None:
                span.set_attribute(semconv.ERROR_TYPE, type(error).__qualname__)
                span.set_status(Status(StatusCode.ERROR, type(error).__qualname__))
        end_ns = time.time_ns()
        span.end(end_time=end_ns)
        if reply is not None and error is None:
            evaluation_records(
                self._tracing._telemetry.logger,
                reply.verdict,
                span.get_span_context(),
                claims=self._tracing._claim_records,
                timestamp_ns=end_ns,
            )
