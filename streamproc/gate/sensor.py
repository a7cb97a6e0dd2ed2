"""What the gate reports, for metrics: a port the adapters implement."""

from __future__ import annotations

from typing import Literal, Protocol

from streamproc.contracts.gate_events import GateErrorCode, GateReply

__all__ = ["GatePath", "GateSensor", "NullGateSensor"]

GatePath = Literal["http", "kafka", "stream"]
"""How the caller asked: ``POST /v1/check``, the Kafka request topic, or the WebSocket
``/v1/stream`` (one decision per streamed answer: its final)."""


class GateSensor(Protocol):
    """``decided``, ``refused`` and ``publish_failed`` are called by whoever answers the
    caller (the HTTP server, the Kafka loop), which knows the path; ``pending`` and
    ``judged`` by the service."""

    def decided(self, reply: GateReply, *, path: GatePath) -> None:
        """One request answered."""
        ...

    def pending(self, count: int) -> None:
        """Requests held now (queued or being judged)."""
        ...

    def judged(self, batch_size: int, judge_ms: float) -> None:
        """One judge call finished: how many answers, how long."""
        ...

    def streams(self, count: int) -> None:
        """Answers streaming now over ``/v1/stream`` (by the WebSocket endpoint)."""
        ...

    def refused(self, code: GateErrorCode, *, path: GatePath) -> None:
        """One request refused before a decision (bad input, auth, not ready)."""
        ...

    def publish_failed(self, *, path: GatePath) -> None:
        """A decision's monitored records could not be published."""
        ...

    def trace_context_dropped(self, header: str, reason: str, *, path: GatePath) -> None:
        """A request's trace-context field left out for breaking W3C's limits."""
        ...


class NullGateSensor:
    """Reports nowhere (tests, embedding programs)."""

    def decided(self, reply: GateReply, *, path: GatePath) -> None:
        del reply, path

    def pending(self, count: int) -> None:
        del count

    def judged(self, batch_size: int, judge_ms: float) -> None:
        del batch_size, judge_ms

    def streams(self, count: int) -> None:
        del count

    def refused(self, code: GateErrorCode, *, path: GatePath) -> None:
        del code, path

    def publish_failed(self, *, path: GatePath) -> None:
        del path

    def trace_context_dropped(self, header: str, reason: str, *, path: GatePath) -> None:
        del header, reason, path
