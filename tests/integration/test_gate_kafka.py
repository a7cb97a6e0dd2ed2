"""The gate's Kafka request / reply on real Kafka: a :class:`GateClient` asks, the gate
(service, request loop) answers on the client's reply topic with the same correlation
id, and the answer's verdict is on the verdicts topic once, in the caller's trace; a
malformed request is refused (a ``GateError`` reply and a dead letter, or a dead letter
alone when it has no reply route) and the loop keeps serving; with no gate running the
client decides by its policy at the budget; the HTTP path's record sink publishes a
decision's records and returns once they are acknowledged."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from streamproc.config import Settings
from streamproc.contracts.events import (
    Action,
    AnswerEvent,
    DeadLetter,
    DeadLetterReason,
    UnverifiedReason,
    Verdict,
)
from streamproc.contracts.gate_events import CORRELATION_ID_HEADER, GateError, GateReply
from streamproc.gate.client import GateClient
from streamproc.gate.kafka import GateRequestLoop, KafkaRecordSink
from streamproc.gate.request import GateRequest, http_origin
from streamproc.gate.sensor import NullGateSensor
from streamproc.gate.service import GateService
from streamproc.kafka.publisher import PublishFailed
from streamproc.telemetry.otel import Telemetry
from streamproc.wiring import build_gate, gate_client, gate_request_loop, prepare_topics
from tests.unit.gate.conftest import event

WAIT_S = 25.0
ROOMY_BUDGET_MS = 20_000.0
"""A first request's budget: the loop may still be joining its group."""
CHECK_BUDGET_MS = 5_000.0

SUPPORTED = "Incomplete orders cannot be delivered or billed [D1]."
CHECKED = f"{SUPPORTED} The supplier delivered 80 of 100 pieces [D1]."
"""Trimmed: its second sentence is contradicted by the evidence."""


def _settings(bootstrap: str, **gate: Any) -> Settings:
    run = f"gatek-{uuid.uuid4().hex[:8]}"
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return Settings(
        app_id=run,
        broker_url=f"kafka://{bootstrap}",
        topics={**{name: f"{run}.{name}" for name in names}, "partitions": 1},
        judge={"name": "rules"},
        audit={"topic": f"{run}.audit"},
        alerts={"topic": f"{run}.alerts"},
        review={"queue_topic": f"{run}.review-queue", "labels_topic": f"{run}.labels"},
        labels={"deltas_topic": f"{run}.deltas", "accuracy_topic": f"{run}.accuracy"},
        window={"hopping_topic": f"{run}.hopping", "late_topic": f"{run}.late"},
        gate={
            "requests_topic": f"{run}.gate-requests",
            "replies_topic": f"{run}.gate-replies",
            # Routing and publishing are tested here; tokens and reply-topic rules in
            # test_tenant_isolation_kafka.py.
            "kafka_auth": "none",
            "reply_topic_pattern": rf"{run}\.replies",
            **gate,
        },
        worker={"rebalance_timeout_s": 10.0, "session_timeout_s": 6.0},
    )


def _reply_topic(settings: Settings) -> str:
    return f"{settings.app_id}.replies"


@dataclass
class _Gate:
    service: GateService
    loop: GateRequestLoop
    task: asyncio.Task[None]
    spans: InMemorySpanExporter

    def check_running(self) -> None:
        if self.task.done():
            raise AssertionError(f"the request loop ended: {self.task.exception()!r}")


@asynccontextmanager
async def _gate(settings: Settings) -> AsyncIterator[_Gate]:
    """The gate's Kafka side in this event loop, as ``run_gate`` wires it."""
    spans = InMemorySpanExporter()
    telemetry = Telemetry.from_settings(settings.telemetry, span_exporter=spans)
    service = build_gate(settings, telemetry=telemetry, sensor=NullGateSensor())
    await service.start()
    loop = gate_request_loop(settings, service)
    task = asyncio.create_task(loop.run(), name="gate-requests-loop")
    try:
        yield _Gate(service, loop, task, spans)
    finally:
        loop.stop()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 30)
        await service.close()
        telemetry.shutdown()


@dataclass
class _Seen:
    verdicts: list[tuple[Verdict, dict[str, bytes]]] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)
    replies: list[tuple[bytes | None, dict[str, bytes], bytes]] = field(default_factory=list)


