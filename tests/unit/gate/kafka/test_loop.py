"""The gate's request loop without a broker: how each request record becomes a checked
request or a refusal (a dead letter, with a ``GateError`` reply where it has a reply
route), and the records one batch sends - the reply keyed and headed by the caller's
correlation id, in the caller's trace, next to the answer's monitored records."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from aiokafka import ConsumerRecord
from aiokafka.structs import TopicPartition

from streamproc.config import Settings
from streamproc.contracts.events import (
    Action,
    DeadLetter,
    DeadLetterReason,
    UnverifiedReason,
    Verdict,
)
from streamproc.contracts.gate_events import GateError, GateErrorCode, GateReply
from streamproc.gate.kafka.loop import MAX_CORRELATION_ID_BYTES, GateRequestLoop
from streamproc.gate.kafka.reply_topics import ReplyTopics
from streamproc.gate.service import GateService
from streamproc.telemetry.otel import Telemetry
from streamproc.verdicts.record import OutboundRecord
from streamproc.wiring import build_gate, gate_request_loop, gate_service
from tests.unit.gate.conftest import SlowScorer, event, settings, slow_nli

REQUESTS = "groundedness.gate-requests"
REPLIES = "gate.replies.caller"
CORRELATION = b"4bf92f3577b34da6a3ce929d0e0e4736"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE_ID}-b7ad6b7169203331-01"
ANSWER = "Incomplete orders cannot be delivered or billed [D1]."
Headers = Sequence[tuple[str, bytes]]


class Recorder:
    """A gate sensor remembering what the loop told it."""

    def __init__(self) -> None:
        self.decisions: list[GateReply] = []
        self.refusals: list[GateErrorCode] = []

    def decided(self, reply: GateReply, *, path: str) -> None:
        assert path == "kafka"
        self.decisions.append(reply)

    def streams(self, count: int) -> None:
        del count

    def pending(self, count: int) -> None:
        del count

    def judged(self, batch_size: int, judge_ms: float) -> None:
        del batch_size, judge_ms

    def refused(self, code: GateErrorCode, *, path: str) -> None:
        assert path == "kafka"
        self.refusals.append(code)

    def publish_failed(self, *, path: str) -> None:
        del path

    def trace_context_dropped(self, header: str, reason: str, *, path: str) -> None:
        del header, reason, path


NO_TOKENS = {"kafka_auth": "none"}
"""These tests are about routing and publishing; tokens: tests/unit/gate/kafka/test_access.py."""
SETTINGS = Settings(judge={"name": "rules"}, gate=NO_TOKENS)


@pytest.fixture(scope="module")
async def service() -> AsyncIterator[GateService]:
    gate = build_gate(SETTINGS, telemetry=Telemetry.disabled(), sensor=Recorder())
    await gate.start()
    yield gate
    await gate.close()


def _loop(service: GateService, settings: Settings = SETTINGS, **options: Any) -> GateRequestLoop:
    loop = gate_request_loop(settings, service, **options)

    async def cluster() -> set[str]:
        return {REQUESTS, REPLIES}

    loop.reply_topics = ReplyTopics(cluster)
    return loop


def _headers(
    *,
    reply_topic: bytes | None = REPLIES.encode(),
    correlation: bytes | None = CORRELATION,
    budget: bytes | None = b"5000",
    traceparent: bytes | None = TRACEPARENT.encode(),
) -> list[tuple[str, bytes]]:
    named = {
        "reply-topic": reply_topic,
        "correlation-id": correlation,
        "x-budget-ms": budget,
        "traceparent": traceparent,
    }
    return [(name, value) for name, value in named.items() if value is not None]


def _record(
    value: bytes | None,
    headers: Headers,
    *,
    offset: int = 7,
    timestamp_ms: int | None = None,
    partition: int = 0,
) -> ConsumerRecord[bytes, bytes]:
    stamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return ConsumerRecord(
        REQUESTS, partition, offset, stamp, 0, b"k", value, None, 0, len(value or b""),
        list(headers),
    )  # fmt: skip


def _body(answer: str = ANSWER, **extra: Any) -> bytes:
    return json.dumps(event(answer, **extra)).encode()


async def _outbound(
    loop: GateRequestLoop, *records: ConsumerRecord[bytes, bytes]
) -> list[OutboundRecord]:
    return loop.outbound(await loop.handle(records))


def _replies(records: Sequence[OutboundRecord]) -> list[OutboundRecord]:
    return [record for record in records if record.topic == REPLIES]


def _dead(records: Sequence[OutboundRecord]) -> list[DeadLetter]:
    dead = SETTINGS.topics.dead_letter
    return [DeadLetter.model_validate_json(r.value or b"") for r in records if r.topic == dead]


def _header(record: OutboundRecord, name: str) -> bytes | None:
    return next((value for key, value in record.headers if key == name), None)


async def test_a_request_gets_a_reply_keyed_by_its_correlation_id_beside_its_verdict(
    service: GateService,
) -> None:
    loop = _loop(service)
    records = await _outbound(loop, _record(_body(), _headers()))

    [reply] = _replies(records)
    assert reply.key == CORRELATION
    assert _header(reply, "correlation-id") == CORRELATION
    assert [key for key, _ in reply.headers].count("correlation-id") == 1
    traceparent = _header(reply, "traceparent")
    assert traceparent is not None and traceparent.decode().split("-")[1] == TRACE_ID
    decided = GateReply.model_validate_json(reply.value or b"")
    assert (decided.decision, decided.verified, decided.answer_text) == (Action.PASS, True, ANSWER)
    assert decided.budget_ms == 5000 - SETTINGS.gate.reply_reserve_ms  # kept for the reply
    [verdict_record] = [r for r in records if r.topic == SETTINGS.topics.verdicts]
    assert Verdict.model_validate_json(verdict_record.value or b"") == decided.verdict
    assert _header(verdict_record, "traceparent") == traceparent
    assert _dead(records) == []


async def test_headers_are_found_whatever_their_case_and_the_budget_defaults(
    service: GateService,
) -> None:
    headers = [(name.upper(), value) for name, value in _headers(budget=None, traceparent=None)]
    [reply] = _replies(await _outbound(_loop(service), _record(_body(), headers)))
    decided = GateReply.model_validate_json(reply.value or b"")
    assert decided.budget_ms == SETTINGS.gate.default_budget_ms - SETTINGS.gate.reply_reserve_ms
    assert _header(reply, "traceparent") is None  # no caller's trace to continue


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ([], "without the reply-topic and correlation-id header"),
        (_headers(correlation=None), "without the correlation-id header"),
        (_headers(reply_topic=None), "without the reply-topic header"),
        (_headers(correlation=b""), "correlation-id header of 0 bytes"),
        (
            _headers(correlation=b"x" * (MAX_CORRELATION_ID_BYTES + 1)),
            f"correlation-id header of {MAX_CORRELATION_ID_BYTES + 1} bytes",
        ),
        (_headers(reply_topic=b"no spaces allowed"), "is not a legal Kafka topic name"),
        (_headers(reply_topic=b"__consumer_offsets"), "is an internal topic"),
        (
            _headers(reply_topic=b"gate.replies.nobody-made-this"),
            "'gate.replies.nobody-made-this' does not exist",
        ),
    ],
)
async def test_a_request_without_a_usable_reply_route_is_a_dead_letter_only(
    service: GateService, headers: list[tuple[str, bytes]], says: str
) -> None:
    loop = _loop(service)
    body = _body()
    records = await _outbound(loop, _record(body, headers))

    assert _replies(records) == []
    [letter] = _dead(records)
    assert letter.reason == DeadLetterReason.SCHEMA_VIOLATION
    assert says in letter.error and "no reply possible" in letter.error
    assert base64.b64decode(letter.value_b64) == body
    assert (letter.topic, letter.partition, letter.offset) == (REQUESTS, 0, 7)
    assert not any(r.topic == SETTINGS.topics.verdicts for r in records)  # nothing judged


@pytest.mark.parametrize(
    ("body", "budget", "code", "reason"),
    [
        (b"{not json", b"5000", "bad_json", DeadLetterReason.BAD_JSON),
        (b'{"answer": "no ids"}', b"5000", "schema_violation", DeadLetterReason.SCHEMA_VIOLATION),
        (None, b"5000", "bad_json", DeadLetterReason.BAD_JSON),
        (_body(), b"soon", "bad_budget", DeadLetterReason.SCHEMA_VIOLATION),
        (_body(), b"0", "bad_budget", DeadLetterReason.SCHEMA_VIOLATION),
        (_body(), b"-5", "bad_budget", DeadLetterReason.SCHEMA_VIOLATION),
        (_body(), b"nan", "bad_budget", DeadLetterReason.SCHEMA_VIOLATION),
    ],
)
async def test_a_bad_request_with_a_reply_route_gets_a_gate_error_and_a_dead_letter(
    service: GateService,
    body: bytes | None,
    budget: bytes,
    code: str,
    reason: DeadLetterReason,
) -> None:
    sensor = Recorder()
    loop = _loop(service, sensor=sensor)
    handled = await loop.handle([_record(body, _headers(budget=budget))])
    records = loop.outbound(handled)

    [reply] = _replies(records)
    assert reply.key == CORRELATION and _header(reply, "correlation-id") == CORRELATION
    error = GateError.model_validate_json(reply.value or b"")
    assert error.error == code
    assert "\n" not in error.detail
    [letter] = _dead(records)
    assert letter.reason == reason
    assert base64.b64decode(letter.value_b64) == (body or b"")
    loop._committed(handled)  # what the loop does once the batch's transaction is in
    assert (loop.answered, loop.refused, sensor.refusals) == (0, 1, [code])


async def test_a_dead_letter_without_a_route_is_counted_by_its_code(service: GateService) -> None:
    sensor = Recorder()
    loop = _loop(service, sensor=sensor)
    handled = await loop.handle([_record(_body(), []), _record(_body(), _headers(), offset=8)])
    loop._committed(handled)
    assert (loop.answered, loop.refused) == (1, 1)
    assert sensor.refusals == ["schema_violation"]
    assert [reply.decision for reply in sensor.decisions] == [Action.PASS]


async def test_a_request_older_than_its_budget_is_answered_at_once_by_policy() -> None:
    # A judge with a model stage: the cheap checks alone cannot verify the answer.
    nli = gate_service(settings(), slow_nli(SlowScorer()))
    await nli.start()
    now_s = time.time()
    loop = _loop(nli, clock=lambda: now_s)
    produced_ms = int((now_s - 60) * 1000)  # a minute on the topic; budget 5 s
    [reply] = _replies(
        await _outbound(loop, _record(_body(), _headers(), timestamp_ms=produced_ms))
    )
    await nli.close()
    decided = GateReply.model_validate_json(reply.value or b"")
    assert decided.verified is False
    assert decided.reason == UnverifiedReason.BUDGET_EXCEEDED
    assert decided.decision == Action.PASS  # fail-open, the default policy


async def test_a_batch_keeps_its_order_and_each_request_pays_only_for_itself(
    service: GateService,
) -> None:
    loop = _loop(service)
    second = CORRELATION[::-1]
    records = await _outbound(
        loop,
        _record(_body(event_id="a"), _headers(), offset=1),
        _record(b"[]", _headers(), offset=2),
        _record(_body(event_id="b"), _headers(correlation=second), offset=3),
    )
    replies = _replies(records)
    assert [r.key for r in replies] == [CORRELATION, CORRELATION, second]
    first, refused, third = (json.loads(r.value or b"") for r in replies)
    assert first["verdict"]["event_id"] == "a" and third["verdict"]["event_id"] == "b"
    assert refused["error"] == "schema_violation"
    assert [letter.offset for letter in _dead(records)] == [2]


async def test_a_check_that_raises_refuses_its_request_alone(
    service: GateService, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = _loop(service)
    real = service.check

    async def check(request: Any) -> Any:
        if request.answer.event_id == "boom":
            raise RuntimeError("a bug")
        return await real(request)

    monkeypatch.setattr(service, "check", check)
    records = await _outbound(
        loop,
        _record(_body(event_id="boom"), _headers(), offset=1),
        _record(_body(event_id="fine"), _headers(), offset=2),
    )
    broken, fine = (json.loads(r.value or b"") for r in _replies(records))
    assert broken == {"error": "not_ready", "detail": "the gate could not decide"}
    assert fine["verdict"]["event_id"] == "fine"
    [letter] = _dead(records)
    assert letter.reason == DeadLetterReason.PROCESSING_ERROR and letter.offset == 1


async def test_a_reply_too_large_for_its_topic_becomes_an_oversized_error(
    service: GateService,
) -> None:
    small = Settings(
        judge={"name": "rules"}, topics={"output_max_message_bytes": 64 * 1024}, gate=NO_TOKENS
    )
    long_answer = " ".join([ANSWER] * 800)  # a verdict of ~800 claims
    loop = _loop(service, small)
    [reply] = _replies(await _outbound(loop, _record(_body(long_answer), _headers())))
    error = GateError.model_validate_json(reply.value or b"")
    assert error.error == "oversized"
    assert "ans-e1" in error.detail
    assert len(reply.value or b"") < 64 * 1024


def _request(
    event_id: str, *, offset: int, budget: bytes = b"5000", partition: int = 0
) -> ConsumerRecord[bytes, bytes]:
    """A gate request for the answer ``event_id``, with a correlation id of its own."""
    headers = _headers(budget=budget, correlation=f"c-{event_id}".encode())
    return _record(_body(event_id=event_id), headers, offset=offset, partition=partition)


class _TimedConsumer:
    """Hands out each batch once its time (monotonic, from the start) has come."""

    def __init__(self, batches: Sequence[tuple[float, list[ConsumerRecord[bytes, bytes]]]]) -> None:
        self._started = time.monotonic()
        self._batches = list(batches)
        self.reads = 0
        self.handed_out_after_s: list[float] = []
        """For each batch handed out, how long after its time it was."""

    async def getmany(
        self, *_: Any, timeout_ms: int, max_records: int
    ) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]:
        del max_records
        self.reads += 1
        if not self._batches:
            await asyncio.sleep(timeout_ms / 1000)
            return {}
        due, records = self._batches[0]
        wait = self._started + due - time.monotonic()
        if wait > timeout_ms / 1000:
            await asyncio.sleep(timeout_ms / 1000)
            return {}
        await asyncio.sleep(max(0.0, wait))
        self._batches.pop(0)
        self.handed_out_after_s.append(time.monotonic() - self._started - due)
        batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {}
        for record in records:
            batch.setdefault(TopicPartition(REQUESTS, record.partition), []).append(record)
        return batch


class _Publisher:
    """Records each transaction; each takes ``delay_s``."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.published: list[tuple[list[OutboundRecord], dict[TopicPartition, int]]] = []
        self.delay_s = delay_s

    async def publish(
        self, records: Sequence[OutboundRecord], offsets: dict[TopicPartition, int]
    ) -> None:
        await asyncio.sleep(self.delay_s)
        self.published.append((list(records), dict(offsets)))


