"""The HTTP path's way to the monitored topics (:class:`~streamproc.gate.sink.RecordSink`).

An HTTP request has no input offset to commit with its outputs, so there is no
transaction to join: each decision's records are sent by an idempotent producer with
``acks=all`` and the decision returns only once the broker has acknowledged every one
(the verdict is on the topic before the caller reads the answer). A failure raises; the
caller (the HTTP server) decides what the request gets. On the Tansu demo broker, which
has no idempotence, one record per produce request, as the worker does there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer

from streamproc.config import Settings
from streamproc.stream.loop.publisher import OutboundRecord, RecordsOnlyPublisher
from streamproc.stream.topics import DEAD_LETTER_MAX_BYTES

__all__ = ["KafkaRecordSink"]


class KafkaRecordSink:
    """Sends one decision's records and waits for their acknowledgements.

    Made outside an event loop is fine; the producer is created in :meth:`start`, inside
    the running loop, as aiokafka requires."""

    def __init__(self, settings: Settings, *, client_options: Mapping[str, Any] | None = None):
        self._settings = settings
        self._client_options: Mapping[str, Any] = client_options or {}
        self._delivery: RecordsOnlyPublisher | None = None

    async def start(self) -> None:
        settings = self._settings
        tansu = settings.broker_flavour == "tansu"
        producer = AIOKafkaProducer(
            bootstrap_servers=settings.bootstrap_servers,
            acks="all",
            enable_idempotence=not tansu,
            linger_ms=0 if tansu else 1,
            max_batch_size=1 if tansu else 16384,
            max_request_size=DEAD_LETTER_MAX_BYTES + 65536,
            **self._client_options,
        )
        delivery = RecordsOnlyPublisher(producer, settings.worker.publish_timeout_s)
        await delivery.start()
        self._delivery = delivery

    async def stop(self) -> None:
        delivery, self._delivery = self._delivery, None
        if delivery is not None:
            await delivery.stop()

    async def publish(self, records: Sequence[OutboundRecord]) -> None:
        """Return once every record is acknowledged; raise ``PublishFailed`` otherwise."""
        if not records:
            return
        if self._delivery is None:
            raise RuntimeError("KafkaRecordSink.publish before start()")
        await self._delivery.publish(records, {})