class _Topics:
    """A read_committed reader, from the beginning, of the verdicts, the dead letters and
    the client's reply topic, headers kept."""

    def __init__(self, settings: Settings, *, replies: bool = True) -> None:
        self._settings = settings
        self._consumer = AIOKafkaConsumer(
            settings.topics.verdicts,
            settings.topics.dead_letter,
            *([_reply_topic(settings)] if replies else []),
            bootstrap_servers=settings.bootstrap_servers,
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
            metadata_max_age_ms=1000,
        )
        self.seen = _Seen()

    async def __aenter__(self) -> _Topics:
        await self._consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._consumer.stop()

    async def until(self, done: Callable[[_Seen], bool], what: str, settle_s: float = 0) -> _Seen:
        """Read until ``done``, then ``settle_s`` more (a duplicate would show)."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            await self._poll(0.3)
            if done(self.seen):
                settled = time.monotonic() + settle_s
                while time.monotonic() < settled:
                    await self._poll(0.3)
                return self.seen
        pytest.fail(f"timed out waiting for {what}: {self.seen}", pytrace=False)

    async def _poll(self, timeout_s: float) -> None:
        topics = self._settings.topics
        batch = await self._consumer.getmany(timeout_ms=int(timeout_s * 1000))
        for tp, records in batch.items():
            for record in records:
                headers = {name: raw for name, raw in record.headers or () if raw is not None}
                value = record.value or b""
                if tp.topic == topics.verdicts:
                    self.seen.verdicts.append((Verdict.model_validate_json(value), headers))
                elif tp.topic == topics.dead_letter:
                    self.seen.dead.append(DeadLetter.model_validate_json(value))
                else:
                    self.seen.replies.append((record.key, headers, value))


def _verdicts_of(seen: _Seen, answer_id: str) -> list[tuple[Verdict, dict[str, bytes]]]:
    return [(v, h) for v, h in seen.verdicts if v.answer_id == answer_id]


async def _served(client: GateClient, gate: _Gate) -> None:
    """One request with a roomy budget answered: the loop has joined its group."""
    warm = await client.check(
        _body(event(SUPPORTED, event_id=f"warm-{uuid.uuid4().hex[:6]}")),
        budget_ms=ROOMY_BUDGET_MS,
    )
    gate.check_running()
    assert not warm.by_policy, warm


def _body(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields).encode()


@pytest.mark.parametrize("kafka_reply", ["in-transaction", "immediate"])
async def test_a_request_is_answered_on_the_reply_topic_and_its_verdict_published_once(
    kafka_bootstrap: str, kafka_reply: str
) -> None:
    settings = _settings(kafka_bootstrap, kafka_reply=kafka_reply)
    await prepare_topics(settings)
    trace_id, span_id = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    fields = event(CHECKED, event_id=f"rt-{uuid.uuid4().hex[:6]}")
    async with (
        _gate(settings) as gate,
        gate_client(settings, reply_topic=_reply_topic(settings)) as client,
    ):
        await _served(client, gate)
        decision = await client.check(
            _body(fields), budget_ms=CHECK_BUDGET_MS, traceparent=f"00-{trace_id}-{span_id}-01"
        )
        gate.check_running()
        assert decision.reply is not None, decision
        assert (decision.decision, decision.verified, decision.reason) == (Action.TRIM, True, None)
        assert decision.answer_text == SUPPORTED
        assert decision.reply.verdict.answer_id == fields["answer_id"]
        # decided within the budget less the time kept for the reply's way back
        assert decision.reply.budget_ms == CHECK_BUDGET_MS - settings.gate.reply_reserve_ms
        assert client.dropped == 0

        async with _Topics(settings) as topics:
            seen = await topics.until(
                lambda s: (
                    bool(_verdicts_of(s, fields["answer_id"]))
                    and any(
                        h.get(CORRELATION_ID_HEADER) == decision.correlation_id.encode()
                        for _, h, _ in s.replies
                    )
                ),
                "the verdict and the reply",
                settle_s=1.0,
            )
        # Counted once the broker acknowledged it, which may be after the caller read it.
        immediate = gate.loop._immediate
        assert (immediate.sent if immediate else None) == (
            2 if kafka_reply == "immediate" else None  # the warm-up's and this one's
        )
    [(verdict, headers)] = _verdicts_of(seen, fields["answer_id"])
    assert verdict == decision.reply.verdict
    traceparent = headers["traceparent"].decode()
    assert traceparent.split("-")[1] == trace_id  # the caller's trace, continued
    assert traceparent.split("-")[2] != span_id  # in the decision's own span
    [(key, reply_headers, value)] = [
        r
        for r in seen.replies
        if r[1].get(CORRELATION_ID_HEADER) == decision.correlation_id.encode()
    ]
    assert key == decision.correlation_id.encode()
    assert GateReply.model_validate_json(value) == decision.reply
    assert reply_headers["traceparent"].decode().split("-")[1] == trace_id
    [span] = [
        s
        for s in gate.spans.get_finished_spans()
        if s.context is not None and f"{s.context.trace_id:032x}" == trace_id
    ]
    assert span.attributes is not None
    assert span.attributes["streamproc.gate.decision"] == "trim"


async def test_a_malformed_request_is_refused_and_the_loop_keeps_serving(
    kafka_bootstrap: str,
) -> None:
    settings = _settings(kafka_bootstrap)
    await prepare_topics(settings)
    garbage = b"{not json at all"
    async with (
        _gate(settings) as gate,
        gate_client(settings, reply_topic=_reply_topic(settings)) as client,
    ):
        await _served(client, gate)
        refused = await client.check(garbage, budget_ms=CHECK_BUDGET_MS)
        gate.check_running()
        # The gate said why; the client decides by policy (fail-open by default).
        assert refused.error is not None and refused.error.error == "bad_json", refused
        assert (refused.decision, refused.verified) == (Action.PASS, False)
        assert refused.reason == UnverifiedReason.JUDGE_ERROR
        assert refused.by_policy

        # No reply route at all: a dead letter only, nothing to answer.
        producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers)
        await producer.start()
        try:
            await producer.send_and_wait(
                settings.gate.requests_topic, value=_body(event(SUPPORTED, event_id="no-route"))
            )
        finally:
            await producer.stop()

        fields = event(SUPPORTED, event_id=f"after-{uuid.uuid4().hex[:6]}")
        after = await client.check(_body(fields), budget_ms=CHECK_BUDGET_MS)
        gate.check_running()
        assert after.reply is not None, after
        assert (after.decision, after.verified) == (Action.PASS, True)

        async with _Topics(settings) as topics:
            seen = await topics.until(lambda s: len(s.dead) >= 2, "two dead letters", 1.0)
    bad_json, no_route = sorted(seen.dead, key=lambda letter: letter.offset)
    assert bad_json.reason == DeadLetterReason.BAD_JSON
    assert base64.b64decode(bad_json.value_b64) == garbage
    assert bad_json.topic == settings.gate.requests_topic
    assert no_route.reason == DeadLetterReason.SCHEMA_VIOLATION
    assert "reply-topic and correlation-id" in no_route.error
    errors = [
        GateError.model_validate_json(value)
        for _, headers, value in seen.replies
        if headers.get(CORRELATION_ID_HEADER) == refused.correlation_id.encode()
    ]
    assert errors == [refused.error]
    assert not _verdicts_of(seen, "ans-no-route")
    assert gate.loop.refused == 2


async def test_an_immediate_reply_whose_transaction_fails_is_decided_again_by_the_next_gate(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kafka_reply = "immediate"``: the caller has its reply before the verdict's
    transaction; when that transaction fails the request's offset is not committed, the
    next gate decides it again (a second reply, which the client drops) and its verdict is
    published once - the second decision's."""
    settings = _settings(kafka_bootstrap, kafka_reply="immediate")
    await prepare_topics(settings)
    fields = event(CHECKED, event_id=f"again-{uuid.uuid4().hex[:6]}")
    async with gate_client(settings, reply_topic=_reply_topic(settings)) as client:
        async with _gate(settings) as first:
            await _served(client, first)
            # The warm-up's reply came before its transaction: break publishing only once
            # that has committed (counted), or the warm-up's would fail instead.
            deadline = time.monotonic() + WAIT_S
            while first.loop.answered < 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert first.loop.answered == 1

            async def broker_refuses(*_: Any) -> None:
                raise PublishFailed("transaction not committed: the broker is gone (a test)")

            monkeypatch.setattr(first.loop._publisher, "publish", broker_refuses)
            decision = await client.check(_body(fields), budget_ms=CHECK_BUDGET_MS)
            assert decision.reply is not None and not decision.by_policy, decision
            await asyncio.wait_for(asyncio.gather(first.task, return_exceptions=True), WAIT_S)
            assert isinstance(first.task.exception(), PublishFailed)
        mine = decision.correlation_id.encode()
        async with _gate(settings) as second, _Topics(settings) as topics:
            seen = await topics.until(
                lambda s: (
                    bool(_verdicts_of(s, fields["answer_id"]))
                    and sum(h.get(CORRELATION_ID_HEADER) == mine for _, h, _ in s.replies) == 2
                ),
                "the verdict and a second reply",
                settle_s=1.0,
            )
            second.check_running()
        assert client.dropped >= 1  # the second reply: nobody waits for it any more
    [(verdict, _)] = _verdicts_of(seen, fields["answer_id"])
    acted_on, again = (
        GateReply.model_validate_json(value)
        for _, headers, value in seen.replies
        if headers.get(CORRELATION_ID_HEADER) == mine
    )
    assert acted_on == decision.reply
    assert again.verdict == verdict
    assert again.verdict.answer_id == acted_on.verdict.answer_id


