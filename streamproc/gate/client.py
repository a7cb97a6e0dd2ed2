"""The caller's side of the gate's Kafka request / reply: ask, and decide by policy when
no reply comes within the budget. (The streaming gate's helper, :func:`check_stream`,
is :mod:`streamproc.gate.stream_client`'s, exported here too.)

    async with GateClient("kafka:9092", policy="fail-closed") as gate:
        decision = await gate.check(answer, budget_ms=300, traceparent=current_traceparent)
        send(decision.answer_text if decision.decision != "withhold" else SAFE_RESPONSE)

How it goes:

- :meth:`GateClient.check` sends the answer event to the gate's requests topic with the
  ``reply-topic``, ``correlation-id`` (a fresh uuid4), ``x-budget-ms``, ``traceparent``
  and (given a ``token``) ``authorization: Bearer <token>`` headers, and waits for the
  record on the reply topic whose ``correlation-id`` header is the same, until the
  budget (from the call) is spent.
- No reply in time (the gate is down, lagging, or the broker is slow): the client
  applies the policy itself - fail-open passes the whole answer (``verified: false``,
  ``BUDGET_EXCEEDED``), fail-closed withholds it (``""``). It never waits past the
  budget. A request that could not even be sent decides the same way at once, with
  ``JUDGE_ERROR``; one the gate refused (a :class:`GateError` reply: bad event or
  budget) too, with the error attached.
- A reply arriving after its request was decided, or meant for another client sharing
  the reply topic, is dropped.
- The reply topic is read from its end, with no consumer group (every client instance
  sees every reply and keeps its own): ``read_committed``, so a reply is seen only once
  the gate's transaction holding it and the answer's verdict commits. The default one
  (``gate.replies_topic``, :data:`DEFAULT_REPLIES_TOPIC`) is created by the gate with its
  other topics; :meth:`start` creates the client's topic if it is missing
  (``create_reply_topic``). Many busy clients are better off each with a reply topic of
  their own: each reads every reply on its topic.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition
from pydantic import SecretStr, ValidationError

from streamproc.contracts.events import Action, AnswerEvent, UnverifiedReason
from streamproc.contracts.gate_events import (
    AUTHORIZATION_HEADER,
    BUDGET_HEADER,
    CORRELATION_ID_HEADER,
    REPLY_TOPIC_HEADER,
    FailurePolicy,
    GateError,
    GateReply,
)
from streamproc.gate.options import GateSettings
from streamproc.gate.stream_client import CheckedStream, check_stream
from streamproc.kafka.options import KafkaSecurity
from streamproc.kafka.security import aiokafka_options, explain_access_errors
from streamproc.kafka.topics import TopicSpec, ensure_topics

__all__ = [
    "DEFAULT_REPLIES_TOPIC",
    "DEFAULT_REQUESTS_TOPIC",
    "CheckedStream",
    "ClientDecision",
    "GateClient",
    "budget_header",
    "check_stream",
]

log = structlog.get_logger(__name__)

DEFAULT_REQUESTS_TOPIC: str = GateSettings.model_fields["requests_topic"].default
"""``gate.requests_topic``'s default."""
DEFAULT_REPLIES_TOPIC: str = GateSettings.model_fields["replies_topic"].default
"""``gate.replies_topic``'s default: the reply topic the gate creates."""
_REPLY_RETENTION_MS = 3600 * 1000
_METADATA_ATTEMPTS = 50
_METADATA_WAIT_S = 0.2
_READ_MS = 100


@dataclass(frozen=True, slots=True)
class ClientDecision:
    """What the caller does with its answer."""

    decision: Action
    verified: bool
    reason: UnverifiedReason | None
    answer_text: str
    """Ready to send: the whole answer on pass, trimmed on trim, "" on withhold."""
    correlation_id: str
    latency_ms: float
    """From the call to this decision, as the caller measured it."""
    reply: GateReply | None = None
    """The gate's reply when one came in time; None when the client decided by policy."""
    error: GateError | None = None
    """The gate's refusal of the request (bad event or budget), when that is what came."""

    @property
    def by_policy(self) -> bool:
        """The client decided itself (no usable reply in time)."""
        return self.reply is None


