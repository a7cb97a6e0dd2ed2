"""The stream measured end to end: real worker processes against a real Kafka broker.

    .venv/bin/python -m bench stream [--bootstrap HOST:PORT] [--judge nli|rules]
        [--workers 1 2] [--answers 150] [--loads 0.5 0.9] [--duration 60]
        [--task QA ...] [--judge-in-thread] [--json PATH]

Without ``--bootstrap`` the script starts its own broker with ``scripts/kafka.sh`` in a
private state dir (a temporary folder, so it never meets another broker) and stops it
at the end. A broker just started spends about 20 s of CPU warming up under its first
load, on the worker's cores (BENCHMARKS.md); for steady-state numbers start one with
``scripts/kafka.sh start``, use it once, and pass ``--bootstrap``.

For each worker count (default: one worker, then two sharing the partitions), every
phase runs on fresh topics with freshly started workers (``python -m streamproc
worker``, the product's process, default settings apart from unique names and ONNX
threads: the default count divided among the workers, so two workers get one thread
each):

1. saturation (closed loop): a backlog of ``--answers`` answers produced at once; the
   sustained answers/s from the first verdict to the last is the capacity;
2. open loop, for each ``--loads`` fraction of that capacity: answers sent at that fixed
   rate for ``--duration`` seconds whatever the stream does, then drained.

Every phase reports decision latency (from the producer's send to the verdict read by a
``read_committed`` consumer) p50/p95/p99 and the judge group's lag sampled every second
(end offsets minus committed offsets of ``<app_id>.judge``). Before the stream, the
offline judge (``python -m bench judge``'s ``measure``, in a fresh process) judges the
same answers as the saturation backlog, for the ratio stream / offline.

Events: ``python -m bench judge``'s sample (the first answers per task type in sha256(id)
order), taken in turn from each task type so any prefix holds the same mix; each
produced answer gets fresh ids and ``occurred_at`` = now. A phase never repeats an
answer while the pool lasts (the judge caches evidence embeddings; repeats would
flatter it); the JSON says how many were repeats.

Before a phase is measured its workers must own every partition between them, and one
warm-up answer per partition must have come back (model loading and first calls are
paid once per worker, not per answer).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from bench import command_line
from bench.judge import measure, sample_events
from bench.machine import machine_info
from bench.stream_bench import (
    LagSampler,
    Mode,
    PhaseResult,
    as_json,
    pacing_schedule,
    summarise_phase,
)
from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent
from streamproc.evaluate.benchmark import TASKS, task_type_of
from streamproc.kafka.topics import topic_specs
from streamproc.monitor.judging_loop import judge_group_id
from streamproc.telemetry.logging import configure_logging
from streamproc.wiring import prepare_topics, topic_layout

ROOT = Path(__file__).resolve().parent.parent
KAFKA_SH = ROOT / "scripts" / "kafka.sh"
KAFKA_START_TIMEOUT_S = 600  # the first start on a machine fetches the broker's jars
READY_TIMEOUT_S = 180.0
STALL_S = 60.0
"""A phase gives up waiting once no verdict has come for this long."""


# --------------------------------------------------------------------------- events


def event_pool(
    data: Sequence[Path] | None, tasks: Sequence[str] | None = None
) -> tuple[list[AnswerEvent], str]:
    """Every answer of the benchmark's sample (of ``tasks`` only, when given), one task
    type after another in turn, so that any prefix holds the mix of
    ``python -m bench judge`` (equal shares per type) and the first 3 x 20 are exactly
    its 60 answers."""
    events, origin = sample_events(data, per_task=100_000)
    by_task: dict[str, list[AnswerEvent]] = {}
    for event in events:
        task = task_type_of(event)
        if not tasks or task in tasks:
            by_task.setdefault(task, []).append(event)
    if not by_task:
        raise SystemExit(f"no answers of task type {', '.join(tasks or [])} in the sample")
    shortest = min(len(group) for group in by_task.values())
    ordered = sorted(by_task, key=lambda t: (TASKS.index(t) if t in TASKS else len(TASKS), t))
    pool = [by_task[task][i] for i in range(shortest) for task in ordered]
    counts = ", ".join(f"{task} {shortest}" for task in ordered)
    source = origin.split(" from ", 1)[-1].split(": the first", 1)[0]
    text = (
        f"{len(pool)} distinct answers ({counts}) from {source}: per task type in "
        "sha256(id) order, the types taken in turn (any prefix is an equal mix)"
    )
    return pool, text


def fresh(event: AnswerEvent, run: str, index: int) -> tuple[str, bytes, bytes]:
    """The answer as a new one: its id, key (the conversation, as producers key) and
    bytes, with ``occurred_at`` = now."""
    answer_id = f"{run}-a{index}"
    conversation = f"{run}-c{index}"
    copy = event.model_copy(
        update={
            "event_id": f"{run}-e{index}",
            "answer_id": answer_id,
            "conversation_id": conversation,
            "occurred_at": datetime.now(UTC),
        }
    )
    return answer_id, conversation.encode(), copy.model_dump_json().encode()


# --------------------------------------------------------------------- offline judge


def offline_judge(judge: str, batch_size: int, events: Sequence[AnswerEvent]) -> dict[str, Any]:
    """The judge called directly on ``events``, as ``python -m bench judge`` measures it:
    micro-batches of ``batch_size``, a fresh process, one untimed warm-up call."""
    payload = [event.model_dump_json() for event in events]
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        result: dict[str, Any] = pool.submit(measure, "judge", judge, batch_size, payload).result()
    return result


# --------------------------------------------------------------------------- broker


@contextlib.contextmanager
def kafka_broker(bootstrap: str | None) -> Iterator[tuple[str, str]]:
    """The broker to measure against and where it came from: the given one, or one
    ``scripts/kafka.sh`` starts in a private temporary state dir and stops afterwards."""
    if bootstrap:
        yield bootstrap, f"given ({bootstrap})"
        return
    home = Path(tempfile.mkdtemp(prefix="bench-stream-kafka-"))
    env = {**os.environ, "STREAMPROC_KAFKA_STATE": str(home / "state"), "PYTHON": sys.executable}

    def kafka_sh(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(KAFKA_SH), command],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=KAFKA_START_TIMEOUT_S,
            check=False,
        )

    log(f"starting a private broker (state in {home})")
    started = kafka_sh("start")
    lines = started.stdout.strip().splitlines()
    try:
        if started.returncode != 0 or not lines:
            raise SystemExit(f"scripts/kafka.sh start failed:\n{started.stderr}")
        yield lines[0], f"private, started by scripts/kafka.sh ({lines[0]})"
    finally:
        stopped = kafka_sh("stop")
        if stopped.returncode != 0:
            log(f"scripts/kafka.sh stop failed:\n{stopped.stderr}")
        shutil.rmtree(home, ignore_errors=True)


def worker_settings(
    bootstrap: str, app_id: str, judge: str, threads: int, *, judge_process: bool = True
) -> Settings:
    """Product defaults, with every topic unique to this phase and ``threads`` ONNX
    intra-op threads per worker; JSON logs at INFO whatever the environment says, since
    :func:`wait_ready` reads the partition assignments from them. ``judge_process``:
    ``worker.judge_process`` (``--judge-in-thread`` measures the judge in a thread)."""
    return Settings(
        app_id=app_id,
        broker_url=f"kafka://{bootstrap}",
        log_json=True,
        log_level="INFO",
        **run_topics(app_id),
        judge={"name": judge, "inference": {"intra_op_threads": threads}},
        worker={"judge_process": judge_process},
    )


def run_topics(app_id: str) -> dict[str, Any]:
    """Settings groups naming every topic a worker writes after ``app_id``, so a run on a
    shared broker meets no other run (and deleting its topics deletes only its own)."""
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return {
        "topics": {name: f"{app_id}.{name}" for name in names},
        "window": {"late_topic": f"{app_id}.late", "hopping_topic": f"{app_id}.hopping"},
        "alerts": {"topic": f"{app_id}.alerts"},
        "audit": {"topic": f"{app_id}.audit"},
        "review": {
            "queue_topic": f"{app_id}.review-queue",
            "labels_topic": f"{app_id}.labels",
        },
        "labels": {
            "deltas_topic": f"{app_id}.label-deltas",
            "accuracy_topic": f"{app_id}.judge-accuracy",
        },
        "gate": {
            "requests_topic": f"{app_id}.gate-requests",
            "replies_topic": f"{app_id}.gate-replies",
        },
    }


async def delete_topics(settings: Settings) -> None:
    """Leave a shared broker as found: this phase's topics go (groups stay; they are
    empty and named after the phase)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    await admin.start()
    try:
        await admin.delete_topics([spec.name for spec in topic_specs(topic_layout(settings))])
    except Exception as error:  # noqa: BLE001 - cleanup; the numbers are already taken
        log(f"could not delete the phase's topics: {error!r}")
    finally:
        await admin.close()


