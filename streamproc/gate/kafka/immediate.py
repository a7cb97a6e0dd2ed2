"""Kafka replies sent as soon as they are decided (``gate.kafka_reply = "immediate"``).

A reply in its verdict's transaction waits for the transaction under way and then for its
own; one sent apart from it reaches the caller a produce and a fetch after its decision.
The verdict, outcome and audit record still go in the transaction with the request's
offset: the monitored records stay exactly once, but a reply can be seen before (and, if
the gate fails first, without) its verdict being published - then whoever reads the
request next decides it again and the caller may get a second reply, which it drops.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from aiokafka import AIOKafkaProducer

from streamproc.kafka.publisher import PublishFailed, RecordsOnlyPublisher
from streamproc.kafka.support import bounded_close
from streamproc.verdicts.record import OutboundRecord

__all__ = ["ImmediateReplies"]

log = structlog.get_logger(__name__)

SEND_TIMEOUT_S = 1.0
"""A reply not acknowledged in this long is handed back to go in the transaction: longer
than any budget a caller waits on at the defaults, short enough not to hold the partition's
later requests."""


class ImmediateReplies:
    """An idempotent producer of its own (no transaction, no linger) for gate replies."""

    def __init__(self, client_options: Mapping[str, Any]) -> None:
        producer = AIOKafkaProducer(
            **{**client_options, "acks": "all", "enable_idempotence": True, "linger_ms": 0}
        )
        self._delivery = RecordsOnlyPublisher(producer, SEND_TIMEOUT_S)
        self.sent = 0

    async def start(self) -> None:
        await self._delivery.start()

    async def stop(self) -> None:
        await bounded_close(self._delivery.stop(), "reply producer")

    async def send(self, record: OutboundRecord) -> bool:
        """Whether the broker acknowledged ``record``; False (logged) when it did not in
        :data:`SEND_TIMEOUT_S`, so the caller can send it another way."""
        try:
            await self._delivery.publish([record], {})
        except PublishFailed as exc:  # the transaction carries it instead
            log.warning("gate_reply_not_sent_at_once", topic=record.topic, error=str(exc))
            return False
        self.sent += 1
        return True
