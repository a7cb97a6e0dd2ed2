"""Publishing answers and reading streamproc's outputs from outside the worker.

Used by the demo, the end-to-end tests and anyone wiring an assistant: plain aiokafka,
one record per request so it also behaves on the embedded Tansu broker. Every client
authenticates as ``security`` says (default: PLAINTEXT); a broker that refuses the
credentials or certificate raises ``BrokerAccessDenied`` from ``start``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from pydantic import BaseModel

from streamproc.contracts.events import AnswerEvent, DeadLetter, Flag, Verdict, WindowAggregate
from streamproc.kafka.options import KafkaSecurity
from streamproc.kafka.security import aiokafka_options, explain_access_errors
from streamproc.verdicts.options import TopicSettings

__all__ = ["OutputRecord", "OutputTail", "publish_answers", "publish_raw"]

Headers = list[tuple[str, bytes]]

PLAINTEXT = KafkaSecurity()


async def publish_raw(
    bootstrap_servers: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes, Headers]],
    *,
    security: KafkaSecurity = PLAINTEXT,
) -> int:
    """Send raw (key, value, headers) records, each acknowledged before the next."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers, acks="all", linger_ms=0, **aiokafka_options(security)
    )
    sent = 0
    try:
        async with explain_access_errors(bootstrap_servers, security):
            await producer.start()
        for key, value, headers in records:
            await producer.send_and_wait(topic, value=value, key=key, headers=headers)
            sent += 1
    finally:
        await producer.stop()
    return sent


async def publish_answers(
    bootstrap_servers: str,
    topic: str,
    answers: Iterable[AnswerEvent],
    traceparents: dict[str, str] | None = None,
    *,
    security: KafkaSecurity = PLAINTEXT,
) -> int:
    """Publish answer events keyed by conversation id (the producer-side contract)."""
    parents = traceparents or {}
    return await publish_raw(
        bootstrap_servers,
        topic,
        (
            (
                answer.conversation_id.encode(),
                answer.model_dump_json(exclude_none=True).encode(),
                [("traceparent", parents[answer.event_id].encode())]
                if answer.event_id in parents
                else [],
            )
            for answer in answers
        ),
        security=security,
    )


@dataclass(frozen=True, slots=True)
class OutputRecord:
    """One record read back from an output topic, parsed into its model."""

    kind: str
    event: BaseModel
    key: bytes | None


class OutputTail:
    """Reads verdicts, flags, aggregates and dead letters from the beginning (no group)."""

    def __init__(
        self,
        bootstrap_servers: str,
        topics: TopicSettings,
        *,
        security: KafkaSecurity = PLAINTEXT,
    ) -> None:
        self._bootstrap_servers = bootstrap_servers
        self._security = security
        self._models: dict[str, tuple[str, type[BaseModel]]] = {
            topics.verdicts: ("verdict", Verdict),
            topics.flags: ("flag", Flag),
            topics.aggregates: ("aggregate", WindowAggregate),
            topics.dead_letter: ("dead_letter", DeadLetter),
        }
        self._consumer = AIOKafkaConsumer(
            *self._models,
            bootstrap_servers=bootstrap_servers,
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            # Only what a worker committed: a batch it aborted (crash, failed publish) is
            # judged again, and reading uncommitted records would show it twice.
            isolation_level="read_committed",
            **aiokafka_options(security),
        )

    async def __aenter__(self) -> Self:
        try:
            async with explain_access_errors(self._bootstrap_servers, self._security):
                await self._consumer.start()
        except BaseException:
            await self._consumer.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._consumer.stop()

    async def poll(self, timeout_s: float = 1.0) -> list[OutputRecord]:
        """Whatever arrived within ``timeout_s``, parsed, in partition order."""
        batches = await self._consumer.getmany(timeout_ms=int(timeout_s * 1000))
        records = []
        for partition, messages in batches.items():
            kind, model = self._models[partition.topic]
            for message in messages:
                event = model.model_validate_json(message.value or b"")
                records.append(OutputRecord(kind=kind, event=event, key=message.key))
        return records