# --------------------------------------------------------------------- verdict reader


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


# ------------------------------------------------------------------------- workers


def judge_assignment(log_path: Path) -> list[str]:
    """The judge partitions a worker owns now, from its JSON log (the last
    ``partitions_assigned`` / ``partitions_revoked`` of its judge consumer)."""
    owned: list[str] = []
    if not log_path.exists():
        return owned
    for line in log_path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("consumer") != "judge":
            continue
        if entry.get("event") == "partitions_assigned":
            owned = [str(p) for p in entry.get("partitions", [])]
        elif entry.get("event") == "partitions_revoked":
            owned = []
    return owned


async def wait_ready(workers: Sequence[WorkerProcess], partitions: int) -> None:
    """Until every worker owns judge partitions and together they own each exactly once."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        check_alive(workers)
        owned = [judge_assignment(w.log_path) for w in workers]
        flat = [p for each in owned for p in each]
        if all(owned) and len(flat) == len(set(flat)) == partitions:
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"workers not ready after {READY_TIMEOUT_S:g} s:\n{workers[0].log_tail()}")


def worker_peak_rss_mib(worker: WorkerProcess) -> float | None:
    """Peak RSS (VmHWM) of a worker plus its judge's process (``judge_pid`` of its
    ``worker_starting`` log line), in MiB; None where /proc cannot tell."""
    pids = [worker.pid]
    for line in worker.log_path.read_text(errors="replace").splitlines():
        if '"worker_starting"' in line:
            with contextlib.suppress(ValueError, AttributeError):
                pids.append(json.loads(line).get("judge_pid"))
    total = 0.0
    for pid in pids:
        if pid is None:
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return None
        kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))
        total += int(kib) / 1024
    return total


def check_alive(workers: Sequence[WorkerProcess]) -> None:
    for worker in workers:
        if not worker.running:
            raise RuntimeError(f"a worker exited:\n{worker.log_tail()}")


async def wait_settled(
    reader: VerdictReader, ids: set[str], workers: Sequence[WorkerProcess]
) -> None:
    """Until every answer in ``ids`` has a verdict or a dead letter, or none came for
    ``STALL_S`` (what is left is reported missing)."""
    done, progress_at = -1, time.monotonic()
    while True:
        check_alive(workers)
        now_done = reader.settled(ids)
        if now_done == len(ids):
            return
        if now_done != done:
            done, progress_at = now_done, time.monotonic()
        elif time.monotonic() - progress_at > STALL_S:
            log(f"  {len(ids) - done} answers still undecided after {STALL_S:g} s of silence")
            return
        await asyncio.sleep(0.1)


# ------------------------------------------------------------------------ producing


@dataclass
class Produced:
    """What a phase sent: answer id -> send time, and how late each send was."""

    sent: dict[str, float] = field(default_factory=dict)
    slips: list[float] = field(default_factory=list)


class Answers:
    """The pool handed out in order, each answer fresh (see :func:`fresh`)."""

    def __init__(self, pool: Sequence[AnswerEvent], run: str) -> None:
        self._pool = pool
        self._run = run
        self.taken = 0
        """Answers handed out so far: the next one is the pool's ``taken % len(pool)``."""
        self.repeats = 0

    @property
    def size(self) -> int:
        """Distinct answers in the pool."""
        return len(self._pool)

    def take(self) -> tuple[str, bytes, bytes]:
        index = self.taken
        self.taken += 1
        self.repeats += index >= len(self._pool)
        return fresh(self._pool[index % len(self._pool)], self._run, index)


