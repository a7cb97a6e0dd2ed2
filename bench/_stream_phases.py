"""One worker count put through its phases: saturation for the capacity, then each
open-loop load of it, every phase on fresh topics with fresh worker processes, its
numbers summarised by :mod:`bench.stream_bench`. The orchestration only."""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaProducer

from bench._answer_pool import Answers
from bench._broker import delete_topics
from bench._log import log
from bench._stream_produce import produce_backlog, produce_paced, warm_up
from bench._stream_reader import VerdictReader
from bench._stream_report import describe
from bench._stream_workers import wait_ready, wait_settled, worker_peak_rss_mib, worker_settings
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
from streamproc.monitor.judging_loop import judge_group_id
from streamproc.wiring import prepare_topics

__all__ = ["Phase", "PhaseRun", "measure_phase", "run_config", "run_phase", "threads_per_worker"]


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