def _replied(publisher: _Publisher) -> list[list[GateReply]]:
    """Each transaction's replies."""
    return [
        [GateReply.model_validate_json(r.value or b"") for r in _replies(records)]
        for records, _ in publisher.published
    ]


async def _run_step(
    loop: GateRequestLoop,
    service: GateService,
    batches: Sequence[tuple[float, list[ConsumerRecord[bytes, bytes]]]],
    publisher: _Publisher,
) -> None:
    loop._consumer = _TimedConsumer(batches)
    loop._publisher = publisher  # type: ignore[assignment]
    loop._assigned = True
    try:
        await loop._step()
    finally:
        if loop._read is not None:  # the next batch's read: there is none
            loop._read.cancel()
            await asyncio.gather(loop._read, return_exceptions=True)
        await service.close()


async def _slow_gate(delay_s: float) -> GateService:
    """A started gate whose model takes ``delay_s`` per call (after its warm-up)."""
    scorer = SlowScorer()
    service = gate_service(settings(), slow_nli(scorer))
    await service.start()
    scorer.delay_s = delay_s
    return service


@pytest.mark.timing  # asserts a budget as measured: .ci/run runs these alone
async def test_a_request_read_behind_a_slow_one_is_decided_within_its_own_budget() -> None:
    """The loop reads on while a batch is decided: a request with a short budget, read
    50 ms after one whose judging takes 400 ms, is decided within its 200 ms (by policy,
    the judge being busy) rather than read once the first is published, already too old.
    Replies still publish in offset order, each offset once."""
    nli = await _slow_gate(0.4)
    publisher = _Publisher()
    slow, short = _request("slow", offset=1), _request("short", offset=2, budget=b"200")
    await _run_step(_loop(nli), nli, [(0.0, [slow]), (0.05, [short])], publisher)
    replies = [reply for replies in _replied(publisher) for reply in replies]
    assert [r.verdict.event_id for r in replies] == ["slow", "short"]
    first, second = replies
    assert first.verified and first.latency_ms >= 400
    assert second.latency_ms < 200 and not second.verified
    committed = [offsets[TopicPartition(REQUESTS, 0)] for _, offsets in publisher.published]
    assert committed[-1] == 3 and committed == sorted(committed)


