"""The streaming gate measured: sentences released while answers stream over ``GET
/v1/stream``, against the same answers sent whole to ``POST /v1/check``.

    .venv/bin/python -m bench gate-stream [--json [PATH]] [--answers qa,ragtruth]
        [--loads 25,50,90] [--seconds 30] [--budget-ms 500] [--tokens-per-s 30,60]
        [--open-streams 200 [--open-streams-tps 2] [--open-streams-only]]

Per answer kind (``qa``, ``ragtruth``: ``bench gate``'s pools), two gate processes, one
after the other, each as ``bench gate`` starts one on its ``http`` path (product
defaults, a tokens file, publishing off): two, because the judge caches NLI pairs, and
the answers the streams sent would otherwise come back cheap to ``/v1/check``.

1. **Stream gate**: capacity (``bench gate``'s closed loop on ``/v1/check``, answers
   from the pool's end), then per ``--loads`` percentage of it for ``--seconds``:
   streams open as Poisson arrivals (seeded) at load x capacity answers/s, each writing
   its answer one token per delta at a pace drawn uniformly from ``--tokens-per-s``
   (a token: a word with the whitespace after it), then ``end`` right after its last
   token. The client times every send and every message, and knows, from the gate's own
   sentence splitter, which delta holds each sentence's last character and which
   completes it (the next sentence's first whole word; the ``end`` for the last one).
2. **Check gate**: the same closed loop (so both gates have the same history), then the
   same answers, schedule and paces, each sent whole to ``/v1/check`` when its stream
   sent its ``end``: what a caller waits for today.

Per level: a sentence's release delay (its message's arrival minus the send of the delta
holding its last character: includes the unavoidable wait for the next word), the same
from the completing delta, ``end`` to ``final``, the first checked sentence against
``/v1/check``'s reply (seconds from the stream's scheduled start, medians and the median
per-answer gain), the share of sentences within budget (from the completing delta) and
verified, streams shed (OVERLOADED, or refused busy), each gate's peak RSS (``VmHWM``).
``--open-streams N``: on a fresh gate per kind, N streams opened within a second,
writing at ``--open-streams-tps`` (cut at ``--seconds``); the gate's RSS idle, then
sampled while they are open.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench._answer_pool import Answers
from bench._gate_callers import HttpCaller
from bench._gate_load import KINDS, answer_pool, bodies, open_loop, poisson_schedule
from bench._gate_process import Gate, gate_process, peak_rss_mib
from bench._gate_report import report_head
from bench._gate_run import READY_TIMEOUT_S, UNANSWERED_AFTER_S, RunPlan, run_one, wait_ready
from bench._log import log
from bench._stream_gate_client import StreamPlan, StreamRecord, check_payloads, plan_streams
from bench._stream_gate_client import replay as replay_streams
from bench._stream_gate_summary import (
    compare,
    render,
    summarise_checks,
    summarise_streams,
    targets,
)
from bench.cpu_share import cores_used, snapshot
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent

__all__ = ["main", "parse_args"]

_DRAIN_S = 1.0
"""Between levels: what was shed or settled drains first."""


def _csv(kind: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    def parse(text: str) -> list[Any]:
        return [kind(part) for part in text.split(",") if part.strip()]

    return parse


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(
        prog="python -m bench gate-stream", description=doc.splitlines()[0]
    )
    parser.add_argument("--answers", type=_csv(str), default=["qa", "ragtruth"])
    parser.add_argument("--loads", type=_csv(float), default=[25.0, 50.0, 90.0])
    parser.add_argument("--seconds", type=float, default=30.0, help="each level's arrivals")
    parser.add_argument("--capacity-s", type=float, default=8.0, help="the closed loop")
    parser.add_argument("--budget-ms", type=float, default=500.0)
    parser.add_argument("--tokens-per-s", type=_csv(float), default=[30.0, 60.0])
    parser.add_argument("--max-rate", type=float, help="cap every level's rate (answers/s)")
    parser.add_argument("--open-streams", type=int, help="also: this many streams at once")
    parser.add_argument("--open-streams-tps", type=float, default=2.0)
    parser.add_argument("--open-streams-only", action="store_true", help="no load levels")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--data", type=Path, action="append", metavar="FILE")
    parser.add_argument("--log-dir", type=Path, help="gate logs (default: a temp dir)")
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH", help="JSON report (to stdout: no PATH)"
    )
    args = parser.parse_args(argv)
    bad = [k for k in args.answers if k not in KINDS]
    if bad:
        parser.error(f"unknown answer kind: {', '.join(bad)}")
    if any(x <= 0 for x in [*args.loads, args.seconds, args.capacity_s, args.budget_ms]):
        parser.error("--loads, --seconds, --capacity-s and --budget-ms must be positive")
    pace = args.tokens_per_s
    if not 1 <= len(pace) <= 2 or min(pace) <= 0:
        parser.error("--tokens-per-s: one pace or LOW,HIGH, positive")
    args.tokens_per_s = (min(pace), max(pace))
    if args.open_streams_only and not args.open_streams:
        parser.error("--open-streams-only needs --open-streams N")
    return args


def _plan(kind: str, args: argparse.Namespace) -> RunPlan:
    """``bench gate``'s plan for a gate's warm-up and capacity only (no open loop)."""
    batch = Settings().gate.batch_max
    return RunPlan(
        "http", kind, [], args.seconds, args.capacity_s, 2 * batch, args.budget_ms,
        args.max_rate, args.seed, batch,
    )  # fmt: skip


def _rate(load: float, capacity: float, cap: float | None) -> float:
    rate = load / 100 * capacity
    return rate if cap is None else min(rate, cap)


async def _stream_level(
    gate: Gate, plans: Sequence[StreamPlan], budget_ms: float
) -> tuple[list[StreamRecord], Any]:
    gc.collect()
    gc.freeze()  # a full collection here would stall reading, counted against the gate
    before = snapshot(gate.pid)
    records = await replay_streams(gate.url, gate.token, plans, budget_ms)
    return records, cores_used(before, snapshot(gate.pid))


async def _check_level(gate: Gate, plans: Sequence[StreamPlan], budget_ms: float) -> list[Any]:
    caller = HttpCaller(gate.url, gate.token, timeout_s=budget_ms / 1000 + UNANSWERED_AFTER_S)
    await caller.start()
    try:
        offsets, payloads = check_payloads(plans)
        gc.collect()
        gc.freeze()
        return await open_loop(caller, payloads, offsets, budget_ms)
    finally:
        await caller.close()


def _levels_of(kind: str, pool: list[AnswerEvent], args: argparse.Namespace) -> dict[str, Any]:
    """Both gates of one kind: streams, then the same answers through /v1/check."""
    run_id = f"bench-gate-stream-{uuid.uuid4().hex[:8]}"
    levels: list[dict[str, Any]] = []
    kept: list[tuple[list[float], list[StreamRecord]]] = []
    with gate_process("http", None, args.log_dir) as (gate, _):
        measured = asyncio.run(run_one("http", gate, None, _plan(kind, args), pool))
        capacity = measured["capacity"]["answers_per_s"]
        log(f"{kind}: stream gate capacity {capacity} answers/s")
        answers = Answers(pool, run_id)
        for i, load in enumerate(args.loads if capacity else []):
            rate = _rate(load, capacity, args.max_rate)
            schedule = poisson_schedule(rate, args.seconds, args.seed + i) or [0.0]
            plans = plan_streams(answers, schedule, args.tokens_per_s, args.seed + 1000 + i)
            log(f"  streams at {load:g} % = {rate:.2f}/s for {args.seconds:g} s")
            records, cpu = asyncio.run(_stream_level(gate, plans, args.budget_ms))
            summary = summarise_streams(records, args.budget_ms, args.seconds)
            log(
                f"    {summary['streams']} streams, release p95 "
                f"{(summary['release_from_last_char_ms'] or {}).get('p95')} ms, failures "
                f"{summary['failures']}"
            )
            levels.append(
                {
                    "load_pct": load,
                    "target_rate": rate,
                    "streams": summary,
                    "stream_gate_peak_rss_mib": peak_rss_mib(gate.pid),
                    "stream_cpu_cores": cpu,
                }
            )
            kept.append((schedule, records))
            time.sleep(_DRAIN_S)
    check_capacity = None
    if kept:
        with gate_process("http", None, args.log_dir) as (gate, _):
            check_capacity = asyncio.run(run_one("http", gate, None, _plan(kind, args), pool))
            again = Answers(pool, run_id)  # the same answers, ids and paces, fresh times
            for i, (level, (schedule, records)) in enumerate(zip(levels, kept, strict=True)):
                plans = plan_streams(again, schedule, args.tokens_per_s, args.seed + 1000 + i)
                log(f"  /v1/check at {level['load_pct']:g} %")
                samples = asyncio.run(_check_level(gate, plans, args.budget_ms))
                level["checks"] = summarise_checks(samples, plans, args.budget_ms, args.seconds)
                level["compare"] = compare(records, level["checks"])
                level["check_gate_peak_rss_mib"] = peak_rss_mib(gate.pid)
                log(f"    compare: {level['compare']}")
                time.sleep(_DRAIN_S)
    return {
        "kind": kind,
        "capacity": measured["capacity"],
        "check_capacity": None if check_capacity is None else check_capacity["capacity"],
        "levels": levels,
        "repeated_answers": answers.repeats,
        "pool": len(pool),
    }


def _rss_mib(pid: int | None) -> float | None:
    """``VmRSS`` of ``pid`` in MiB (what it holds now; ``peak_rss_mib`` reads the peak)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (OSError, TypeError):
        return None
    line = next((x for x in status.splitlines() if x.startswith("VmRSS")), None)
    return None if line is None else int(line.split()[1]) / 1024


