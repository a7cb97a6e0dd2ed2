"""Replies sent at once: acknowledged or handed back, never raised."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.errors import KafkaTimeoutError

from streamproc.gate.kafka.immediate import ImmediateReplies
from streamproc.verdicts.record import OutboundRecord

REPLY = OutboundRecord(
    topic="replies", key=b"c-1", value=b"{}", headers=(("correlation-id", b"c-1"),)
)


class _Producer:
    """Takes a record; its delivery resolves, or fails with ``error``."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def send(self, topic: str, **fields: Any) -> asyncio.Future[None]:
        self.sent.append((topic, fields))
        delivery: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.error is None:
            delivery.set_result(None)
        else:
            delivery.set_exception(self.error)
        return delivery


def _replies(producer: _Producer) -> ImmediateReplies:
    replies = ImmediateReplies({"bootstrap_servers": "127.0.0.1:9"})
    replies._delivery._producer = producer
    return replies


async def test_an_acknowledged_reply_is_counted_as_sent() -> None:
    producer = _Producer()
    replies = _replies(producer)
    assert await replies.send(REPLY)
    assert replies.sent == 1
    [(topic, fields)] = producer.sent
    assert (topic, fields["key"], fields["headers"]) == (
        "replies",
        b"c-1",
        [("correlation-id", b"c-1")],
    )


async def test_a_reply_the_broker_refuses_is_handed_back_not_raised() -> None:
    replies = _replies(_Producer(KafkaTimeoutError()))
    assert not await replies.send(REPLY)
    assert replies.sent == 0
