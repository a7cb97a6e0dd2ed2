"""The windows' corrected rate from live accuracy, on real Kafka: a window loop with the
live table reads the judge-accuracy topic (published before it started, and while it
runs) and corrects a cell with enough labels by its live counts (source "live", labels
used), one with too few by the offline benchmark."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from aiokafka import AIOKafkaConsumer

from streamproc.config import Settings
from streamproc.contracts.events import AnswerOutcome, WindowAggregate
from streamproc.contracts.label_events import AccuracyCell, JudgeAccuracyEvent, Tally
from streamproc.kafka.clients import Headers, publish_raw
from streamproc.monitor.windows.live_accuracy import LiveAccuracy
from streamproc.monitor.windows.loop import WindowLoop
from streamproc.rates.live_accuracy import CellState, accuracy_event
from streamproc.wiring import (
    judge_key_of,
    kafka_loop_options,
    measured_accuracy,
    prepare_topics,
    window_loop_options,
)

BASE = datetime(2026, 2, 2, 10, 0, tzinfo=UTC)  # long past: quiet keys close by idle


def _settings(bootstrap: str) -> Settings:
    run = uuid.uuid4().hex[:8]
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return Settings(
        app_id=f"live-{run}",
        broker_url=f"kafka://{bootstrap}",
        topics={**{name: f"live-{run}.{name}" for name in names}, "partitions": 2},
        judge={"name": "rules"},
        window={
            "grace_s": 1.0,
            "idle_close_s": 1.0,
            "tick_s": 0.5,
            "late_topic": f"live-{run}.late",
            "hopping_topic": f"live-{run}.hopping",
        },
        alerts={"topic": f"live-{run}.alerts"},
        audit={"topic": f"live-{run}.audit"},
        review={"queue_topic": f"live-{run}.review", "labels_topic": f"live-{run}.labels"},
        labels={
            "deltas_topic": f"live-{run}.deltas",
            "accuracy_topic": f"live-{run}.accuracy",
            "min_labels": 30,
        },
        worker={"event_time_max_past_s": 10 * 365 * 24 * 3600.0},
    )


def _accuracy(assistant: str, judge: str, tp: int, fn: int, tn: int, fp: int) -> JudgeAccuracyEvent:
    cell = AccuracyCell(tenant="t", assistant_id=assistant, task_type="Summary", judge_key=judge)
    state = CellState(
        tp=Tally(n=tp, w=tp, w2=tp),
        fn=Tally(n=fn, w=fn, w2=fn),
        tn=Tally(n=tn, w=tn, w2=tn),
        fp=Tally(n=fp, w=fp, w2=fp),
        labelled_answers=tp + fn + tn + fp,
        labels=tp + fn + tn + fp,
    )
    return accuracy_event(cell, state, offline=None, findings=[], now=datetime.now(UTC))


def _outcomes(assistant: str, count: int, flagged: int) -> list[tuple[bytes, bytes, Headers]]:
    return [
        (
            assistant.encode(),
            AnswerOutcome(
                event_id=f"{assistant}-{i}",
                answer_id=f"{assistant}-answer-{i}",
                tenant="t",
                assistant_id=assistant,
                model="m",
                occurred_at=BASE + timedelta(seconds=i),
                hallucinated=i < flagged,
                abstained=False,
                contradicted_claims=0,
                unsupported_claims=0,
                faithfulness=None,
                judge_ms=2.0,
                task_type="Summary",
            )
            .model_dump_json()
            .encode(),
            [],
        )
        for i in range(count)
    ]


@pytest.mark.timeout(180)
async def test_a_cell_with_enough_labels_is_corrected_live_and_one_with_few_offline(
    kafka_bootstrap: str,
) -> None:
    settings = _settings(kafka_bootstrap)
    await prepare_topics(settings)
    judge = judge_key_of(settings.judge)
    accuracy_topic = settings.labels.accuracy_topic

    async def publish_accuracy(*events: JudgeAccuracyEvent) -> None:
        records: list[tuple[bytes | None, bytes, Headers]] = [
            (e.cell.key.encode(), e.model_dump_json().encode(), []) for e in events
        ]
        await publish_raw(kafka_bootstrap, accuracy_topic, records)

    live_cell = _accuracy("live-bot", judge, tp=18, fn=2, tn=45, fp=5)  # 70 labels
    few_cell = _accuracy("few-bot", judge, tp=5, fn=1, tn=3, fp=1)  # 10 < min_labels
    other_judge = _accuracy("few-bot", "nli+another-calibrator", tp=18, fn=2, tn=45, fp=5)
    stale = _accuracy("live-bot", judge, tp=1, fn=1, tn=1, fp=1)  # replaced by live_cell
    await publish_accuracy(stale, live_cell, few_cell, other_judge)

    reader = AIOKafkaConsumer(
        settings.topics.aggregates,
        bootstrap_servers=kafka_bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        metadata_max_age_ms=1000,
    )
    await reader.start()
    latest: dict[str, WindowAggregate] = {}

    async def until(done: Callable[[], bool], what: str, task: asyncio.Task[None]) -> None:
        deadline = time.monotonic() + 90
        while not done():
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {latest}"
            assert not task.done(), task.exception()
            for records in (await reader.getmany(timeout_ms=500)).values():
                for record in records:
                    aggregate = WindowAggregate.model_validate_json(record.value or b"")
                    latest[aggregate.assistant_id] = aggregate

    table = LiveAccuracy(settings.bootstrap_servers, settings.labels.accuracy_topic)
    loop = WindowLoop(
        kafka_loop_options(settings),
        window_loop_options(settings),
        accuracy=measured_accuracy(settings.judge),
        live_accuracy=table,
        judge_key=judge,
    )
    task = asyncio.create_task(loop.run())
    try:
        await publish_raw(
            kafka_bootstrap,
            settings.topics.outcomes,
            _outcomes("live-bot", 40, 16) + _outcomes("few-bot", 40, 16),
        )
        await until(lambda: {"live-bot", "few-bot"} <= set(latest), "both windows", task)
        # A cell that gets enough labels while the loop runs: the table follows the topic.
        late_cell = _accuracy("late-bot", judge, tp=20, fn=5, tn=40, fp=5)
        await publish_accuracy(late_cell)
        deadline = time.monotonic() + 30
        while table.lookup("t", "late-bot", "Summary", judge) is None:
            assert time.monotonic() < deadline, "the table never saw the new cell"
            await asyncio.sleep(0.2)
        await publish_raw(kafka_bootstrap, settings.topics.outcomes, _outcomes("late-bot", 20, 5))
        await until(lambda: "late-bot" in latest, "the late cell's window", task)
    finally:
        loop.stop()
        await asyncio.wait_for(task, 30)
        await reader.stop()

    assert table.caught_up and table.skipped == 0
    live = latest["live-bot"].corrected_rate
    assert live is not None and (live.source, live.labels_used) == ("live", 70)
    assert live.identifiable and live.estimate is not None
    se, sp = 18 / 20, 45 / 50  # the latest event of the cell, not the stale one before it
    assert live.estimate == pytest.approx((16 / 40 + sp - 1) / (se + sp - 1))
    few = latest["few-bot"].corrected_rate
    assert few is not None and (few.source, few.labels_used) == ("offline-benchmark", 0)
    late = latest["late-bot"].corrected_rate
    assert late is not None and (late.source, late.labels_used) == ("live", 70)
