"""The HTTP path's outbox without a broker: bounded by records and bytes, each record
handed to the sink once, only what the sink reports as not taken sent again, health while
the sink is stuck, and a bounded drain on close."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from streamproc.gate.outbox import Outbox, OutboxLimits, record_bytes
from streamproc.gate.sink import RecordsNotTaken
from streamproc.verdicts.record import OutboundRecord


def records(count: int, size: int = 10, topic: str = "verdicts") -> list[OutboundRecord]:
    return [OutboundRecord(topic, f"k{i}".encode(), b"v" * size) for i in range(count)]


def limits(**overrides: float) -> OutboxLimits:
    base = {"max_records": 100, "max_bytes": 10_000, "stall_s": 0.2, "drain_s": 0.3}
    return OutboxLimits(retry_s=0.01, **{**base, **overrides})  # type: ignore[arg-type]


class Sink:
    """Keeps what it is given; held while ``open`` is clear; refuses ``refuse`` once."""

    def __init__(self) -> None:
        self.calls: list[list[OutboundRecord]] = []
        self.open = asyncio.Event()
        self.open.set()
        self.refuse: set[bytes] = set()

    async def publish(self, batch: Sequence[OutboundRecord]) -> None:
        self.calls.append(list(batch))
        await self.open.wait()
        failed = [r for r in batch if r.key in self.refuse]
        self.refuse.clear()
        if failed:
            raise RecordsNotTaken(failed, "refused")

    @property
    def written(self) -> list[bytes | None]:
        return [r.key for call in self.calls for r in call]


async def settle(outbox: Outbox) -> None:
    for _ in range(200):
        if outbox.records == 0:
            return
        await asyncio.sleep(0.005)


async def test_records_are_published_once_each_and_only_refused_ones_again() -> None:
    sink = Sink()
    sink.refuse = {b"k1"}
    outbox = Outbox(sink, limits())
    outbox.start()
    outbox.put(records(3))
    await settle(outbox)
    await outbox.close()
    # k1 refused, then taken
    assert sorted(sink.written, key=lambda key: key or b"") == [b"k0", b"k1", b"k1", b"k2"]
    assert (outbox.published, outbox.lost, outbox.records, outbox.bytes) == (3, 0, 0, 0)


async def test_the_bounds_are_records_and_bytes() -> None:
    outbox = Outbox(Sink(), limits(max_records=3, max_bytes=10_000))
    assert outbox.has_room()
    outbox.put(records(3))
    assert not outbox.has_room() and outbox.unready_reason() == "outbox_full"
    by_bytes = Outbox(Sink(), limits(max_records=100, max_bytes=250))
    by_bytes.put(records(2, size=100))
    assert by_bytes.has_room()
    by_bytes.put(records(1, size=100))
    assert not by_bytes.has_room()
    assert by_bytes.bytes == sum(record_bytes(r) for r in records(3, size=100))


async def test_a_stuck_sink_makes_it_unready_and_nothing_is_sent_twice() -> None:
    sink = Sink()
    sink.open.clear()
    outbox = Outbox(sink, limits(stall_s=0.05))
    outbox.start()
    outbox.put(records(2))
    await asyncio.sleep(0.01)
    assert outbox.unready_reason() is None  # waiting, not yet stalled
    await asyncio.sleep(0.1)
    outbox.put(records(1, topic="audit"))
    assert outbox.unready_reason() == "broker_unavailable"
    assert outbox.oldest_age_s() >= 0.05
    sink.open.set()
    await settle(outbox)
    assert outbox.unready_reason() is None
    assert len(sink.written) == 3 and outbox.published == 3
    await outbox.close()


async def test_close_drains_within_its_bound_and_counts_what_is_left() -> None:
    sink = Sink()
    outbox = Outbox(sink, limits(drain_s=0.5))
    outbox.start()
    outbox.put(records(5))
    assert await outbox.close() == 0 and outbox.published == 5
    stuck = Sink()
    stuck.open.clear()
    held = Outbox(stuck, limits(drain_s=0.1))
    held.start()
    held.put(records(4))
    started = asyncio.get_running_loop().time()
    assert await held.close() == 4
    assert asyncio.get_running_loop().time() - started < 1.0
    assert held.lost == 4 and held.records == 0


async def test_a_record_refused_every_time_is_given_up_and_counted() -> None:
    class Refusing(Sink):
        async def publish(self, batch: Sequence[OutboundRecord]) -> None:
            self.calls.append(list(batch))
            raise ConnectionError("down")

    sink = Refusing()
    outbox = Outbox(sink, limits())
    outbox.start()
    outbox.put(records(1))
    await settle(outbox)
    await outbox.close()
    assert len(sink.calls) == 5 and outbox.lost == 1 and outbox.bytes == 0