async def warm_up(
    producer: AIOKafkaProducer,
    settings: Settings,
    pool: Sequence[AnswerEvent],
    reader: VerdictReader,
    workers: Sequence[WorkerProcess],
) -> None:
    """One answer per partition, from the end of the pool, until all are decided."""
    warm = Answers(list(reversed(pool)), f"{settings.app_id}-warm")
    ids = set()
    for partition in range(settings.topics.partitions):
        answer_id, key, value = warm.take()
        await producer.send(settings.topics.answers, value, key=key, partition=partition)
        ids.add(answer_id)
    await producer.flush()
    await wait_settled(reader, ids, workers)
    if reader.settled(ids) < len(ids):
        raise RuntimeError(f"warm-up answers undecided:\n{workers[0].log_tail()}")


async def produce_backlog(
    producer: AIOKafkaProducer, topic: str, answers: Answers, count: int
) -> Produced:
    """``count`` answers as fast as the client takes them."""
    produced = Produced()
    for _ in range(count):
        answer_id, key, value = answers.take()
        produced.sent[answer_id] = time.monotonic()
        await producer.send(topic, value, key=key)
    await producer.flush()
    return produced


async def produce_paced(
    producer: AIOKafkaProducer, topic: str, answers: Answers, schedule: Sequence[float]
) -> Produced:
    """One answer at each time of ``schedule`` (seconds from now), never waiting for
    an earlier send to be acknowledged."""
    produced = Produced()
    start = time.monotonic()
    for offset in schedule:
        delay = start + offset - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        answer_id, key, value = answers.take()
        now = time.monotonic()
        produced.slips.append(max(0.0, now - start - offset))
        produced.sent[answer_id] = now
        await producer.send(topic, value, key=key)
    await producer.flush()
    return produced


