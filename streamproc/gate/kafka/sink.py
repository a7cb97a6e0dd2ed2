"""The HTTP path's way to the monitored topics (:class:`~streamproc.gate.sink.RecordSink`).

An HTTP request has no input offset to commit with its outputs, so there is no
transaction to join: the outbox's records are sent by an idempotent producer with
``acks=all``. Each record is handed to the producer once and its acknowledgement awaited
with no time limit: the producer retries what it sent until the broker takes it, and
the broker drops the duplicates of those retries, so a record is written once. Only
records definitely not written (refused by the broker, or never sent) are reported
(:class:`~streamproc.gate.sink.RecordsNotTaken`), for the outbox to send again. The
reply never waits on this (:mod:`streamproc.gate.outbox`). On the Tansu demo broker,
which has no idempotence, one record per produce request, as the worker does there.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer

from streamproc.gate.sink import RecordsNotTaken
from streamproc.kafka.topics import DEAD_LETTER_MAX_BYTES
from streamproc.verdicts.record import OutboundRecord

__all__ = ["KafkaRecordSink"]


class KafkaRecordSink:
    """Sends records once each and waits for their acknowledgements.

    Made outside an event loop is fine; the producer is created in :meth:`start`, inside
    the running loop, as aiokafka requires."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        tansu: bool = False,
        client_options: Mapping[str, Any] | None = None,
    ):
        """``tansu``: the broker is the Tansu demo broker (``broker_flavour``), which has
        no idempotence."""
        self._bootstrap_servers = bootstrap_servers
        self._tansu = tansu
        self._client_options: Mapping[str, Any] = client_options or {}
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        tansu = self._tansu
        producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap_servers,
            acks="all",
            enable_idempotence=not tansu,
            linger_ms=0 if tansu else 1,
            max_batch_size=1 if tansu else 16384,
            max_request_size=DEAD_LETTER_MAX_BYTES + 65536,
            **self._client_options,
        )
        await producer.start()
        self._producer = producer

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Flush and close the producer, waiting at most ``timeout_s`` (a broker that is
        away must not hold a shutdown)."""
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(producer.stop(), timeout_s)

    async def publish(self, records: Sequence[OutboundRecord]) -> None:
        """Return once every record is acknowledged; :class:`RecordsNotTaken` names the
        records definitely not written. Never gives up on a record that was sent."""
        if not records:
            return
        producer = self._producer
        if producer is None:
            raise RecordsNotTaken(records, "the sink is not started")
        sent: list[tuple[OutboundRecord, asyncio.Future[Any]]] = []
        failed: list[OutboundRecord] = []
        causes: list[str] = []
        for index, record in enumerate(records):
            try:
                future = await producer.send(
                    record.topic,
                    value=record.value,
                    key=record.key,
                    partition=record.partition,
                    headers=list(record.headers) or None,
                )
            except Exception as exc:  # noqa: BLE001 - not sent: safe to send again
                causes.append(_cause(record, exc))
                failed.extend(records[index:])
                break
            sent.append((record, future))
            await asyncio.sleep(0)  # a large record costs a copy: let replies go between
        results = await asyncio.gather(*(future for _, future in sent), return_exceptions=True)
        for (record, _), result in zip(sent, results, strict=True):
            if isinstance(result, BaseException):
                failed.append(record)
                causes.append(_cause(record, result))
        if failed:
            raise RecordsNotTaken(failed, "; ".join(causes[:3]))


def _cause(record: OutboundRecord, error: BaseException) -> str:
    """Topic, key, size and cause of a record not written, for the log."""
    key = (record.key or b"")[:100].decode("utf-8", "replace")
    size = len(record.value or b"")
    return f"{record.topic} key={key!r} size={size}: {error!r}"[:400]
