"""Publishes the page's labels on the labels topic, each acknowledged by every in-sync
replica (``acks=all``) before the page records it and moves on.

The record - topic, key, bytes - comes from the caller (``review serve`` passes the
labels topic of the output catalog), so the topic's key and size limit are decided where
every other topic's are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aiokafka import AIOKafkaProducer

from streamproc.contracts.label_events import LabelEvent
from streamproc.kafka.options import KafkaConnection
from streamproc.kafka.security import aiokafka_options, explain_access_errors

__all__ = ["KafkaLabelPublisher", "LabelPublisher", "LabelRecord"]


class LabelRecord(Protocol):
    """What a label is sent as (the stream's ``OutboundRecord`` is one)."""

    @property
    def topic(self) -> str: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...


class LabelPublisher(Protocol):
    """Sends one label and returns once the broker has it; raises if it did not."""

    async def __call__(self, event: LabelEvent) -> None: ...


class KafkaLabelPublisher:
    """A :class:`LabelPublisher` on one aiokafka producer."""

    def __init__(
        self,
        connection: KafkaConnection,
        to_record: Callable[[LabelEvent], LabelRecord],
        *,
        timeout_s: float = 30.0,
    ) -> None:
        self._connection = connection
        self._to_record = to_record
        self._producer = AIOKafkaProducer(
            bootstrap_servers=connection.bootstrap_servers,
            acks="all",
            enable_idempotence=True,
            linger_ms=0,
            request_timeout_ms=int(timeout_s * 1000),
            **aiokafka_options(connection.security),
        )

    async def start(self) -> None:
        connection = self._connection
        async with explain_access_errors(connection.bootstrap_servers, connection.security):
            await self._producer.start()

    async def stop(self) -> None:
        await self._producer.stop()

    async def __call__(self, event: LabelEvent) -> None:
        record = self._to_record(event)
        await self._producer.send_and_wait(record.topic, value=record.value, key=record.key)
