"""The inline gate's Prometheus metrics: its :class:`~streamproc.gate.sensor.GateSensor`, in
the names the gate's rules and dashboard row read.

``streamproc_gate_decisions_total{decision, verified, reason}`` is a contract shared with
:mod:`streamproc.monitor.prometheus_rules` (``GateUnverifiedHigh``, ``GateShedding``) and
``deploy/prometheus/tests/gate_test.yml``: ``verified`` is ``"true"`` or ``"false"``,
``reason`` is ``""`` when verified, else the :class:`~streamproc.contracts.events.UnverifiedReason`
name (``BUDGET_EXCEEDED``, ``OVERLOADED``, ...). Change them only together.

Every label is bounded by construction (actions, reasons, error codes and paths are
enums): no tenant, no answer id, so a hostile caller cannot mint series. Every series of
a counter is created at 0 up front, so the first decision of each kind is an increase
(a series born at 1 counts nothing in ``rate()``). As :class:`WorkerMetrics`, the metrics
live in a registry of their own, never prometheus-client's global one.
"""

from __future__ import annotations

from typing import Final, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from streamproc.contracts.events import Action, UnverifiedReason
from streamproc.contracts.gate_events import GateErrorCode, GateReply
from streamproc.gate.options import GateSettings
from streamproc.gate.outbox import Outbox
from streamproc.gate.sensor import GatePath
from streamproc.telemetry.metrics import BATCH_SIZE_BUCKETS, JUDGE_LATENCY_BUCKETS_S

__all__ = ["DECISION_BUCKETS_S", "GATE_PATHS", "GateMetrics", "batch_size_buckets"]

DECISION_BUCKETS_S: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
"""Budgets run from a few milliseconds to ``gate.max_budget_ms`` (30 s by default); the
default budget (500 ms) is a bucket bound, so "within the default budget" is exact."""

GATE_PATHS: Final[tuple[GatePath, ...]] = get_args(GatePath)
_OUTBOX_OUTCOMES: Final = ("published", "lost", "refused")


def batch_size_buckets(batch_max: int) -> tuple[float, ...]:
    """The worker's powers of two up to ``gate.batch_max``, and ``batch_max`` itself: a
    gate batch is never larger, so buckets above it would only be empty series."""
    return tuple(sorted({b for b in BATCH_SIZE_BUCKETS if b < batch_max} | {batch_max}))