async def test_gates_joining_and_leaving_while_requests_flow_answer_each_once(
    kafka_bootstrap: str,
) -> None:
    """Scale-out and back: a second gate joins the group while requests flow (each gate
    keeps a read pending across the rebalance), then the first stops. Every request is
    answered by a gate, and each answer's verdict is published once."""
    settings = _settings(kafka_bootstrap, kafka_reply="immediate")
    settings = settings.model_copy(
        update={"topics": settings.topics.model_copy(update={"partitions": 2})}
    )
    await prepare_topics(settings)
    ids = [f"scale-{i}-{uuid.uuid4().hex[:6]}" for i in range(50)]
    async with gate_client(settings, reply_topic=_reply_topic(settings)) as client:

        async def ask(event_id: str) -> Any:
            return await client.check(
                _body(event(SUPPORTED, event_id=event_id)), budget_ms=ROOMY_BUDGET_MS
            )

        async with _gate(settings) as first:
            await _served(client, first)
            asked = [asyncio.create_task(ask(ids[i])) for i in range(10)]
            # Another process's transactional id (by default the host name and pid).
            elsewhere = settings.worker.model_copy(update={"instance_id": "second-gate"})
            async with _gate(settings.model_copy(update={"worker": elsewhere})) as second:
                for event_id in ids[10:40]:  # over the second's join (a heartbeat or two)
                    asked.append(asyncio.create_task(ask(event_id)))
                    await asyncio.sleep(0.15)
                first.loop.stop()
                await asyncio.wait_for(asyncio.gather(first.task), WAIT_S)
                for event_id in ids[40:]:
                    asked.append(asyncio.create_task(ask(event_id)))
                decisions = await asyncio.gather(*asked)
                async with _Topics(settings, replies=False) as topics:
                    seen = await topics.until(
                        lambda s: all(_verdicts_of(s, f"ans-{i}") for i in ids),
                        "every request's verdict",
                        settle_s=1.0,
                    )
                second.check_running()
    assert [d for d in decisions if d.by_policy] == []
    # Counted once published: the second gate took a partition while the first still ran
    # (more than the last ten), and the first answered more than its warm-up.
    assert first.loop.answered >= 2 and second.loop.answered > 10
    assert {i: len(_verdicts_of(seen, f"ans-{i}")) for i in ids} == dict.fromkeys(ids, 1)