async def test_a_request_decided_early_is_published_before_a_slow_one_read_after_it() -> None:
    """Two requests read together on one partition: the first, with a short budget, is
    published as soon as it is decided - not when the slow one after it is."""
    nli = await _slow_gate(0.4)
    publisher = _Publisher()
    short, slow = _request("short", offset=1, budget=b"200"), _request("slow", offset=2)
    await _run_step(_loop(nli), nli, [(0.0, [short, slow])], publisher)
    first, second = _replied(publisher)
    assert [r.verdict.event_id for r in first] == ["short"]
    assert [r.verdict.event_id for r in second] == ["slow"]
    assert not first[0].verified and second[0].verified
    offsets = [o[TopicPartition(REQUESTS, 0)] for _, o in publisher.published]
    assert offsets == [2, 3]


@pytest.mark.timing  # asserts time as measured: .ci/run runs these alone
async def test_a_request_on_another_partition_is_not_held_behind_a_slow_one() -> None:
    nli = await _slow_gate(0.4)
    publisher = _Publisher()
    slow = _request("slow", offset=1)
    other = _request("other", offset=1, budget=b"200", partition=1)
    await _run_step(_loop(nli), nli, [(0.0, [slow]), (0.05, [other])], publisher)
    first, second = _replied(publisher)
    assert [r.verdict.event_id for r in first] == ["other"]
    assert first[0].latency_ms < 200
    assert [r.verdict.event_id for r in second] == ["slow"]
    assert publisher.published[0][1] == {TopicPartition(REQUESTS, 1): 2}
    assert publisher.published[1][1] == {TopicPartition(REQUESTS, 0): 2}


