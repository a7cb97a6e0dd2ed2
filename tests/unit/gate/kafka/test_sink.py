"""The HTTP path's record sink without a broker: nothing to send costs nothing, and a
sink not started refuses to pretend it sent anything (the Kafka tests send for real)."""

from __future__ import annotations

import pytest

from streamproc.gate.kafka import KafkaRecordSink
from streamproc.gate.sink import RecordsNotTaken
from streamproc.verdicts.record import OutboundRecord


async def test_nothing_to_send_returns_at_once_even_before_start() -> None:
    await KafkaRecordSink("127.0.0.1:9092").publish([])


async def test_records_before_start_raise_rather_than_vanish() -> None:
    sink = KafkaRecordSink("127.0.0.1:9092")
    record = OutboundRecord(topic="t", key=b"k", value=b"{}")
    with pytest.raises(RecordsNotTaken, match="not started") as raised:
        await sink.publish([record])
    assert raised.value.failed == [record]  # safe to send again: it was never sent
    await sink.stop()  # stopping a sink never started is harmless
