"""The background check of one consumer's progress: end offsets now and then, then
stalled or not (see :mod:`streamproc.kafka.progress` for the bookkeeping).

Every consumer loop runs one (the worker's judging and windows loops, the audit sink);
the worker is live only while neither of its two reports a stall.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from streamproc.kafka.progress import ProgressWatch

__all__ = ["ConsumerWatch"]

log = structlog.get_logger(__name__)

CHECK_EVERY_S = 2.0
CHECK_TIMEOUT_S = 20.0


class ConsumerWatch:
    """Progress of one consumer; ``live`` turns False while a partition is stalled."""

    def __init__(self, name: str, stall_after_s: float) -> None:
        self.name = name
        self.progress: ProgressWatch[TopicPartition] = ProgressWatch(stall_after_s)
        self.live = True

    async def run(
        self,
        consumer: AIOKafkaConsumer,
        idle: Callable[[], bool],
        waiting_since: Callable[[], float],
    ) -> None:
        """Check every few seconds until cancelled. ``idle`` says the loop holds no
        batch: everything it has read is then published. ``waiting_since`` is since when
        the loop has made no headway (no poll came back, or a rebalance left it without
        partitions): such a loop owns no partition, so only this shows it."""
        unknown_since: float | None = None
        while True:
            await asyncio.sleep(CHECK_EVERY_S)
            stuck_s = time.monotonic() - waiting_since()
            if stuck_s >= self.progress.stall_after_s:
                if self.live:
                    self.live = False
                    log.error(
                        "worker_stalled",
                        consumer=self.name,
                        reason="no poll came back, or a rebalance left it without partitions",
                        seconds=round(stuck_s, 1),
                    )
                continue
            try:
                await asyncio.wait_for(self.check(consumer, idle), CHECK_TIMEOUT_S)
                unknown_since = None
            except TimeoutError:
                # The broker does not answer our questions: progress is unknown, and a
                # worker that cannot tell for a whole stall period does not call itself live.
                now = time.monotonic()
                unknown_since = unknown_since or now
                log.warning("progress_check_timed_out", consumer=self.name)
                if self.live and now - unknown_since >= self.progress.stall_after_s:
                    self.live = False
                    log.error("worker_stalled", consumer=self.name, reason="progress unknown")

    async def check(self, consumer: AIOKafkaConsumer, idle: Callable[[], bool]) -> None:
        partitions = list(self.progress.partitions)
        if not partitions:
            return
        try:
            ends = await consumer.end_offsets(partitions)
            for tp in partitions:
                state = self.progress.partitions.get(tp)
                if state is not None and state.acknowledged is None:
                    committed = await consumer.committed(tp)
                    self.progress.committed({tp: committed}, time.monotonic())
            if idle():
                # Transaction markers sit after the last record of a transactional topic:
                # the position steps over them, the acknowledged offset cannot.
                positions = {tp: await consumer.position(tp) for tp in partitions}
                self.progress.acknowledged(positions, time.monotonic())
        except (KafkaError, OSError, AssertionError) as exc:
            log.warning("progress_check_failed", consumer=self.name, error=repr(exc))
            return
        now = time.monotonic()
        self.progress.ends(ends, now)
        stalled = self.progress.stalled(now)
        if stalled and self.live:
            self.live = False
            log.error(
                "worker_stalled",
                consumer=self.name,
                partitions={f"{tp.topic}/{tp.partition}": s.lag for tp, s in stalled.items()},
                seconds=round(max(now - s.moved_at for s in stalled.values()), 1),
            )
        elif not stalled and not self.live:
            self.live = True
            log.info("worker_progressing", consumer=self.name, lag=self.progress.total_lag())
