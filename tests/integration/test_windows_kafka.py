"""Windows on real Kafka: two tenants sharing an assistant id keep apart numbers, the
window state survives a killed worker (changelog recovery), a late answer inside the
lateness revises its window, one past it goes to the late-events topic, and a quiet
key's last windows (tumbling and hopping) close on time."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent, AnswerOutcome, WindowAggregate
from streamproc.kafka.clients import publish_answers, publish_raw
from streamproc.monitor.windows.loop import WindowLoop
from streamproc.monitor.windows.report import WindowReport
from streamproc.samples import SEED_LAB, load_answers
from streamproc.verdicts.record import OutboundRecord
from streamproc.wiring import (
    kafka_loop_options,
    measured_accuracy,
    prepare_topics,
    window_loop_options,
)

BASE = datetime(2026, 2, 2, 10, 0, tzinfo=UTC)  # event time, long past: quiet keys close by idle
REPLAY_HORIZON_S = 10 * 365 * 24 * 3600.0
Window = tuple[str, str, str, float]  # tenant, window label, topic kind, start offset (s)


def _settings(bootstrap: str) -> Settings:
    run = uuid.uuid4().hex[:8]
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return Settings(
        app_id=f"win-{run}",
        broker_url=f"kafka://{bootstrap}",
        topics={**{name: f"win-{run}.{name}" for name in names}, "partitions": 3},
        judge={"name": "rules"},
        window={
            "size_s": 60.0,
            "hopping": [{"size_s": 120.0, "hop_s": 60.0}],
            "grace_s": 1.0,
            "idle_close_s": 2.0,
            "retain_closed_s": 300.0,  # lateness: 5 min of the key's own event time
            "tick_s": 0.5,
            "late_topic": f"win-{run}.late",
            "hopping_topic": f"win-{run}.hopping",
        },
        worker={
            "rebalance_timeout_s": 10.0,
            "session_timeout_s": 6.0,
            "instance_id": "only",  # the replacement fences the killed worker at once
            "event_time_max_past_s": REPLAY_HORIZON_S,
        },
    )


class _Outputs:
    """A read_committed reader of the aggregates, hopping aggregates and late outcomes."""

    def __init__(self, settings: Settings) -> None:
        self.kinds = {
            settings.topics.aggregates: "tumbling",
            settings.window.hopping_topic: "hopping",
            settings.window.late_topic: "late",
        }
        self.consumer = AIOKafkaConsumer(
            *self.kinds,
            bootstrap_servers=settings.bootstrap_servers,
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
            metadata_max_age_ms=1000,
        )
        self.windows: dict[Window, list[WindowAggregate]] = {}
        self.late: list[dict[str, Any]] = []

    async def until(self, done: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for tp, records in (await self.consumer.getmany(timeout_ms=500)).items():
                for record in records:
                    self._add(self.kinds[tp.topic], record.value or b"")
            if done():
                return
        pytest.fail(f"timed out waiting for {what}; seen {sorted(self.windows)} late {self.late}")

    def _add(self, kind: str, value: bytes) -> None:
        if kind == "late":
            self.late.append(json.loads(value))
            return
        aggregate = WindowAggregate.model_validate_json(value)
        key = (
            aggregate.tenant,
            aggregate.window,
            kind,
            (aggregate.window_start - BASE).total_seconds(),
        )
        self.windows.setdefault(key, []).append(aggregate)

    def latest(self, key: Window) -> WindowAggregate | None:
        found = self.windows.get(key)
        return max(found, key=lambda a: a.revision) if found else None


def _answers(tenant: str, offsets: list[float], tag: str) -> list[AnswerEvent]:
    seeds = load_answers(SEED_LAB)
    return [
        seeds[index % len(seeds)].model_copy(
            update={
                "event_id": f"{tag}-{index}",
                "answer_id": f"{tag}-answer-{index}",
                "tenant": tenant,
                "assistant_id": "bot",  # both tenants: one assistant id, one partition
                "model": "m",
                "occurred_at": BASE + timedelta(seconds=offset),
            }
        )
        for index, offset in enumerate(offsets)
    ]


@pytest.mark.timeout(300)
async def test_windows_survive_a_kill_keep_tenants_apart_and_route_late_answers(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = _settings(kafka_bootstrap)
    await prepare_topics(settings)
    outputs = _Outputs(settings)
    await outputs.consumer.start()
    bootstrap, topic = settings.bootstrap_servers, settings.topics.answers
    a_minute = ("A", "1m", "tumbling", 0.0)
    b_minute = ("B", "1m", "tumbling", 0.0)
    try:
        first = WorkerProcess(settings, tmp_path / "worker-1.log").start()
        try:
            await publish_answers(bootstrap, topic, _answers("A", [10, 11, 12], "a"))
            await publish_answers(bootstrap, topic, _answers("B", [10, 14], "b"))
            await outputs.until(
                lambda: (
                    outputs.latest(a_minute) is not None and outputs.latest(b_minute) is not None
                ),
                "both tenants' first minute",
                timeout_s=120,
            )
        finally:
            first.kill()  # SIGKILL: its state must come back from the changelog

        with WorkerProcess(settings, tmp_path / "worker-2.log") as replacement:
            # Inside the lateness: revises A's closed minute, counted on top of the three
            # answers the killed worker counted (restored state, not a fresh window).
            await publish_answers(bootstrap, topic, _answers("A", [20], "a-late"))
            await outputs.until(
                lambda: (w := outputs.latest(a_minute)) is not None and w.revision >= 1,
                "A's revised minute",
            )
            # A moves on to minute 6; its minute 0 is now sealed (6 min - grace - 5 min).
            await publish_answers(bootstrap, topic, _answers("A", [400], "a-next"))
            await outputs.until(
                lambda: outputs.latest(("A", "1m", "tumbling", 360.0)) is not None,
                "A's minute 6 (a quiet key's last window)",
            )
            await publish_answers(bootstrap, topic, _answers("A", [30], "a-too-late"))
            await outputs.until(lambda: bool(outputs.late), "the late-events topic")
            # B's last windows: the 2-minute ones ending at minute 1 and minute 2.
            await outputs.until(
                lambda: outputs.latest(("B", "2m", "hopping", 0.0)) is not None,
                "B's last hopping window",
            )
            log = replacement.log_path.read_text(errors="replace")
    finally:
        await outputs.consumer.stop()

    a_first, a_revised = outputs.windows[a_minute][0], outputs.latest(a_minute)
    assert a_revised is not None
    assert (a_first.answers, a_first.revision) == (3, 0)
    assert (a_revised.answers, a_revised.revision, a_revised.late_events) == (4, 1, 1)
    # Tenant B, same assistant id and partition: never revised, never mixed with A.
    assert [(w.answers, w.revision) for w in outputs.windows[b_minute]] == [(2, 0)]
    b_last = outputs.latest(("B", "2m", "hopping", 0.0))
    b_before = outputs.latest(("B", "2m", "hopping", -60.0))
    assert b_last is not None and b_before is not None
    assert (b_last.answers, b_before.answers) == (2, 2)
    assert (b_last.window_size_s, b_last.window_hop_s) == (120, 60)
    a_hopping = outputs.latest(("A", "2m", "hopping", 0.0))
    assert a_hopping is not None and a_hopping.answers == 4 and a_hopping.revision >= 1
    for aggregate in (a_revised, b_last):
        assert (aggregate.assistant_id, aggregate.model) == ("bot", "m")
        assert aggregate.judge_latency_p50_ms is not None
        # Every outcome names its task type: the rules judge's measured accuracy applies.
        corrected = aggregate.corrected_rate
        assert corrected is not None and corrected.n == aggregate.answered > 0
    assert set(a_revised.example_answer_ids) <= {f"a-answer-{i}" for i in range(3)} | {
        "a-late-answer-0"
    }
    (late,) = outputs.late  # written as judged, and not counted in any window
    assert (late["event_id"], late["tenant"], late["answer_id"]) == (
        "a-too-late-0",
        "A",
        "a-too-late-answer-0",
    )
    a_next = outputs.latest(("A", "1m", "tumbling", 360.0))
    assert a_next is not None and (a_next.answers, a_next.revision, a_next.late_events) == (1, 0, 0)
    assert "window_state_restored" in log and "late_event" in log


@pytest.mark.timeout(240)
async def test_hooks_get_every_delta_and_late_outcome_and_keep_their_state_across_a_restart(
    kafka_bootstrap: str,
) -> None:
    """A window loop in this process with both hooks: the in-transaction hook's records
    and state commit with the windows (its state comes back after a restart), the
    after-commit hook sees the deltas, aggregates and late outcomes the loop published."""
    settings = _settings(kafka_bootstrap)
    settings = settings.model_copy(  # one process, two loops in turn: no fixed slot
        update={"worker": settings.worker.model_copy(update={"instance_id": None})}
    )
    await prepare_topics(settings)
    hook_topic = settings.topics.flags  # unused by a window loop alone: the hook's output
    committed: list[WindowReport] = []
    restored: dict[int, object] = {}  # partition -> the hook state seen first

    def in_transaction(report: WindowReport) -> list[OutboundRecord]:
        restored.setdefault(report.partition, report.state.get("answered"))
        if not report.deltas:
            return []
        answered = report.state.get("answered", 0) + sum(d.answered for d in report.deltas)
        report.state["answered"] = answered
        return [OutboundRecord(hook_topic, b"hook", json.dumps({"answered": answered}).encode())]

    def outcome(tenant: str, at: float, tag: str, hallucinated: bool) -> bytes:
        return (
            AnswerOutcome(
                event_id=tag,
                answer_id=f"answer-{tag}",
                tenant=tenant,
                assistant_id="bot",
                model="m",
                occurred_at=BASE + timedelta(seconds=at),
                hallucinated=hallucinated,
                abstained=False,
                contradicted_claims=int(hallucinated),
                unsupported_claims=0,
                faithfulness=1.0,
                judge_ms=3.0,
            )
            .model_dump_json()
            .encode()
        )

    def answered() -> int:
        return sum(d.answered for r in committed for d in r.deltas)

    async def run_until(loop: WindowLoop, done: Callable[[], bool], what: str) -> None:
        task = asyncio.create_task(loop.run())
        try:
            deadline = time.monotonic() + 60
            while not done():
                assert time.monotonic() < deadline, f"timed out waiting for {what}"
                assert not task.done(), task.exception()
                await asyncio.sleep(0.2)
        finally:
            loop.stop()
            await asyncio.wait_for(task, 30)

    outcomes = settings.topics.outcomes
    first = [outcome("A", 10, "a1", True), outcome("A", 11, "a2", True)]
    first += [outcome("A", 12, "a3", False), outcome("B", 10, "b1", False)]
    # One key ("bot"): one partition, in this order. "a-old" is past A's lateness once
    # "a-next" moved A's event time on.
    later = [outcome("A", 400, "a-next", False), outcome("A", 30, "a-old", True)]
    await publish_raw(kafka_bootstrap, outcomes, [(b"bot", value, []) for value in first + later])
    loop = WindowLoop(
        kafka_loop_options(settings),
        window_loop_options(settings),
        accuracy=measured_accuracy(settings.judge),
        in_transaction=in_transaction,
        after_commit=committed.append,
    )
    await run_until(
        loop, lambda: answered() == 5 and any(r.late for r in committed), "deltas and the late one"
    )
    assert loop.late_events == 1 and loop.counted == 5
    deltas = [d for r in committed for d in r.deltas]
    by_tenant = {t: sum(d.hallucinated for d in deltas if d.tenant == t) for t in "AB"}
    assert by_tenant == {"A": 2, "B": 0}
    assert {
        d.example_answer_ids for d in deltas if d.tenant == "A" and d.start == BASE.timestamp()
    } == {("answer-a1", "answer-a2")}
    labels = {(a.tenant, a.window) for r in committed for a in r.aggregates}
    assert labels == {("A", "1m"), ("A", "2m"), ("B", "1m"), ("B", "2m")}
    [late] = [o for r in committed for o in r.late]
    assert late.event_id == "a-old"

    (partition,) = {r.partition for r in committed if r.deltas}  # "bot": one partition
    restored.clear()
    again = WindowLoop(
        kafka_loop_options(settings),
        window_loop_options(settings),
        accuracy=measured_accuracy(settings.judge),
        in_transaction=in_transaction,
        after_commit=committed.append,
    )
    await run_until(again, lambda: partition in restored, "a report after the restart")
    assert restored[partition] == 5  # the hook's state came back with the window state

    consumer = AIOKafkaConsumer(
        hook_topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    await consumer.start()
    try:
        values: list[int] = []
        deadline = time.monotonic() + 20
        while (not values or values[-1] != 5) and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                values += [json.loads(r.value or b"{}")["answered"] for r in records]
    finally:
        await consumer.stop()
    assert values and values[-1] == 5 and values == sorted(values)
