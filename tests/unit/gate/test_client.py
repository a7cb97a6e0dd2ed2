"""The gate's Kafka client without a broker (aiokafka's clients replaced by an in-memory
pair): what a request carries, a reply matched by its correlation id, and the policy
applied by the client itself when no usable reply comes in time - fail-open passes the
whole answer unverified, fail-closed withholds it; never a wait past the budget."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiokafka.structs import TopicPartition

import streamproc.gate.client as client_module
from streamproc.config import Settings
from streamproc.contracts.events import Action, AnswerEvent, UnverifiedReason, Verdict
from streamproc.contracts.gate_events import GateError, GateReply
from streamproc.gate.client import GateClient, budget_header
from streamproc.wiring import gate_client
from tests.unit.gate.conftest import event

EXAMPLES = Path(__file__).resolve().parents[3] / "schemas" / "examples"
REPLIES = "caller.replies"
ANSWER = "Incomplete orders cannot be delivered or billed [D1]."
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@dataclass
class Sent:
    topic: str
    value: bytes
    key: bytes
    headers: dict[str, bytes]


@dataclass
class Broker:
    """What the fake clients share: the topics, what was sent, and a gate (``respond``:
    the request sent -> the reply records, as (headers, value))."""

    topics: set[str] = field(default_factory=lambda: {"groundedness.gate-requests"})
    sent: list[Sent] = field(default_factory=list)
    replies: asyncio.Queue[tuple[list[tuple[str, bytes]], bytes]] = field(
        default_factory=asyncio.Queue
    )
    respond: Callable[[Sent], list[tuple[list[tuple[str, bytes]], bytes]]] = lambda _: []
    send_error: Exception | None = None
    created: list[str] = field(default_factory=list)


class FakeProducer:
    def __init__(self, broker: Broker, **options: Any) -> None:
        self.broker, self.options = broker, options

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def partitions_for(self, topic: str) -> set[int]:
        assert topic in self.broker.topics
        return {0}

    async def send_and_wait(
        self, topic: str, *, value: bytes, key: bytes, headers: list[tuple[str, bytes]]
    ) -> None:
        if self.broker.send_error is not None:
            raise self.broker.send_error
        sent = Sent(topic, value, key, dict(headers))
        self.broker.sent.append(sent)
        for reply in self.broker.respond(sent):
            self.broker.replies.put_nowait(reply)


@dataclass
class FakeRecord:
    headers: list[tuple[str, bytes]]
    value: bytes


class FakeConsumer:
    def __init__(self, broker: Broker, **options: Any) -> None:
        self.broker, self.options = broker, options
        self.assigned: list[TopicPartition] = []

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def topics(self) -> set[str]:
        return set(self.broker.topics)

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned = partitions

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        pass

    async def position(self, tp: TopicPartition) -> int:
        return 0

    async def getmany(self, timeout_ms: int) -> dict[TopicPartition, list[FakeRecord]]:
        try:
            headers, value = await asyncio.wait_for(self.broker.replies.get(), timeout_ms / 1000)
        except TimeoutError:
            return {}
        return {TopicPartition(REPLIES, 0): [FakeRecord(headers, value)]}


@pytest.fixture()
def broker(monkeypatch: pytest.MonkeyPatch) -> Broker:
    shared = Broker()

    async def ensure_topics(bootstrap: str, specs: list[Any], security: Any) -> list[str]:
        del bootstrap, security
        names = [spec.name for spec in specs if spec.name not in shared.topics]
        shared.topics.update(names)
        shared.created += names
        return names

    monkeypatch.setattr(client_module, "AIOKafkaProducer", lambda **o: FakeProducer(shared, **o))
    monkeypatch.setattr(client_module, "AIOKafkaConsumer", lambda **o: FakeConsumer(shared, **o))
    monkeypatch.setattr(client_module, "ensure_topics", ensure_topics)
    monkeypatch.setattr(client_module, "_METADATA_WAIT_S", 0.0)
    return shared


@pytest.fixture()
async def client(broker: Broker) -> AsyncIterator[GateClient]:
    async with GateClient("kafka:9092", reply_topic=REPLIES) as started:
        yield started


def _body(answer: str = ANSWER, **extra: Any) -> bytes:
    return json.dumps(event(answer, **extra)).encode()


def _reply(sent: Sent, decision: Action = Action.PASS) -> GateReply:
    answer = AnswerEvent.model_validate_json(sent.value)
    verdict = Verdict.model_validate(
        json.loads((EXAMPLES / "verdict.json").read_text())
        | {"event_id": answer.event_id, "answer_id": answer.answer_id}
    )
    return GateReply(
        decision=decision,
        verified=True,
        answer_text=answer.answer if decision == Action.PASS else "",
        verdict=verdict,
        latency_ms=12.0,
        budget_ms=float(sent.headers["x-budget-ms"]),
        policy="fail-open",
    )


def _answering(value: Callable[[Sent], bytes]) -> Callable[[Sent], list[Any]]:
    """A gate replying ``value(request)`` with the request's correlation id."""
    return lambda sent: [([("correlation-id", sent.headers["correlation-id"])], value(sent))]