@pytest.mark.timing  # asserts time as measured: .ci/run runs these alone
async def test_the_loop_waits_for_requests_rather_than_polling_while_one_is_judged() -> None:
    """While a request is judged for 400 ms the loop has one read pending, which the
    next request wakes: a handful of reads, not one every few milliseconds, and the
    second request is taken as soon as it comes."""
    nli = await _slow_gate(0.4)
    publisher = _Publisher()
    first, second = _request("first", offset=1), _request("second", offset=2)
    loop = _loop(nli)
    await _run_step(loop, nli, [(0.0, [first]), (0.1, [second])], publisher)
    consumer = loop._consumer
    assert isinstance(consumer, _TimedConsumer)
    assert [r.verdict.event_id for replies in _replied(publisher) for r in replies] == [
        "first",
        "second",
    ]
    assert consumer.reads <= 6  # the first, the second, empty reads of up to 200 ms
    assert max(consumer.handed_out_after_s) < 0.05


@pytest.mark.timing  # asserts time as measured: .ci/run runs these alone
async def test_requests_read_during_a_transaction_are_checked_at_once() -> None:
    """A request arriving while the previous reply's transaction is under way starts
    being judged then, not once the transaction ends."""
    nli = await _slow_gate(0.0)
    publisher = _Publisher(delay_s=0.3)
    first, second = _request("first", offset=1), _request("second", offset=2)
    await _run_step(_loop(nli), nli, [(0.0, [first]), (0.1, [second])], publisher)
    replies = [reply for replies in _replied(publisher) for reply in replies]
    assert [r.verdict.event_id for r in replies] == ["first", "second"]
    assert replies[1].verified
    assert replies[1].latency_ms < 250  # read at 0.1 s, during the 0.3 s transaction
    offsets = [o[TopicPartition(REQUESTS, 0)] for _, o in publisher.published]
    assert offsets == [2, 3]