# --------------------------------------------------------------------------- phases


@dataclass(frozen=True)
class Phase:
    """What to run: a backlog of ``count`` answers, or ``rate`` answers/s for a while."""

    mode: Mode
    count: int = 0
    rate: float | None = None
    load: float | None = None
    duration_s: float = 0.0


@dataclass
class PhaseRun:
    result: PhaseResult
    repeats: int
    app_id: str
    lag_sample_errors: int
    peak_rss_mib: float | None = None
    """The largest worker's peak RSS, its judge's process included."""


async def run_phase(
    bootstrap: str,
    args: argparse.Namespace,
    workers: int,
    threads: int,
    phase: Phase,
    pool: Sequence[AnswerEvent],
) -> PhaseRun:
    """One phase on fresh topics with fresh worker processes."""
    app_id = f"bench-{uuid.uuid4().hex[:8]}-w{workers}"
    settings = worker_settings(
        bootstrap, app_id, args.judge, threads, judge_process=not args.judge_in_thread
    )
    await prepare_topics(settings)
    reader = VerdictReader(settings)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1)
    processes = [
        WorkerProcess(settings, args.log_dir / f"{app_id}-{i}.log") for i in range(workers)
    ]
    try:
        for process in processes:
            process.start()
        await wait_ready(processes, settings.topics.partitions)
        # Started once the workers are in: by then the new topics have their leaders.
        await reader.start()
        await producer.start()
        await warm_up(producer, settings, pool, reader, processes)
        return await measure_phase(settings, phase, pool, producer, reader, processes)
    finally:
        await producer.stop()
        await reader.stop()
        await asyncio.gather(*(asyncio.to_thread(p.stop) for p in processes))
        await delete_topics(settings)