class GateClient:
    """Asks the gate over Kafka; see the module docstring.

    ``policy``: the failure policy, or a function of the answer's tenant giving it (what
    :func:`streamproc.wiring.gate_client`, the client of the configured gate, passes:
    ``gate.policy_for``).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        reply_topic: str = DEFAULT_REPLIES_TOPIC,
        policy: FailurePolicy | Callable[[str], FailurePolicy] = "fail-open",
        requests_topic: str = DEFAULT_REQUESTS_TOPIC,
        security: KafkaSecurity | None = None,
        create_reply_topic: bool = True,
        reply_partitions: int = 1,
        replication_factor: int = 1,
        idempotent: bool = True,
        token: SecretStr | str | None = None,
    ) -> None:
        self._bootstrap = bootstrap_servers
        secret = token.get_secret_value() if isinstance(token, SecretStr) else token
        self._authorization = f"Bearer {secret}".encode() if secret else None
        self.reply_topic = reply_topic
        self.requests_topic = requests_topic
        self._policy_for: Callable[[str], FailurePolicy] = (
            policy if callable(policy) else (lambda _tenant: policy)
        )
        self._security = security or KafkaSecurity()
        self._create = create_reply_topic
        self._reply_spec = TopicSpec(
            reply_topic,
            reply_partitions,
            replication_factor,
            {"retention.ms": str(_REPLY_RETENTION_MS)},
        )
        self._idempotent = idempotent
        self._waiting: dict[str, asyncio.Future[bytes]] = {}
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self.dropped = 0
        """Replies read that no waiting request of this client matched (late, or
        another client's)."""

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Connect, create the reply topic if asked and missing, and read the reply
        topic from its current end (replies to earlier requests are not wanted)."""
        options = aiokafka_options(self._security)
        if self._create:
            await ensure_topics(self._bootstrap, [self._reply_spec], self._security)
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap,
            acks="all",
            enable_idempotence=self._idempotent,
            linger_ms=0,
            **options,
        )
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="latest",
            # aiokafka's 500 ms long poll: the broker answers the fetch as soon as a reply
            # is written; a shorter wait only makes an idle client cost the broker CPU.
            fetch_max_wait_ms=500,
            **options,
        )
        try:
            async with explain_access_errors(self._bootstrap, self._security):
                await self._producer.start()
                await self._consumer.start()
            partitions = await self._reply_partitions(self._consumer, self._producer)
            self._consumer.assign(partitions)
            await self._consumer.seek_to_end(*partitions)
            for tp in partitions:  # resolve the end now: a reply may come at once
                await self._consumer.position(tp)
        except BaseException:
            await self.stop()
            raise
        self._reader = asyncio.create_task(self._read_replies(), name="gate-client-replies")

    async def _reply_partitions(
        self, consumer: AIOKafkaConsumer, producer: AIOKafkaProducer
    ) -> list[TopicPartition]:
        """The reply topic's partitions, once the cluster's metadata shows the topic (a
        topic just created takes a moment). ``consumer.topics()`` reads fresh metadata
        but only names; the consumer's own metadata is not refreshed by it (it would be
        only after ``metadata_max_age_ms``), so the partitions come from the producer,
        which fetches a topic's metadata when asked for it - asked only once the topic
        is known to exist, so it never waits for, or auto-creates, a missing one."""
        for _ in range(_METADATA_ATTEMPTS):
            if self.reply_topic in await consumer.topics():
                found = await producer.partitions_for(self.reply_topic)
                if found:
                    return [TopicPartition(self.reply_topic, p) for p in sorted(found)]
            await asyncio.sleep(_METADATA_WAIT_S)
        raise RuntimeError(
            f"reply topic {self.reply_topic!r} does not exist (create it, or let the client: "
            "create_reply_topic=True)"
        )

    async def stop(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        for client in (self._consumer, self._producer):
            if client is not None:
                try:
                    await asyncio.wait_for(client.stop(), 10.0)
                except Exception as exc:  # noqa: BLE001 - closing: nothing left to do
                    log.warning("gate_client_close_failed", error=repr(exc))
        self._consumer = self._producer = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    # ------------------------------------------------------------------ one check

    async def check(
        self, answer: AnswerEvent | bytes, *, budget_ms: float, traceparent: str | None = None
    ) -> ClientDecision:
        """The gate's decision on ``answer`` (an event, or its JSON bytes exactly as on
        the answers topic), or the policy's when none comes within ``budget_ms``."""
        began = time.monotonic()
        if budget_ms <= 0:
            raise ValueError("budget_ms must be positive")
        if self._producer is None:
            raise RuntimeError("GateClient.check before start()")
        body = (
            answer.model_dump_json(exclude_none=True).encode()
            if isinstance(answer, AnswerEvent)
            else answer
        )
        correlation_id = uuid.uuid4().hex
        waiting: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = waiting
        headers = [
            (REPLY_TOPIC_HEADER, self.reply_topic.encode()),
            (CORRELATION_ID_HEADER, correlation_id.encode()),
            (BUDGET_HEADER, budget_header(budget_ms).encode()),
        ]
        if traceparent:
            headers.append(("traceparent", traceparent.encode("latin-1", "replace")))
        if self._authorization is not None:
            headers.append((AUTHORIZATION_HEADER, self._authorization))
        try:
            value = await asyncio.wait_for(
                self._ask(body, correlation_id, headers, waiting), timeout=budget_ms / 1000
            )
        except TimeoutError:
            return self._by_policy(body, correlation_id, began, UnverifiedReason.BUDGET_EXCEEDED)
        except _NotSent as exc:
            log.warning("gate_request_not_sent", error=repr(exc.__cause__))
            return self._by_policy(body, correlation_id, began, UnverifiedReason.JUDGE_ERROR)
        finally:
            self._waiting.pop(correlation_id, None)
        return self._replied(body, correlation_id, began, value)

    async def _ask(
        self,
        body: bytes,
        correlation_id: str,
        headers: list[tuple[str, bytes]],
        waiting: asyncio.Future[bytes],
    ) -> bytes:
        assert self._producer is not None
        try:
            await self._producer.send_and_wait(
                self.requests_topic, value=body, key=correlation_id.encode(), headers=headers
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise _NotSent() from exc
        return await waiting

    def _replied(
        self, body: bytes, correlation_id: str, began: float, value: bytes
    ) -> ClientDecision:
        try:
            reply = GateReply.model_validate_json(value)
        except ValidationError:
            try:
                error = GateError.model_validate_json(value)
            except ValidationError:
                log.warning("gate_reply_unreadable", correlation_id=correlation_id)
                return self._by_policy(body, correlation_id, began, UnverifiedReason.JUDGE_ERROR)
            return self._by_policy(
                body, correlation_id, began, UnverifiedReason.JUDGE_ERROR, error=error
            )
        return ClientDecision(
            decision=reply.decision,
            verified=reply.verified,
            reason=reply.reason,
            answer_text=reply.answer_text,
            correlation_id=correlation_id,
            latency_ms=_since(began),
            reply=reply,
        )

    def _by_policy(
        self,
        body: bytes,
        correlation_id: str,
        began: float,
        reason: UnverifiedReason,
        *,
        error: GateError | None = None,
    ) -> ClientDecision:
        tenant, text = _tenant_and_text(body)
        policy = self._policy_for(tenant)
        opened = policy == "fail-open"
        return ClientDecision(
            decision=Action.PASS if opened else Action.WITHHOLD,
            verified=False,
            reason=reason,
            answer_text=text if opened else "",
            correlation_id=correlation_id,
            latency_ms=_since(began),
            error=error,
        )

    # ------------------------------------------------------------------ replies

    async def _read_replies(self) -> None:
        """Hand each reply to the request waiting for it; drop the rest."""
        consumer = self._consumer
        assert consumer is not None
        while True:
            try:
                batch = await consumer.getmany(timeout_ms=_READ_MS)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep reading; checks time out meanwhile
                log.warning("gate_client_read_failed", error=repr(exc))
                await asyncio.sleep(_READ_MS / 1000)
                continue
            for records in batch.values():
                for record in records:
                    self._deliver(record.headers or (), record.value)

    def _deliver(self, headers: Any, value: bytes | None) -> None:
        correlation = next(
            (raw for name, raw in headers if name == CORRELATION_ID_HEADER and raw), None
        )
        waiting = (
            self._waiting.get(correlation.decode("latin-1")) if correlation is not None else None
        )
        if waiting is None or waiting.done():
            self.dropped += 1
            return
        waiting.set_result(value or b"")


class _NotSent(Exception):
    """The request did not reach the broker."""


def budget_header(budget_ms: float) -> str:
    """``budget_ms`` as the ``x-budget-ms`` header: plain decimal milliseconds, to the
    microsecond (never an exponent, as ``:g`` writes past six digits: the AsyncAPI
    document's pattern, and other clients' parsers, expect digits)."""
    text = f"{budget_ms:.3f}".rstrip("0").rstrip(".")
    return text if text != "0" else "0.001"


def _since(began: float) -> float:
    return max(0.0, (time.monotonic() - began) * 1000)


def _tenant_and_text(body: bytes) -> tuple[str, str]:
    """The tenant (for its policy) and the answer text (what fail-open sends) of a
    request body; ("", "") parts where the body does not hold them."""
    try:
        event = AnswerEvent.model_validate_json(body)
    except ValidationError:
        pass
    else:
        return event.tenant, event.answer
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return "", ""
    if not isinstance(document, dict):
        return "", ""
    tenant, text = document.get("tenant"), document.get("answer")
    return (tenant if isinstance(tenant, str) else ""), (text if isinstance(text, str) else "")