class _AtOnce:
    """Stands in for ImmediateReplies: remembers each reply and when it was sent;
    ``accepts`` False: every send fails (the broker did not acknowledge it)."""

    def __init__(self, *, accepts: bool = True) -> None:
        self.accepts = accepts
        self.sent: list[tuple[float, GateReply | GateError]] = []

    async def send(self, record: OutboundRecord) -> bool:
        assert record.topic == REPLIES and record.key == _header(record, "correlation-id")
        value = json.loads(record.value or b"")
        decoded = GateError.model_validate(value) if "error" in value else GateReply(**value)
        self.sent.append((time.monotonic(), decoded))
        return self.accepts


IMMEDIATE = Settings(judge={"name": "rules"}, gate={"kafka_reply": "immediate", **NO_TOKENS})


def _immediate(service: GateService, at_once: _AtOnce, **options: Any) -> GateRequestLoop:
    loop = _loop(service, IMMEDIATE, **options)
    loop._immediate = at_once  # type: ignore[assignment]
    return loop


async def test_an_immediate_reply_goes_out_on_its_own_and_the_verdict_in_the_transaction(
    service: GateService,
) -> None:
    at_once = _AtOnce()
    loop = _immediate(service, at_once)
    records = await _outbound(
        loop,
        _record(_body(event_id="good"), _headers(), offset=1),
        _record(b"{not json", _headers(correlation=b"c-bad"), offset=2),
    )
    assert _replies(records) == []  # both sent already
    [refused] = [reply for _, reply in at_once.sent if isinstance(reply, GateError)]
    [replied] = [reply for _, reply in at_once.sent if isinstance(reply, GateReply)]
    assert replied.verdict.event_id == "good"
    assert replied.budget_ms == 5000 - 50  # the immediate reply's reserve
    assert refused.error == "bad_json"
    [verdict] = [r for r in records if r.topic == SETTINGS.topics.verdicts]
    assert Verdict.model_validate_json(verdict.value or b"") == replied.verdict
    assert [letter.offset for letter in _dead(records)] == [2]


