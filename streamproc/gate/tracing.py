"""The decision's trace: a port, so the gate needs no OpenTelemetry of its own.

One span per decision continues the caller's ``traceparent``; its context goes into the
records published for the answer (so the verdict on the topic is in the caller's
trace) and the ``gen_ai.evaluation.result`` record is emitted when it ends, as the
worker does for a streamed answer (``streamproc.gate.span_tracing`` implements it).
Without telemetry :class:`PassThroughTracing` hands the caller's headers on as they came.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from streamproc.contracts.gate_events import GateReply
from streamproc.gate.request import GateRequest
from streamproc.verdicts.output_topic import OutHeaders

__all__ = ["DecisionSpan", "DecisionTracing", "PassThroughTracing", "SentenceCheck"]


@dataclass(frozen=True, slots=True)
class SentenceCheck:
    """One checked sentence of a streamed answer, for its span."""

    index: int
    complete: float
    """``time.monotonic()`` when the sentence was complete."""
    released: float
    """``time.monotonic()`` when its decision was sent."""
    decision: str
    verified: bool


class DecisionSpan(Protocol):
    """The span of one decision, open from arrival to the reply."""

    @property
    def trace_id(self) -> str | None:
        """32 hex digits, what ``Verdict.trace_id`` holds; None when there is no trace."""
        ...

    @property
    def headers(self) -> OutHeaders:
        """The trace headers every record published for the answer carries."""
        ...

    def end(self, reply: GateReply | None, *, error: BaseException | None = None) -> None:
        """Set the decision's facts, end the span, emit the evaluation record."""
        ...


class DecisionTracing(Protocol):
    def start(self, request: GateRequest) -> DecisionSpan:
        """Open the span of ``request`` (its start: the request's arrival)."""
        ...

    def sentences(self, parent: OutHeaders, checks: Sequence[SentenceCheck]) -> None:
        """One span per checked sentence of a streamed answer, children of the answer's
        decision span (``parent``: its context as the records carry it)."""
        ...


class _PassThrough:
    __slots__ = ("headers", "trace_id")

    def __init__(self, request: GateRequest) -> None:
        self.trace_id = request.trace_id
        self.headers = request.headers

    def end(self, reply: GateReply | None, *, error: BaseException | None = None) -> None:
        del reply, error


class PassThroughTracing:
    """Telemetry off: no span; the request's own trace id and headers are used."""

    def start(self, request: GateRequest) -> DecisionSpan:
        return _PassThrough(request)

    def sentences(self, parent: OutHeaders, checks: Sequence[SentenceCheck]) -> None:
        del parent, checks