async def measure_phase(
    settings: Settings,
    phase: Phase,
    pool: Sequence[AnswerEvent],
    producer: AIOKafkaProducer,
    reader: VerdictReader,
    workers: Sequence[WorkerProcess],
) -> PhaseRun:
    """Produce the phase's answers, wait for their verdicts, sample lag meanwhile."""
    answers = Answers(pool, settings.app_id)
    topics = settings.topics
    sampler = LagSampler(
        settings.bootstrap_servers,
        topics.answers,
        topics.partitions,
        judge_group_id(settings.app_id),
    )
    started = time.monotonic()
    await sampler.start(started)
    try:
        if phase.mode == "saturation":
            produced = await produce_backlog(producer, topics.answers, answers, phase.count)
        else:
            assert phase.rate is not None
            schedule = pacing_schedule(phase.rate, phase.duration_s)
            produced = await produce_paced(producer, topics.answers, answers, schedule)
        await wait_settled(reader, set(produced.sent), workers)
        await asyncio.sleep(1.0)  # one more lag sample after the last commit
        peak_rss = max((worker_peak_rss_mib(w) or 0.0 for w in workers), default=0.0)
    finally:
        await sampler.stop()
    result = summarise_phase(
        phase.mode,
        len(workers),
        produced.sent,
        reader.seen,
        dead=list(reader.dead),
        lag=sampler.samples,
        load=phase.load,
        offered_rate=phase.rate,
        slips_s=produced.slips,
        wall_s=time.monotonic() - started,
        timings=reader.timings,
        judged_at=reader.judged_at,
    )
    return PhaseRun(result, answers.repeats, settings.app_id, sampler.errors, peak_rss or None)


async def run_config(
    bootstrap: str, args: argparse.Namespace, workers: int, pool: Sequence[AnswerEvent]
) -> dict[str, Any]:
    """Saturation, then each open-loop load of the capacity it measured."""
    threads = threads_per_worker(args, workers)
    label = f"{workers} worker(s), {threads} ONNX thread(s) each"
    log(f"{label}: saturation, {args.answers} answers")
    saturation = Phase("saturation", count=args.answers)
    runs = [await run_phase(bootstrap, args, workers, threads, saturation, pool)]
    log(f"  {describe(runs[-1].result)}")
    capacity = runs[0].result.sustained_rate
    for load in args.loads:
        if capacity is None:
            log(f"  no capacity measured: open loop at {load:g} skipped")
            continue
        rate = load * capacity
        log(f"{label}: open loop, {load:g} x capacity = {rate:.2f}/s for {args.duration:g} s")
        phase = Phase("open-loop", rate=rate, load=load, duration_s=args.duration)
        runs.append(await run_phase(bootstrap, args, workers, threads, phase, pool))
        log(f"  {describe(runs[-1].result)}")
    return {
        "workers": workers,
        "threads_per_worker": threads,
        "capacity": capacity,
        "phases": [
            {
                **as_json(run.result),
                "app_id": run.app_id,
                "repeated_answers": run.repeats,
                "lag_sample_errors": run.lag_sample_errors,
                "peak_rss_mib": run.peak_rss_mib,
            }
            for run in runs
        ],
    }


