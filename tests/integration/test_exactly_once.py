"""Exactly once on real Kafka, under crashes and a broker restart.

Two workers share the input; 10,000 short answers arrive as a steady stream; workers are
SIGKILLed at seeded random points while they judge (so in the middle of batches, one
during start-up) and restarted under the same instance id; then, with the last answers
still being judged and windows open, the broker itself restarts, keeping its data. A
``read_committed`` reader then counts: every answer has exactly one verdict and one
outcome, nothing is dead-lettered, and the latest revision of every window adds up to the
answers sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent, EvidenceItem
from streamproc.wiring import prepare_topics

ANSWERS = 10_000
ASSISTANTS = 5
SEED = 20261130
FINAL_BURST = 3_000


def _settings(bootstrap: str, instance: str) -> Settings:
    run = _RUN
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return Settings(
        app_id=f"eos-{run}",
        broker_url=f"kafka://{bootstrap}",
        topics={**{name: f"eos-{run}.{name}" for name in names}, "partitions": 6},
        judge={"name": "rules"},
        window={"size_s": 60.0, "grace_s": 1.0, "idle_close_s": 3.0, "tick_s": 0.5},
        worker={
            "batch_max": 200,
            "rebalance_timeout_s": 10.0,
            "session_timeout_s": 6.0,
            "transaction_timeout_s": 10.0,
            "instance_id": instance,
            # A worker stuck for 35 s leaves by itself, and the test restarts it.
            "stall_after_s": 15.0,
            "stall_exit_s": 20.0,
            "event_time_max_past_s": 30 * 24 * 3600.0,
        },
        log_json=True,
    )


_RUN = uuid.uuid4().hex[:8]


def _answers(base: datetime) -> list[AnswerEvent]:
    """Short answers over ten one-minute windows and a few assistants, half supported."""
    out = []
    for index in range(ANSWERS):
        supported = index % 2 == 0
        out.append(
            AnswerEvent(
                event_id=f"e{index:05d}",
                answer_id=f"a{index:05d}",
                conversation_id=f"c{index % 97}",
                tenant="t1",
                assistant_id=f"assistant-{index % ASSISTANTS}",
                model="m1",
                occurred_at=base + timedelta(seconds=(index * 600) // ANSWERS),
                question="When does the store open?",
                answer="The store opens at 9 am." if supported else "The store opens at 7 am.",
                evidence=[EvidenceItem(id="D1", text="The store opens at 9 am on weekdays.")],
            )
        )
    return out


async def _produce(bootstrap: str, topic: str, answers: list[AnswerEvent]) -> None:
    """Send the answers as a steady stream (about 170 a second), so the crashes below
    land while batches are being judged, published and committed; the last
    ``FINAL_BURST`` at once, so the broker restart that follows finds a backlog."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=20, enable_idempotence=True
    )
    await producer.start()
    try:
        for start in range(0, len(answers), 100):
            futures = [
                await producer.send(
                    topic, key=a.conversation_id.encode(), value=a.model_dump_json().encode()
                )
                for a in answers[start : start + 100]
            ]
            await asyncio.gather(*futures)
            if start < len(answers) - FINAL_BURST:
                await asyncio.sleep(0.5)
    finally:
        await producer.stop()


class _CommittedCounts:
    """A read_committed reader of the outputs, from the beginning, without a group."""

    def __init__(self, settings: Settings) -> None:
        topics = settings.topics
        self.kinds = {
            topics.verdicts: "verdict",
            topics.outcomes: "outcome",
            topics.dead_letter: "dead_letter",
            topics.aggregates: "aggregate",
        }
        self.consumer = AIOKafkaConsumer(
            *self.kinds,
            bootstrap_servers=settings.bootstrap_servers,
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
        )
        self.verdicts: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.dead_letters: list[dict[str, object]] = []
        self.windows: dict[tuple[str, ...], tuple[int, int]] = {}

    async def poll(self) -> None:
        batches = await self.consumer.getmany(timeout_ms=1000)
        for tp, records in batches.items():
            kind = self.kinds[tp.topic]
            for record in records:
                if record.value is None or record.value == b'{"kind":"tick"}':
                    continue
                document = json.loads(record.value)
                if kind == "verdict":
                    self.verdicts[document["event_id"]] += 1
                elif kind == "outcome":
                    self.outcomes[document["event_id"]] += 1
                elif kind == "dead_letter":
                    self.dead_letters.append(document)
                else:
                    key = (
                        document["tenant"],
                        document["assistant_id"],
                        document["model"],
                        document["window"],
                        document["window_start"],
                    )
                    revision, _ = self.windows.get(key, (-1, 0))
                    if document["revision"] >= revision:
                        self.windows[key] = (document["revision"], document["answers"])

    def windowed(self) -> int:
        return sum(answers for _, answers in self.windows.values())