@pytest.mark.parametrize(
    ("tenant", "decision", "text"),
    [("open", Action.PASS, SUPPORTED), ("strict", Action.WITHHOLD, "")],
)
async def test_with_no_gate_running_the_client_decides_by_policy_at_the_budget(
    kafka_bootstrap: str, tenant: str, decision: Action, text: str
) -> None:
    settings = _settings(
        kafka_bootstrap,
        policy="fail-open",
        policies=[{"tenant": "strict", "policy": "fail-closed"}],
    )
    await prepare_topics(settings)
    async with gate_client(settings, reply_topic=_reply_topic(settings)) as client:
        decided = await client.check(_body(event(SUPPORTED, tenant=tenant)), budget_ms=300.0)
    assert decided.by_policy and decided.error is None
    assert (decided.decision, decided.verified) == (decision, False)
    assert decided.reason == UnverifiedReason.BUDGET_EXCEEDED
    assert decided.answer_text == text


async def test_the_record_sink_publishes_a_decisions_records_before_it_returns(
    kafka_bootstrap: str,
) -> None:
    settings = _settings(kafka_bootstrap)
    await prepare_topics(settings)
    telemetry = Telemetry.disabled()
    service = build_gate(settings, telemetry=telemetry, sensor=NullGateSensor())
    await service.start()
    sink = KafkaRecordSink(settings.bootstrap_servers)
    await sink.start()
    fields = event(CHECKED, event_id=f"http-{uuid.uuid4().hex[:6]}")
    body = _body(fields)
    try:
        answer = service.parse(body)
        assert isinstance(answer, AnswerEvent), answer
        result = await service.check(
            GateRequest(
                body=body,
                answer=answer,
                budget_ms=CHECK_BUDGET_MS,
                arrived=time.monotonic(),
                origin=http_origin(),
            )
        )
        await sink.publish(result.records)
        await sink.publish([])  # nothing to send: returns at once
    finally:
        await sink.stop()
        await service.close()
    async with _Topics(settings, replies=False) as topics:
        seen = await topics.until(lambda s: bool(_verdicts_of(s, fields["answer_id"])), "verdict")
    [(verdict, _)] = _verdicts_of(seen, fields["answer_id"])
    assert verdict == result.reply.verdict
    assert verdict.judgement.action == Action.TRIM