async def test_a_request_carries_its_route_budget_and_trace_and_the_reply_decides(
    broker: Broker, client: GateClient
) -> None:
    broker.respond = _answering(
        lambda sent: _reply(sent, Action.WITHHOLD).model_dump_json().encode()
    )
    body = _body()
    decision = await client.check(body, budget_ms=250, traceparent=TRACEPARENT)

    [sent] = broker.sent
    assert sent.topic == "groundedness.gate-requests"
    assert sent.value == body  # the bytes as given, exactly
    assert sent.key == decision.correlation_id.encode()
    assert sent.headers == {
        "reply-topic": REPLIES.encode(),
        "correlation-id": decision.correlation_id.encode(),
        "x-budget-ms": b"250",
        "traceparent": TRACEPARENT.encode(),
    }
    assert not decision.by_policy and decision.reply is not None
    assert (decision.decision, decision.verified, decision.reason) == (Action.WITHHOLD, True, None)
    assert decision.answer_text == ""
    assert decision.error is None
    assert client.dropped == 0


async def test_an_answer_event_is_sent_as_on_the_answers_topic(
    broker: Broker, client: GateClient
) -> None:
    broker.respond = _answering(lambda sent: _reply(sent).model_dump_json().encode())
    answer = AnswerEvent.model_validate_json(_body())
    decision = await client.check(answer, budget_ms=1000)
    assert broker.sent[0].value == answer.model_dump_json(exclude_none=True).encode()
    assert "traceparent" not in broker.sent[0].headers
    assert decision.answer_text == ANSWER


@pytest.mark.parametrize(
    ("policy", "decision", "text"),
    [("fail-open", Action.PASS, ANSWER), ("fail-closed", Action.WITHHOLD, "")],
)
async def test_no_reply_within_the_budget_decides_by_policy(
    broker: Broker, policy: Any, decision: Action, text: str
) -> None:
    async with GateClient("kafka:9092", reply_topic=REPLIES, policy=policy) as client:
        decided = await client.check(_body(), budget_ms=50)
    assert decided.by_policy and decided.error is None
    assert (decided.decision, decided.verified) == (decision, False)
    assert decided.reason == UnverifiedReason.BUDGET_EXCEEDED
    assert decided.answer_text == text


async def test_the_policy_can_be_the_tenants(broker: Broker) -> None:
    settings = Settings(
        gate={"policy": "fail-open", "policies": [{"tenant": "strict", "policy": "fail-closed"}]}
    )
    async with gate_client(settings, reply_topic=REPLIES) as client:
        strict = await client.check(_body(tenant="strict"), budget_ms=30)
        easy = await client.check(_body(tenant="easy"), budget_ms=30)
    assert (strict.decision, easy.decision) == (Action.WITHHOLD, Action.PASS)
    assert broker.sent[0].topic == settings.gate.requests_topic


async def test_a_request_that_cannot_be_sent_decides_by_policy_at_once(
    broker: Broker, client: GateClient
) -> None:
    broker.send_error = ConnectionError("broker away")
    decided = await client.check(_body(), budget_ms=60_000)  # not waited for
    assert decided.by_policy
    assert (decided.decision, decided.verified) == (Action.PASS, False)
    assert decided.reason == UnverifiedReason.JUDGE_ERROR