class GateMetrics:
    """Every metric of one gate, in its own registry; the sensor the service, the HTTP
    server and the Kafka request loop report to. Call from the event loop."""

    def __init__(self, gate: GateSettings) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._decisions = Counter(
            "streamproc_gate_decisions_total",
            "Gate decisions by decision (pass, trim, withhold), verified (true, false) and "
            'reason ("" when verified, else BUDGET_EXCEEDED, LANGUAGE_NOT_SUPPORTED, '
            "OVERLOADED, JUDGE_ERROR, OUTBOX_FULL).",
            ["decision", "verified", "reason"],
            registry=r,
        )
        self._decision_seconds = Histogram(
            "streamproc_gate_decision_seconds",
            "From a request's arrival to its decision, by path: http from its headers "
            "parsed to its reply written to the socket; kafka from the request read to "
            "the decision.",
            ["path"],
            buckets=DECISION_BUCKETS_S,
            registry=r,
        )
        self._judge_seconds = Histogram(
            "streamproc_gate_judge_seconds",
            "Time of one judge call (one batch of gated answers).",
            buckets=JUDGE_LATENCY_BUCKETS_S,
            registry=r,
        )
        self._batch_size = Histogram(
            "streamproc_gate_batch_size",
            "Answers per judge call.",
            buckets=batch_size_buckets(gate.batch_max),
            registry=r,
        )
        self._pending = Gauge(
            "streamproc_gate_pending",
            "Requests held now (queued or being judged).",
            registry=r,
        )
        self._streams = Gauge(
            "streamproc_gate_streams_open",
            "Answers streaming now over the WebSocket /v1/stream.",
            registry=r,
        )
        self._refused = Counter(
            "streamproc_gate_refused_total",
            "Requests refused before a decision, by error code and path.",
            ["code", "path"],
            registry=r,
        )
        self._publish_failures = Counter(
            "streamproc_gate_publish_failures_total",
            "Decisions whose monitored records (verdict, outcome, audit) could not be "
            "published, by path; the caller still got the decision.",
            ["path"],
            registry=r,
        )
        self._outbox_records = Gauge(
            "streamproc_gate_outbox_held_records",
            "HTTP: monitored records held for publishing (what a kill -9 would lose).",
            registry=r,
        )
        self._outbox_bytes = Gauge(
            "streamproc_gate_outbox_held_bytes",
            "HTTP: bytes of monitored records held for publishing.",
            registry=r,
        )
        self._outbox_oldest = Gauge(
            "streamproc_gate_outbox_oldest_seconds",
            "HTTP: how long the oldest record held has waited to be published.",
            registry=r,
        )
        self._outbox_records_total = Counter(
            "streamproc_gate_outbox_records_total",
            "HTTP: monitored records by outcome: published; lost (given up after "
            "repeated refusals, or still held when a shutdown's drain ran out); refused "
            "(of requests answered OUTBOX_FULL, never kept).",
            ["outcome"],
            registry=r,
        )
        self._trace_context_dropped = Counter(
            "streamproc_trace_context_dropped_total",
            "Trace-context fields of requests left out for breaking W3C's limits, by header "
            "(traceparent, tracestate, baggage), reason (invalid, too_long, "
            "too_many_members) and path.",
            ["header", "reason", "path"],
            registry=r,
        )
        self._outbox: Outbox | None = None
        self._outbox_seen: dict[str, int] = {}
        for outcome in _OUTBOX_OUTCOMES:
            self._outbox_records_total.labels(outcome)
            self._outbox_seen[outcome] = 0
        for decision in Action:
            self._decisions.labels(decision.value, "true", "")
            for reason in UnverifiedReason:
                self._decisions.labels(decision.value, "false", reason.value)
        for path in GATE_PATHS:
            self._decision_seconds.labels(path)
            self._publish_failures.labels(path)
            for code in get_args(GateErrorCode):
                self._refused.labels(code, path)

    def trace_context_dropped(self, header: str, reason: str, *, path: GatePath) -> None:
        self._trace_context_dropped.labels(header, reason, path).inc()

    def decided(self, reply: GateReply, *, path: GatePath) -> None:
        """One request answered: counted by its decision, latency observed by path."""
        if reply.verified:
            verified, reason = "true", ""
        else:
            # Unverified with no reason given is a slip: counted as a judge error, as the
            # worker counts it.
            verified, reason = "false", (reply.reason or UnverifiedReason.JUDGE_ERROR).value
        self._decisions.labels(reply.decision.value, verified, reason).inc()
        self._decision_seconds.labels(path).observe(reply.latency_ms / 1000)

    def pending(self, count: int) -> None:
        """Requests held now."""
        self._pending.set(count)

    def streams(self, count: int) -> None:
        """Answers streaming now."""
        self._streams.set(count)

    def judged(self, batch_size: int, judge_ms: float) -> None:
        """One judge call finished."""
        self._batch_size.observe(batch_size)
        self._judge_seconds.observe(judge_ms / 1000)

    def refused(self, code: GateErrorCode, *, path: GatePath) -> None:
        """One request refused before a decision."""
        self._refused.labels(code, path).inc()

    def publish_failed(self, *, path: GatePath) -> None:
        """A decision's monitored records could not be published."""
        self._publish_failures.labels(path).inc()

    def watch_outbox(self, outbox: Outbox) -> None:
        """Read the outbox's state at each scrape."""
        self._outbox = outbox

    def refresh(self) -> None:
        """The outbox's state, pulled at scrape time; every other value is pushed as it
        happens."""
        outbox = self._outbox
        if outbox is None:
            return
        self._outbox_records.set(outbox.records)
        self._outbox_bytes.set(outbox.bytes)
        self._outbox_oldest.set(outbox.oldest_age_s())
        counts = {"published": outbox.published, "lost": outbox.lost, "refused": outbox.refused}
        for outcome, count in counts.items():
            grown = count - self._outbox_seen[outcome]
            if grown > 0:
                self._outbox_records_total.labels(outcome).inc(grown)
                self._outbox_seen[outcome] = count

    def render(self) -> bytes:
        """The Prometheus text format (0.0.4)."""
        self.refresh()
        return generate_latest(self.registry)
