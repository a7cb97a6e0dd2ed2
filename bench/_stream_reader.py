"""The stream benchmark's downstream consumer: it reads verdicts and dead letters as a
real consumer would (``read_committed``) and notes when each answer was decided, the
end point of every latency the benchmark reports."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass, field
from datetime import datetime

from aiokafka import AIOKafkaConsumer

from streamproc.config import Settings

__all__ = ["VerdictReader"]


@dataclass
class VerdictReader:
    """Reads verdicts and dead letters as a downstream consumer would (read_committed,
    so only committed transactions), noting when each answer id was first seen."""

    settings: Settings
    seen: dict[str, float] = field(default_factory=dict)
    dead: dict[str, str] = field(default_factory=dict)
    """Dead-lettered answer id -> reason."""
    timings: dict[str, tuple[float, int]] = field(default_factory=dict)
    """Answer id -> (judge seconds of its batch, batch size), from the verdict."""
    judged_at: dict[str, float] = field(default_factory=dict)
    """Answer id -> the verdict's ``judged_at``, moved onto ``time.monotonic``'s clock."""
    _wall_minus_monotonic: float = field(default_factory=lambda: time.time() - time.monotonic())
    _task: asyncio.Task[None] | None = None
    _consumer: AIOKafkaConsumer | None = None

    async def start(self) -> None:
        topics = self.settings.topics
        self._consumer = AIOKafkaConsumer(
            topics.verdicts,
            topics.dead_letter,
            bootstrap_servers=self.settings.bootstrap_servers,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            fetch_max_wait_ms=50,  # the resolution of the latency measured
        )
        await self._consumer.start()
        self._task = asyncio.create_task(self._run(self._consumer), name="verdict-reader")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._consumer is not None:
            await self._consumer.stop()

    def settled(self, ids: set[str]) -> int:
        """How many of ``ids`` have a verdict or a dead letter."""
        return sum(1 for i in ids if i in self.seen or i in self.dead)

    async def _run(self, consumer: AIOKafkaConsumer) -> None:
        verdicts = self.settings.topics.verdicts
        while True:
            fetched = await consumer.getmany(timeout_ms=200)
            now = time.monotonic()
            for tp, records in fetched.items():
                for record in records:
                    if tp.topic == verdicts and record.key is not None:
                        answer_id = record.key.decode()
                        self.seen.setdefault(answer_id, now)
                        self._timings(answer_id, record.value)
                    elif tp.topic != verdicts:
                        self._dead_letter(record.value)

    def _timings(self, answer_id: str, value: bytes | None) -> None:
        try:
            timings = json.loads(value or b"{}")["timings"]
            judge_s = float(timings["judge_ms"]) / 1000
            self.timings[answer_id] = (judge_s, int(timings["batch_size"]))
            judged_at = datetime.fromisoformat(json.loads(value or b"{}")["judged_at"])
            self.judged_at[answer_id] = judged_at.timestamp() - self._wall_minus_monotonic
        except (ValueError, KeyError, TypeError):
            pass  # a verdict without timings only leaves the judge-time column short

    def _dead_letter(self, value: bytes | None) -> None:
        try:
            letter = json.loads(value or b"{}")
            answer = json.loads(base64.b64decode(letter["value_b64"]))
            self.dead[str(answer["answer_id"])] = str(letter.get("reason"))
        except (ValueError, KeyError, TypeError):
            self.dead[f"unreadable-{len(self.dead)}"] = "unknown"
