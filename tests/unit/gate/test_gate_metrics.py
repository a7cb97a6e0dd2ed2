"""The gate's Prometheus metrics: counts from real gate replies in the labels the gate's
alerts read, series at 0 before the first of each, its own registry, and served by the
metrics server as the worker's are."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client import REGISTRY

from streamproc.config import Settings
from streamproc.contracts.events import Action, UnverifiedReason
from streamproc.contracts.gate_events import GateReply
from streamproc.gate.metrics import GateMetrics, batch_size_buckets
from streamproc.gate.options import GateSettings
from streamproc.gate.outbox import Outbox, OutboxLimits
from streamproc.gate.sensor import GateSensor
from streamproc.inference.options import JudgeSettings
from streamproc.monitor.prometheus_rules import GATE_DECISIONS_METRIC
from streamproc.verdicts.record import OutboundRecord
from streamproc.web.metrics_server import MetricsServer
from streamproc.wiring import build_judge, gate_service
from tests.unit.gate.conftest import event, request

MIXED = "The supplier delivered 90 of 100 pieces.  The moon is made of green cheese."
SETTINGS = Settings(gate=GateSettings(publish=False, batch_max=8))


@pytest.fixture
async def reply() -> GateReply:
    """A real reply of the gate over the rules judge: verified, trimmed."""
    service = gate_service(SETTINGS, build_judge(JudgeSettings(name="rules")))
    await service.start()
    try:
        result = await service.check(request(event(MIXED), budget_ms=2000))
    finally:
        await service.close()
    assert result.reply.verified and result.reply.decision is Action.TRIM
    return result.reply


def decisions(metrics: GateMetrics, decision: str, verified: str, reason: str) -> float | None:
    labels = {"decision": decision, "verified": verified, "reason": reason}
    return metrics.registry.get_sample_value(GATE_DECISIONS_METRIC, labels)


def test_it_is_a_gate_sensor() -> None:
    sensor: GateSensor = GateMetrics(SETTINGS.gate)
    assert sensor is not None


def test_decisions_are_counted_in_the_labels_the_alerts_read(reply: GateReply) -> None:
    metrics = GateMetrics(SETTINGS.gate)
    metrics.decided(reply, path="http")
    metrics.decided(reply, path="kafka")
    unverified = reply.model_copy(
        update={
            "decision": Action.PASS,
            "verified": False,
            "reason": UnverifiedReason.BUDGET_EXCEEDED,
            "latency_ms": 40.0,
        }
    )
    metrics.decided(unverified, path="http")
    shed = unverified.model_copy(
        update={"decision": Action.WITHHOLD, "reason": UnverifiedReason.OVERLOADED}
    )
    metrics.decided(shed, path="http")

    assert decisions(metrics, "trim", "true", "") == 2
    assert decisions(metrics, "pass", "false", "BUDGET_EXCEEDED") == 1
    assert decisions(metrics, "withhold", "false", "OVERLOADED") == 1
    assert decisions(metrics, "pass", "true", "") == 0  # at 0 before the first
    sample = metrics.registry.get_sample_value
    assert sample("streamproc_gate_decision_seconds_count", {"path": "http"}) == 3
    assert sample("streamproc_gate_decision_seconds_count", {"path": "kafka"}) == 1
    within_50ms = sample("streamproc_gate_decision_seconds_bucket", {"path": "http", "le": "0.05"})
    assert within_50ms == 2 + (reply.latency_ms <= 50)
    assert sample("streamproc_gate_decision_seconds_sum", {"path": "http"}) == pytest.approx(
        (reply.latency_ms + 80.0) / 1000
    )


def test_an_unverified_reply_without_a_reason_counts_as_a_judge_error(reply: GateReply) -> None:
    metrics = GateMetrics(SETTINGS.gate)
    metrics.decided(reply.model_copy(update={"verified": False, "reason": None}), path="http")
    assert decisions(metrics, "trim", "false", "JUDGE_ERROR") == 1


def test_every_decision_series_exists_at_zero_and_no_verified_one_has_a_reason() -> None:
    metrics = GateMetrics(SETTINGS.gate)
    (family,) = [f for f in metrics.registry.collect() if f.name == "streamproc_gate_decisions"]
    seen = {
        (s.labels["decision"], s.labels["verified"], s.labels["reason"])
        for s in family.samples
        if s.name == GATE_DECISIONS_METRIC
    }
    reasons = {""} | {r.name for r in UnverifiedReason}
    assert {reason for _, verified, reason in seen if verified == "true"} == {""}
    assert {reason for _, verified, reason in seen if verified == "false"} == reasons - {""}
    assert {decision for decision, _, _ in seen} == {a.value for a in Action}
    assert all(s.value == 0 for s in family.samples if s.name == GATE_DECISIONS_METRIC)


def test_judge_calls_pending_refusals_and_publish_failures() -> None:
    metrics = GateMetrics(SETTINGS.gate)
    sample = metrics.registry.get_sample_value
    assert sample("streamproc_gate_refused_total", {"code": "forbidden", "path": "kafka"}) == 0
    metrics.judged(3, 120.0)
    metrics.judged(8, 30.0)
    metrics.pending(5)
    metrics.pending(2)
    metrics.refused("unauthorized", path="http")
    metrics.refused("unauthorized", path="http")
    metrics.refused("bad_json", path="kafka")
    metrics.publish_failed(path="kafka")

    assert sample("streamproc_gate_judge_seconds_count") == 2
    assert sample("streamproc_gate_judge_seconds_sum") == pytest.approx(0.15)
    assert sample("streamproc_gate_judge_seconds_bucket", {"le": "0.05"}) == 1
    assert sample("streamproc_gate_batch_size_sum") == 11
    assert sample("streamproc_gate_batch_size_bucket", {"le": "4.0"}) == 1
    assert sample("streamproc_gate_pending") == 2
    assert sample("streamproc_gate_refused_total", {"code": "unauthorized", "path": "http"}) == 2
    assert sample("streamproc_gate_refused_total", {"code": "bad_json", "path": "kafka"}) == 1
    assert sample("streamproc_gate_publish_failures_total", {"path": "kafka"}) == 1
    assert sample("streamproc_gate_publish_failures_total", {"path": "http"}) == 0


def test_batch_buckets_stop_at_the_batch_limit() -> None:
    assert batch_size_buckets(8) == (1, 2, 4, 8)
    assert batch_size_buckets(10) == (1, 2, 4, 8, 10)
    assert batch_size_buckets(1) == (1,)


def test_two_gates_never_share_numbers_nor_touch_the_global_registry() -> None:
    first, second = GateMetrics(SETTINGS.gate), GateMetrics(SETTINGS.gate)
    first.pending(7)
    assert second.registry.get_sample_value("streamproc_gate_pending") == 0
    assert REGISTRY.get_sample_value("streamproc_gate_pending") is None


async def test_the_metrics_server_serves_the_gate() -> None:
    metrics = GateMetrics(SETTINGS.gate)
    metrics.refused("not_ready", path="http")
    server = MetricsServer(metrics, host="127.0.0.1", port=0)
    await server.start()
    try:
        async with aiohttp.ClientSession() as http, http.get(server.url) as response:
            assert response.status == 200
            text = await response.text()
    finally:
        await server.stop()
    assert 'streamproc_gate_refused_total{code="not_ready",path="http"} 1.0' in text
    assert 'streamproc_gate_decisions_total{decision="pass",reason="",verified="true"} 0.0' in text


async def test_the_outbox_is_read_at_each_scrape() -> None:
    class Stuck:
        async def publish(self, records: object) -> None:
            raise ConnectionError("away")

    metrics = GateMetrics(SETTINGS.gate)
    outbox = Outbox(Stuck(), OutboxLimits(max_records=10, max_bytes=1000, stall_s=1, drain_s=0))
    metrics.watch_outbox(outbox)
    outbox.put([OutboundRecord("verdicts", b"k", b"v" * 10)] * 2)
    outbox.refuse(5)
    metrics.refresh()
    metrics.refresh()  # counters grow by what changed, not twice
    r = metrics.registry
    assert r.get_sample_value("streamproc_gate_outbox_held_records") == 2
    assert r.get_sample_value("streamproc_gate_outbox_held_bytes") == 2 * (1 + 10 + 8)
    counted = "streamproc_gate_outbox_records_total"
    assert r.get_sample_value(counted, {"outcome": "refused"}) == 5
    assert r.get_sample_value(counted, {"outcome": "published"}) == 0
    assert await outbox.close() == 2
    metrics.refresh()
    assert r.get_sample_value(counted, {"outcome": "lost"}) == 2
    assert r.get_sample_value("streamproc_gate_outbox_held_records") == 0