@pytest.mark.timeout(600)
async def test_kills_and_a_broker_restart_lose_and_duplicate_nothing(
    kafka_bootstrap: str, kafka_restart: Callable[[], str], tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    began = time.monotonic()
    settings = {name: _settings(kafka_bootstrap, name) for name in ("a", "b")}
    await prepare_topics(settings["a"])
    base = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=1)
    answers = _answers(base)
    workers: dict[str, WorkerProcess] = {}
    starts: Counter[str] = Counter()

    def start(name: str) -> None:
        starts[name] += 1
        log = tmp_path / f"worker-{name}-{starts[name]}.log"
        workers[name] = WorkerProcess(settings[name], log).start()

    counts = _CommittedCounts(settings["a"])
    await counts.consumer.start()
    kills: list[str] = []
    exits: list[str] = []  # workers that stopped themselves and were restarted
    producing = asyncio.create_task(
        _produce(kafka_bootstrap, settings["a"].topics.answers, answers)
    )
    try:
        start("a")
        start("b")
        # Crashes at seeded random points while the backlog is being judged.
        for round_ in range(4):
            await _poll_for(counts, rng.uniform(4.0, 9.0))
            victim = rng.choice(["a", "b"])
            workers[victim].kill()
            kills.append(f"{victim}@{len(counts.verdicts)}")
            start(victim)
            if round_ == 1:  # kill once more during start-up, before it has joined
                await _poll_for(counts, rng.uniform(0.5, 2.0))
                workers[victim].kill()
                kills.append(f"{victim}@startup")
                start(victim)
        # The broker restarts once the last answer is in (a plain aiokafka producer with
        # batches in flight was seen to hang across a restart, and the test's producer is
        # not what is under test), while the workers still judge and windows are open.
        while not producing.done():
            await counts.poll()
        producing.result()
        restarted_at = len(counts.verdicts)
        await asyncio.to_thread(kafka_restart)
        await _wait(
            counts,
            lambda: len(counts.verdicts) >= ANSWERS,
            timeout_s=240,
            workers=workers,
            restart=start,
            exits=exits,
            missing=lambda: f"{_missing(answers, counts)}; kills {kills}, exits {exits}",
        )
        await _wait(
            counts,
            lambda: counts.windowed() >= ANSWERS,
            timeout_s=120,
            workers=workers,
            restart=start,
            exits=exits,
            missing=lambda: f"{_missing(answers, counts)}; kills {kills}, exits {exits}",
        )
        await _poll_for(counts, 5.0)  # anything late or duplicated would show up now
    finally:
        producing.cancel()
        for worker in workers.values():
            worker.kill()
        await counts.consumer.stop()

    sent = {a.event_id for a in answers}
    duplicated = {e: n for e, n in counts.verdicts.items() if n > 1}
    assert set(counts.verdicts) == sent, f"lost {len(sent - set(counts.verdicts))}; kills {kills}"
    assert not duplicated, f"{len(duplicated)} verdicts duplicated; kills {kills}"
    assert set(counts.outcomes) == sent and max(counts.outcomes.values()) == 1
    assert counts.dead_letters == []
    assert counts.windowed() == ANSWERS, counts.windows
    print(  # the figures RELIABILITY.md quotes
        f"\nexactly-once: {ANSWERS} answers, kills {kills}, broker restarted at {restarted_at}; "
        f"self-exits {exits}; "
        f"verdicts {sum(counts.verdicts.values())} for {len(counts.verdicts)} answers, "
        f"outcomes {sum(counts.outcomes.values())}, dead letters {len(counts.dead_letters)}, "
        f"windowed {counts.windowed()} over {len(counts.windows)} windows, "
        f"{time.monotonic() - began:.0f} s"
    )


async def _poll_for(counts: _CommittedCounts, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await counts.poll()


async def _wait(
    counts: _CommittedCounts,
    done: Callable[[], bool],
    *,
    timeout_s: float,
    workers: dict[str, WorkerProcess],
    restart: Callable[[str], None],
    exits: list[str],
    missing: Callable[[], str],
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        await counts.poll()
        if done():
            return
        for name, worker in workers.items():
            if not worker.running:  # it stopped itself (exit 3, 4 or 5): as an orchestrator
                exits.append(f"{name}:{worker.wait(1.0)}")
                restart(name)
    for worker in workers.values():  # what each worker's tasks wait on (task_dump)
        if worker.pid is not None and worker.running:
            os.kill(worker.pid, signal.SIGUSR1)
    await asyncio.sleep(1.0)
    tails = "\n".join(f"--- {n}\n{w.log_tail(20)}" for n, w in workers.items())
    pytest.fail(
        f"timed out: verdicts {len(counts.verdicts)}, windowed {counts.windowed()}, "
        f"{missing()}\n{tails}",
        pytrace=False,
    )


def _missing(answers: list[AnswerEvent], counts: _CommittedCounts) -> str:
    """Which answers have no verdict, as runs of event ids, and their conversations (the
    input key: which partition they were read from)."""
    lost = [a for a in answers if a.event_id not in counts.verdicts]
    runs: list[list[str]] = []
    for answer in lost:
        index = int(answer.event_id[1:])
        if runs and int(runs[-1][-1][1:]) == index - 1:
            runs[-1].append(answer.event_id)
        else:
            runs.append([answer.event_id])
    spans = ", ".join(f"{r[0]}..{r[-1]}" if len(r) > 1 else r[0] for r in runs[:20])
    conversations = sorted({a.conversation_id for a in lost})
    return f"no verdict for {len(lost)}: {spans}; conversations {conversations[:40]}"
