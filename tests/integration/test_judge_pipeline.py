"""The judging loop judges the next batch while the previous one publishes, on real Kafka:
under a backlog the judge and the transactions overlap, every answer is published exactly
once, in order per partition, and the group's offsets end at the end of the topic; a
second loop joining mid-backlog gets its partitions (the chain lets go of the lock)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent, AnswerJudgement, Verdict
from streamproc.kafka.clients import OutputTail, publish_answers
from streamproc.monitor.judging_loop import JudgeLoop, judge_group_id
from streamproc.samples import SEED_LAB, load_answers
from streamproc.wiring import kafka_loop_options, prepare_topics, stage_limits
from tests.integration.run_settings import run_settings
from tests.integration.wrapped_judge import WrappedJudge

ANSWERS = 480


class _TimedJudge(WrappedJudge):
    """The rules judge, 50 ms more per batch, noting when each batch was judged."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.calls: list[tuple[float, float]] = []
        self._guard = threading.Lock()

    def judge_batch(
        self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
    ) -> list[AnswerJudgement]:
        started = time.monotonic()
        time.sleep(0.05)
        judged = super().judge_batch(answers)
        with self._guard:
            self.calls.append((started, time.monotonic()))
        return judged


def _settings(bootstrap: str) -> Settings:
    return run_settings(
        bootstrap,
        "pipe",
        partitions=4,
        judge={"name": "rules"},
        worker={"batch_max": 8, "session_timeout_s": 6.0, "rebalance_timeout_s": 20.0},
    )


def _slot(settings: Settings, instance_id: str) -> Settings:
    """One worker slot (its own transactional id: two loops of one process would fence
    each other)."""
    worker = settings.worker.model_copy(update={"instance_id": instance_id})
    return settings.model_copy(update={"worker": worker})


def _watch_publishing(loop: JudgeLoop) -> list[tuple[float, float]]:
    """Wrap the loop's publishing of each batch to note when it ran."""
    windows: list[tuple[float, float]] = []
    publish = loop._publish

    async def timed(judged: object) -> None:
        started = time.monotonic()
        await publish(judged)  # type: ignore[arg-type]
        windows.append((started, time.monotonic()))

    loop._publish = timed  # type: ignore[method-assign]
    return windows


async def _committed_and_ends(settings: Settings) -> tuple[dict[int, int], dict[int, int]]:
    """The judge group's committed offsets and the answers topic's end offsets."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers, group_id=judge_group_id(settings.app_id)
    )
    await consumer.start()
    try:
        partitions = [TopicPartition(settings.topics.answers, p) for p in range(4)]
        committed = {tp.partition: await consumer.committed(tp) or 0 for tp in partitions}
        ends = await consumer.end_offsets(partitions)
        return committed, {tp.partition: offset for tp, offset in ends.items()}
    finally:
        await consumer.stop()


async def test_batches_are_judged_while_the_one_before_publishes_and_all_land_once(
    kafka_bootstrap: str,
) -> None:
    settings = _settings(kafka_bootstrap)
    await prepare_topics(settings)
    seeds = load_answers(SEED_LAB)
    now = datetime.now(UTC)
    answers = [
        seeds[i % len(seeds)].model_copy(
            update={
                "event_id": f"e{i}",
                "answer_id": f"a{i}",
                "conversation_id": f"c{i % 13}",
                "occurred_at": now,
            }
        )
        for i in range(ANSWERS)
    ]
    await publish_answers(settings.bootstrap_servers, settings.topics.answers, answers)

    first_judge, second_judge = _TimedJudge(settings), _TimedJudge(settings)
    first = JudgeLoop(
        kafka_loop_options(_slot(settings, "w1")),
        first_judge,
        limits=stage_limits(settings),
    )
    publishing = _watch_publishing(first)
    second = JudgeLoop(
        kafka_loop_options(_slot(settings, "w2")),
        second_judge,
        limits=stage_limits(settings),
    )
    verdicts: list[Verdict] = []
    tasks = [asyncio.create_task(first.run())]
    try:
        async with OutputTail(settings.bootstrap_servers, settings.topics) as tail:
            deadline = time.monotonic() + 120
            while len(verdicts) < ANSWERS and time.monotonic() < deadline:
                if len(verdicts) >= 24 and len(tasks) == 1:  # mid-backlog: a rebalance
                    tasks.append(asyncio.create_task(second.run()))
                verdicts += [r.event for r in await tail.poll(0.5) if isinstance(r.event, Verdict)]
            verdicts += [r.event for r in await tail.poll(2.0) if isinstance(r.event, Verdict)]
    finally:
        for loop in (first, second):
            loop.stop()
        await asyncio.gather(*tasks)

    assert sorted(v.event_id for v in verdicts) == sorted(a.event_id for a in answers)
    assert first.judged + second.judged == ANSWERS  # nothing judged and published twice
    assert second.judged > 0, "the second loop never got partitions: the lock was not let go"
    overlapped = [
        (start, end)
        for start, end in first_judge.calls
        if any(p_start < start < p_end for p_start, p_end in publishing)
    ]
    assert overlapped, "no batch was judged while another published"
    committed, ends = await _committed_and_ends(settings)
    assert committed == ends  # every answer acknowledged, nothing beyond