async def _sampled(gate: Gate, plans: Sequence[StreamPlan], budget_ms: float) -> Any:
    peak: list[float] = []

    async def sample() -> None:
        while True:
            peak.append(_rss_mib(gate.pid) or 0.0)
            await asyncio.sleep(0.25)

    sampler = asyncio.create_task(sample())
    try:
        records = await replay_streams(gate.url, gate.token, plans, budget_ms)
    finally:
        sampler.cancel()
    return records, max(peak, default=None)


def _max_open(records: Sequence[StreamRecord]) -> int:
    edges: list[tuple[float, int]] = []
    for r in records:
        if r.opened is not None:
            closed = max([m.at for m in r.messages] + r.sent + [r.opened])
            edges += [(r.opened, 1), (closed, -1)]
    now = most = 0
    for _, step in sorted(edges):
        now += step
        most = max(most, now)
    return most


def _open_streams(kind: str, pool: list[AnswerEvent], args: argparse.Namespace) -> dict[str, Any]:
    """N slow streams at once on a fresh gate: what an open stream costs in memory."""
    count, pace = args.open_streams, args.open_streams_tps
    with gate_process("http", None, args.log_dir) as (gate, _):

        async def ready() -> None:
            caller = HttpCaller(gate.url, gate.token, timeout_s=60.0)
            await caller.start()
            try:
                back = Answers(list(reversed(pool)), f"bench-gate-stream-warm-{kind}")
                warm = bodies(back, Settings().gate.batch_max)
                await wait_ready(caller, warm, gate, READY_TIMEOUT_S)
            finally:
                await caller.close()

        asyncio.run(ready())
        time.sleep(_DRAIN_S)
        idle = _rss_mib(gate.pid)
        answers = Answers(pool, f"bench-gate-stream-open-{uuid.uuid4().hex[:8]}")
        schedule = [i / count for i in range(count)]  # all opened within a second
        plans = plan_streams(answers, schedule, (pace, pace), args.seed, cap_s=args.seconds)
        log(f"{kind}: {count} streams at {pace:g} tokens/s (cut at {args.seconds:g} s)")
        records, peak = asyncio.run(_sampled(gate, plans, args.budget_ms))
        most = _max_open(records)
        return {
            "kind": kind,
            "streams_opened": count,
            "tokens_per_s": pace,
            "max_open": most,
            "idle_rss_mib": idle,
            "peak_rss_mib": peak,
            "peak_rss_hwm_mib": peak_rss_mib(gate.pid),
            "added_mib_per_stream": (peak - idle) / most if peak and idle and most else None,
            "streams": summarise_streams(records, args.budget_ms, args.seconds),
        }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="bench-gate-stream-logs-"))
    args.log_dir.mkdir(parents=True, exist_ok=True)
    pools = {kind: answer_pool(kind, args.data) for kind in args.answers}
    report: dict[str, Any] = {
        **report_head(pools, args.log_dir),
        "loads_pct": args.loads,
        "seconds": args.seconds,
        "capacity_s": args.capacity_s,
        "budget_ms": args.budget_ms,
        "tokens_per_s": list(args.tokens_per_s),
        "token": "a word with the whitespace after it (\\S+\\s*)",
        "max_rate": args.max_rate,
        "runs": [],
        "open_streams": [],
    }
    if not args.open_streams_only:
        report["runs"] = [_levels_of(kind, pool, args) for kind, (pool, _) in pools.items()]
    if args.open_streams:
        report["open_streams"] = [_open_streams(k, p, args) for k, (p, _) in pools.items()]
    report["targets"] = targets(report["runs"])
    text = json.dumps(report, indent=2) + "\n"
    if args.json == "-":
        print(text, end="", flush=True)
        log(render(report))
    else:
        print(f"Command: `{report['command']}`\n", flush=True)
        print(render(report), flush=True)
        if args.json:
            Path(args.json).write_text(text, encoding="utf-8")
            log(f"wrote {args.json}")
    return 0