async def test_a_refusal_decides_by_policy_with_the_gates_error(
    broker: Broker, client: GateClient
) -> None:
    refusal = GateError(error="bad_json", detail="request body is not JSON")
    broker.respond = _answering(lambda _: refusal.model_dump_json().encode())
    decided = await client.check(b"{not json", budget_ms=1000)
    assert decided.by_policy and decided.error == refusal
    assert decided.reason == UnverifiedReason.JUDGE_ERROR
    # Nothing readable to pass: fail-open sends what it can find, here nothing.
    assert (decided.decision, decided.answer_text) == (Action.PASS, "")


async def test_an_unreadable_reply_decides_by_policy(broker: Broker, client: GateClient) -> None:
    broker.respond = _answering(lambda _: b"not a reply")
    decided = await client.check(_body(), budget_ms=1000)
    assert decided.by_policy and decided.error is None
    assert decided.reason == UnverifiedReason.JUDGE_ERROR
    assert decided.answer_text == ANSWER


async def test_replies_for_other_requests_are_dropped(broker: Broker, client: GateClient) -> None:
    def respond(sent: Sent) -> list[Any]:
        mine = _reply(sent).model_dump_json().encode()
        return [
            ([("correlation-id", b"another-clients-id")], mine),
            ([], mine),  # no correlation id at all
            ([("correlation-id", sent.headers["correlation-id"])], mine),
        ]

    broker.respond = respond
    decided = await client.check(_body(), budget_ms=1000)
    assert decided.reply is not None
    assert client.dropped == 2


async def test_a_reply_after_the_budget_is_dropped(broker: Broker, client: GateClient) -> None:
    decided = await client.check(_body(), budget_ms=20)
    assert decided.by_policy
    late = _reply(broker.sent[0]).model_dump_json().encode()
    broker.replies.put_nowait(([("correlation-id", decided.correlation_id.encode())], late))

    async def dropped() -> None:
        while client.dropped == 0:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(dropped(), 10)
    assert client.dropped == 1


def test_a_partial_body_still_names_its_tenant_and_text() -> None:
    body = json.dumps({"tenant": "strict", "answer": "Hello there."}).encode()
    assert client_module._tenant_and_text(body) == ("strict", "Hello there.")
    assert client_module._tenant_and_text(b"[1, 2]") == ("", "")
    assert client_module._tenant_and_text(b"\xff") == ("", "")
    assert client_module._tenant_and_text(b'{"tenant": 3, "answer": null}') == ("", "")


async def test_the_reply_topic_is_created_and_read_from_its_end(broker: Broker) -> None:
    async with GateClient("kafka:9092", reply_topic="mine.replies") as client:
        consumer = client._consumer
        assert isinstance(consumer, FakeConsumer)
        assert consumer.assigned == [TopicPartition("mine.replies", 0)]
        assert consumer.options["isolation_level"] == "read_committed"
        assert consumer.options["group_id"] is None
    assert broker.created == ["mine.replies"]


async def test_a_missing_reply_topic_not_to_be_created_fails_the_start(broker: Broker) -> None:
    client = GateClient("kafka:9092", reply_topic="nobody.replies", create_reply_topic=False)
    with pytest.raises(RuntimeError, match=r"'nobody\.replies' does not exist"):
        await client.start()
    assert broker.created == []


async def test_misuse_is_refused(broker: Broker, client: GateClient) -> None:
    with pytest.raises(ValueError, match="positive"):
        await client.check(_body(), budget_ms=0)
    with pytest.raises(RuntimeError, match="before start"):
        await GateClient("kafka:9092").check(_body(), budget_ms=10)


@pytest.mark.parametrize(
    ("budget_ms", "header"),
    [(300, "300"), (0.5, "0.5"), (12.3456, "12.346"), (1_500_000, "1500000"), (1e-7, "0.001")],
)
def test_the_budget_header_is_plain_decimal_milliseconds(budget_ms: float, header: str) -> None:
    assert budget_header(budget_ms) == header
