"""One request to the gate and what the gate makes of it."""

from __future__ import annotations

from dataclasses import dataclass

from streamproc.contracts.events import AnswerEvent
from streamproc.contracts.gate_events import GateReply
from streamproc.verdicts.dead_letter import MessageOrigin
from streamproc.verdicts.output_topic import OutHeaders
from streamproc.verdicts.record import OutboundRecord

__all__ = ["HTTP_ORIGIN_TOPIC", "GateRequest", "GateResult", "http_origin"]

HTTP_ORIGIN_TOPIC = "gate.http"
"""The origin topic an HTTP request's audit record and dead letter name."""


def http_origin() -> MessageOrigin:
    """Where an HTTP request came from, as audit records and dead letters say it."""
    return MessageOrigin(HTTP_ORIGIN_TOPIC, -1, -1, None)


@dataclass(frozen=True, slots=True)
class GateRequest:
    """An answer to decide on, as the HTTP server or the Kafka loop received it."""

    body: bytes
    """The raw event bytes, as received (the audit record keeps them)."""
    answer: AnswerEvent
    budget_ms: float
    """Already parsed and clamped (:meth:`GateService.budget`)."""
    arrived: float
    """``time.monotonic()`` when the request arrived: the latency clock starts there."""
    origin: MessageOrigin
    """The Kafka record's, or :func:`http_origin` for HTTP."""
    headers: OutHeaders = ()
    """What every published record carries (the caller's ``traceparent``) when tracing
    is off; with tracing on, the decision span's context replaces it."""
    trace_id: str | None = None
    traceparent: str | None = None
    notes: tuple[str, ...] = ()
    """Added to the verdict's ``judgement.limits`` (a trace-context field dropped)."""
    monitored: bool = True
    """False for a streamed answer's sentence checks: decided, but no span and no record
    (the whole answer is monitored once, at its end)."""
    span_from: float | None = None
    """``time.monotonic()`` the decision's span starts at, when earlier than ``arrived``
    (a streamed answer's span covers the whole stream)."""


@dataclass(frozen=True, slots=True)
class GateResult:
    """The reply, and the monitored records made from exactly the judgement replied with."""

    reply: GateReply
    records: list[OutboundRecord]
    """Verdict, flag, outcome, audit record, review item - to publish; [] when
    ``gate.publish`` is off."""
    judge_ms: float | None
    """The judge (or settle) time behind the reply; None when nothing ran (shed)."""
    trace_headers: OutHeaders = ()
    """The decision span's context (what the records carry): the parent of anything
    traced under the decision later."""
