"""The gate over HTTP and its monitored records: the reply does not wait on the sink (the
outbox publishes), the sink's failure does not change the caller's decision, and budgets
are kept when the outbox is full, a caller is over its share, or a body arrives slowly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from streamproc.contracts.events import Action
from streamproc.contracts.gate_events import GateReply
from streamproc.verdicts.record import OutboundRecord
from streamproc.wiring import output_topics
from tests.unit.gate.http.http_gate import (
    OTHER_TOKEN,
    OUTBOX_LIMITS,
    TRACEPARENT,
    body,
    gate_settings,
    headers,
    post,
    refused_with,
    serving,
)

# ------------------------------------------------------------------ the monitored records


@dataclass
class HeldSink:
    """Records what it is asked to publish, and returns only once released."""

    published: list[Sequence[OutboundRecord]] = field(default_factory=list)
    called: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def publish(self, records: Sequence[OutboundRecord]) -> None:
        self.published.append(records)
        self.called.set()
        await self.release.wait()


class FailingSink:
    async def publish(self, records: Sequence[OutboundRecord]) -> None:
        raise ConnectionError("the broker is gone")


async def test_the_reply_does_not_wait_for_the_broker_and_the_records_follow(
    tmp_path: Path,
) -> None:
    sink = HeldSink()
    settings = gate_settings(tmp_path, publish=True)
    async with serving(settings, sink=sink) as gate, aiohttp.ClientSession() as http:
        status, text, _ = await post(gate, body(), headers(traceparent=TRACEPARENT))
        await asyncio.wait_for(sink.called.wait(), 5)  # the sink is held: not acknowledged
        assert gate.outbox is not None and gate.outbox.records > 0
        async with http.get(gate.url + "/readyz") as response:
            ready_while_recent = response.status
        await asyncio.sleep(OUTBOX_LIMITS.stall_s + 0.1)
        async with http.get(gate.url + "/readyz") as response:
            stalled = (response.status, await response.json())
        sink.release.set()
        for _ in range(100):
            if gate.outbox.records == 0:
                break
            await asyncio.sleep(0.01)
        async with http.get(gate.url + "/readyz") as response:
            ready_again = response.status
        assert gate.outbox.published > 0 and gate.outbox.records == 0
    assert status == 200, text
    assert ready_while_recent == 200
    assert stalled[0] == 503 and stalled[1]["reason"] == "broker_unavailable"
    assert ready_again == 200
    [records] = sink.published
    topics = output_topics(settings)
    assert topics.verdicts.name in {record.topic for record in records}
    verdict = next(r for r in records if r.topic == topics.verdicts.name)
    assert verdict.value is not None
    assert json.loads(verdict.value)["answer_id"] == "ans-e1"
    assert ("traceparent", TRACEPARENT.encode()) in verdict.headers
    assert gate.sensor.publish_failures == []


async def test_a_failing_sink_still_replies_and_its_records_are_counted_lost(
    tmp_path: Path,
) -> None:
    async with serving(gate_settings(tmp_path, publish=True), sink=FailingSink()) as gate:
        status, text, _ = await post(gate, body())
        assert gate.outbox is not None
        for _ in range(200):  # 5 attempts, 50 ms apart
            if gate.outbox.records == 0:
                break
            await asyncio.sleep(0.01)
        lost = gate.outbox.lost
    assert status == 200, text
    assert GateReply.model_validate_json(text).decision is Action.PASS
    assert lost > 0 and len(gate.sensor.decided_replies) == 1


async def test_without_publishing_the_sink_is_not_called(tmp_path: Path) -> None:
    sink = HeldSink()
    sink.release.set()
    async with serving(gate_settings(tmp_path), sink=sink) as gate:
        status, _, _ = await post(gate, body())
    assert status == 200 and sink.published == []


# ------------------------------------------------------------------ budgets kept


async def test_a_full_outbox_answers_at_once_by_policy_and_keeps_no_record(
    tmp_path: Path,
) -> None:
    sink = HeldSink()  # never released: the broker is away
    settings = gate_settings(
        tmp_path, publish=True, policies=[{"tenant": "t", "policy": "fail-closed"}]
    )
    async with serving(settings, sink=sink) as gate, aiohttp.ClientSession() as http:
        assert gate.outbox is not None
        filler = [OutboundRecord("verdicts", b"k", b"v")] * OUTBOX_LIMITS.max_records
        gate.outbox.put(filler)
        status, text, _ = await post(gate, body(), headers(**{"X-Budget-Ms": "5000"}))
        async with http.get(gate.url + "/readyz") as response:
            ready = (response.status, await response.json())
        refused = gate.outbox.refused
        sink.release.set()
    assert status == 200, text
    reply = GateReply.model_validate_json(text)
    assert reply.reason is not None and reply.reason.value == "OUTBOX_FULL"
    assert (reply.decision, reply.verified, reply.policy) == (Action.WITHHOLD, False, "fail-closed")
    assert reply.latency_ms < 1000
    assert refused > 0
    assert ready[0] == 503 and ready[1]["reason"] == "outbox_full"


async def test_a_callers_bodies_beyond_its_share_are_refused_at_once_not_others(
    tmp_path: Path,
) -> None:
    settings = gate_settings(
        tmp_path, max_caller_body_bytes_in_flight=2600, max_body_bytes_in_flight=100_000
    )
    async with serving(settings) as gate:
        held = gate.server._bodies.reserve("app", 2500)  # one of app's bodies in flight
        assert not isinstance(held, str)
        status, text, response = await post(gate, body())
        other_status, other_text, _ = await post(gate, body(tenant="x"), headers(token=OTHER_TOKEN))
        gate.server._bodies.release(held)
        again, _, _ = await post(gate, body())
    refused_with(status, text, "caller_busy", 429)
    assert response.headers["Retry-After"] == "1"
    assert other_status == 200, other_text
    assert again == 200


async def test_latency_counts_from_the_headers_to_the_reply_written(tmp_path: Path) -> None:
    """A body sent slowly counts in ``latency_ms``: the clock starts before it is read."""

    async def slow_body() -> Any:
        data = body()
        yield data[:10]
        await asyncio.sleep(0.3)
        yield data[10:]

    async with serving(gate_settings(tmp_path)) as gate:
        status, text, _ = await post(gate, slow_body())
    assert status == 200, text
    assert GateReply.model_validate_json(text).latency_ms >= 300
    [(observed, _)] = gate.sensor.decided_replies
    assert observed.latency_ms >= 300
