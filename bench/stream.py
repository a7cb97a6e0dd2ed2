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
import json
import logging
import tempfile
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from bench import command_line
from bench._answer_pool import Answers, event_pool, fresh
from bench._broker import delete_topics, kafka_broker, run_topics
from bench._log import log
from bench._stream_phases import run_config
from bench._stream_report import render, settings_in_force
from bench._stream_workers import worker_settings
from bench.judge import measure
from bench.machine import machine_info
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent
from streamproc.evaluate.benchmark import TASKS
from streamproc.telemetry.logging import configure_logging

# The runner's entry point and argument parsing live here; the parts live in bench/_*.py
# (the answer pool and the broker are shared with ``python -m bench gate``). The names
# below them are re-exported for the scripts and benchmarks that import them from here.
__all__ = [
    "Answers",
    "delete_topics",
    "event_pool",
    "fresh",
    "kafka_broker",
    "log",
    "main",
    "offline_judge",
    "parse_args",
    "render",
    "run_topics",
    "worker_settings",
]


def offline_judge(judge: str, batch_size: int, events: Sequence[AnswerEvent]) -> dict[str, Any]:
    """The judge called directly on ``events``, as ``python -m bench judge`` measures it:
    micro-batches of ``batch_size``, a fresh process, one untimed warm-up call."""
    payload = [event.model_dump_json() for event in events]
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        result: dict[str, Any] = pool.submit(measure, "judge", judge, batch_size, payload).result()
    return result


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