def threads_per_worker(args: argparse.Namespace, workers: int) -> int:
    if args.threads is not None:
        return int(args.threads)
    default = Settings().judge.inference.intra_op_threads
    return max(1, default // workers)


def describe(result: PhaseResult) -> str:
    rate = result.sustained_rate if result.mode == "saturation" else result.achieved_rate
    p99 = f"{result.latency.p99_ms:.0f} ms" if result.latency else "n/a"
    return (
        f"{result.decided}/{result.sent} decided, {fmt(rate)} answers/s, p99 {p99}, "
        f"max lag {result.max_lag}"
    )


# --------------------------------------------------------------------------- report


def settings_in_force() -> dict[str, Any]:
    """The defaults every phase's workers run with (besides names and ONNX threads)."""
    settings = Settings()
    return {
        "worker": settings.worker.model_dump(mode="json"),
        "partitions": settings.topics.partitions,
        "inference": settings.judge.inference.model_dump(mode="json"),
        "calibrator": settings.judge.calibrator,
        "audit_enabled": settings.audit.enabled,
    }


def fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _judge_times(part_ms: Mapping[str, float] | None) -> str:
    """One part of the latency (e.g. the judge's batch time) at p50 and p99."""
    if not part_ms:
        return "-"
    return f"{fmt(part_ms['p50'], 0)} / {fmt(part_ms['p99'], 0)}"


def render(report: dict[str, Any]) -> str:
    """The markdown table and the ratios, for a reader and for BENCHMARKS.md."""
    header = [
        "workers x threads",
        "mode",
        "offered/s",
        "sent",
        "decided",
        "dead",
        "missing",
        "sustained/s",
        "achieved/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "judge p50 / p99 ms",
        "mean batch",
        "lag max",
        "lag end",
        "peak RSS MiB",
    ]
    rows = []
    for config in report["configs"]:
        who = f"{config['workers']} x {config['threads_per_worker']}"
        for phase in config["phases"]:
            latency = phase["latency_ms"] or {}
            mode = (
                "saturation (backlog)"
                if phase["mode"] == "saturation"
                else f"open loop {phase['load']:.0%}"
            )
            rows.append(
                [
                    who,
                    mode,
                    fmt(phase["offered_rate"], 2) if phase["offered_rate"] else "-",
                    str(phase["sent"]),
                    str(phase["decided"]),
                    str(phase["dead_letters"]),
                    str(phase["missing"]),
                    fmt(phase["sustained_rate"], 2),
                    fmt(phase["achieved_rate"], 2),
                    *(fmt(latency.get(k), 0) for k in ("p50", "p95", "p99")),
                    _judge_times(phase.get("judge_ms")),
                    fmt(phase.get("mean_batch"), 1) if phase.get("mean_batch") else "-",
                    str(phase["max_lag"]),
                    str(phase["final_lag"]),
                    fmt(phase.get("peak_rss_mib"), 0),
                ]
            )
    offline = report["offline"]
    lines = [
        f"Stream benchmark, judge `{report['judge']}` (in a {report['judge_in']} of each "
        f"worker): {report['events']}; broker "
        f"{report['broker']}; machine {report['machine']['nproc']} CPUs "
        f"({report['machine']['cpu_model']}), Python {report['machine']['python']}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + " --- |" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
    ]
    if "skipped" in offline:
        lines.append(f"Offline judge: skipped ({offline['skipped']}).")
    else:
        lines.append(
            f"Offline judge (called directly, batches of {report['batch_size']}, fresh "
            f"process): {offline['answers_per_s']:.2f} answers/s on the same "
            f"{offline['answers']} answers as the backlog."
        )
        for config in report["configs"]:
            ratio = config.get("stream_over_offline")
            lines.append(
                f"- stream / offline, {config['workers']} worker(s): "
                f"{'n/a' if ratio is None else f'x{ratio:.2f}'} (target >= 0.90)"
            )
    for config in report["configs"]:
        for phase in config["phases"]:
            if phase["load"] == 0.5 and phase["latency_ms"]:
                lines.append(
                    f"- p99 decision latency at 50 % load, {config['workers']} worker(s): "
                    f"{phase['latency_ms']['p99']:,.0f} ms (target <= 1,500 ms on the mix, "
                    "<= 300 ms on QA-like traffic: --task QA)"
                )
    lines += ["", "Where the decision latency goes (p50 / p99 ms of each part):"]
    for config in report["configs"]:
        for phase in config["phases"]:
            name = "saturation" if phase["mode"] == "saturation" else f"{phase['load']:.0%}"
            lines.append(
                f"- {config['workers']} worker(s), {name}: before judging (reading, waiting "
                f"for the batch in flight) {_judge_times(phase.get('before_judge_ms'))}, "
                f"judging {_judge_times(phase.get('judge_ms'))}, after (publishing, commit, "
                f"reading the verdict) {_judge_times(phase.get('after_judge_ms'))}"
            )
    lines += ["", "Judge-group lag, one sample per second:"]
    for config in report["configs"]:
        for phase in config["phases"]:
            lags = " ".join(str(lag) for _, lag in phase["lag_samples"])
            name = "saturation" if phase["mode"] == "saturation" else f"{phase['load']:.0%}"
            lines.append(f"- {config['workers']} worker(s), {name}: {lags}")
    return "\n".join(lines) + "\n"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(prog="python -m bench stream", description=doc.splitlines()[0])
    parser.add_argument("--bootstrap", metavar="HOST:PORT", help="use this broker")
    parser.add_argument("--judge", choices=["nli", "rules"], default="nli")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], metavar="N")
    parser.add_argument("--answers", type=int, default=150, help="saturation backlog")
    parser.add_argument("--loads", type=float, nargs="*", default=[0.5, 0.9], metavar="F")
    parser.add_argument("--duration", type=float, default=60.0, help="open-loop seconds")
    parser.add_argument("--threads", type=int, help="ONNX threads per worker (default: split)")
    parser.add_argument(
        "--task", choices=TASKS, action="append", help="only these task types (e.g. QA)"
    )
    parser.add_argument("--data", type=Path, action="append", metavar="FILE")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write every number here")
    parser.add_argument("--log-dir", type=Path, help="worker logs (default: a temp dir)")
    parser.add_argument(
        "--judge-in-thread",
        action="store_true",
        help="worker.judge_process = false: the judge in a thread of the worker",
    )
    args = parser.parse_args(argv)
    if args.answers < 2 or min(args.workers) < 1 or args.duration <= 0:
        parser.error("--answers must be 2 or more, --workers 1 or more, --duration > 0")
    if any(load <= 0 for load in args.loads):
        parser.error("--loads are positive fractions of the capacity")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be 1 or more")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("WARNING", json_logs=False)  # stdout is the report's
    logging.getLogger("aiokafka").setLevel(logging.ERROR)  # new topics' leader elections
    command = command_line()
    print(f"Command: `{command}`\n", flush=True)
    args.log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="bench-stream-logs-"))
    args.log_dir.mkdir(parents=True, exist_ok=True)
    pool, events = event_pool(args.data, args.task)
    batch_size = Settings().worker.batch_max
    backlog = pool[: args.answers]
    log(f"offline judge on {len(backlog)} answers ...")
    offline = offline_judge(args.judge, batch_size, backlog)
    report: dict[str, Any] = {
        "command": command,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "judge": args.judge,
        "events": events,
        "batch_size": batch_size,
        "offline": offline,
        "worker_settings": settings_in_force(),
        "judge_in": "thread" if args.judge_in_thread else "process",
        "worker_logs": str(args.log_dir),
    }
    with kafka_broker(args.bootstrap) as (bootstrap, broker):
        report["broker"] = broker
        report["configs"] = [
            asyncio.run(run_config(bootstrap, args, workers, pool)) for workers in args.workers
        ]
    for config in report["configs"]:
        stream, alone = config["capacity"], offline.get("answers_per_s")
        config["stream_over_offline"] = stream / alone if stream and alone else None
    print(render(report), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        log(f"wrote {args.json}")
    return 0