async def test_a_reply_the_broker_did_not_take_at_once_goes_in_the_transaction(
    service: GateService,
) -> None:
    at_once = _AtOnce(accepts=False)
    records = await _outbound(_immediate(service, at_once), _record(_body(), _headers()))
    assert len(at_once.sent) == 1
    [reply] = _replies(records)
    assert GateReply.model_validate_json(reply.value or b"").verdict == (
        at_once.sent[0][1].verdict  # type: ignore[union-attr]
    )


async def test_an_immediate_reply_does_not_wait_for_a_slow_request_before_it() -> None:
    """On one partition, a short-budget request behind a slow one: its reply goes out
    when it is decided, though its verdict's transaction waits for the slow one's."""
    nli = await _slow_gate(0.4)
    at_once = _AtOnce()
    publisher = _Publisher()
    slow, short = _request("slow", offset=1), _request("short", offset=2, budget=b"200")
    began = time.monotonic()
    await _run_step(_immediate(nli, at_once), nli, [(0.0, [slow, short])], publisher)
    [(short_at, short_reply), (slow_at, slow_reply)] = at_once.sent
    assert isinstance(short_reply, GateReply) and short_reply.verdict.event_id == "short"
    assert isinstance(slow_reply, GateReply) and slow_reply.verdict.event_id == "slow"
    # in order of deciding, not of offsets (no wall-clock bound: a loaded CI machine)
    assert short_at < slow_at and slow_at - began >= 0.4
    assert _replied(publisher) == [[]]  # one transaction, for both verdicts, no reply
    [(records, offsets)] = publisher.published
    verdicts = [r for r in records if r.topic == SETTINGS.topics.verdicts]
    assert [Verdict.model_validate_json(v.value or b"").event_id for v in verdicts] == [
        "slow",
        "short",
    ]
    assert offsets == {TopicPartition(REQUESTS, 0): 3}
