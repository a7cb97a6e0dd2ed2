"""The inline gate measured: open-loop load on a gate process, over HTTP and over Kafka.

    .venv/bin/python -m bench gate [--json [PATH]] [--paths http,kafka]
        [--loads 25,50,90,200] [--duration-s 20] [--answers qa,ragtruth]
        [--bootstrap HOST:PORT] [--budget-ms MS] [--quick]

What one run measures, in this order (each part can be run alone: ``--judge-only``,
``--skip-judge``, ``--paths http``, ``--gate-url`` for a gate already running):

1. **The judge alone** (the baseline the gate is compared with): the default judge
   (``wiring.build_judge(Settings().judge)``, so ``STREAMPROC_JUDGE__*`` apply) in a fresh
   process, one untimed warm-up call, then ``judge_batch([answer])`` timed for each of
   ``--judge-answers`` answers of each kind: the judge's own per-answer time.
2. For each path and answer kind, a **gate process** of its own (``python -m streamproc
   gate serve``, product defaults apart from its port, a temporary tokens file, unique
   topic names, and ``STREAMPROC_GATE__PUBLISH=false`` on the plain ``http`` path), so
   the load generator never shares the gate's event loop or cores' scheduler slot:

   a. **capacity** (closed loop): ``--callers`` callers each send the next answer as
      soon as the last was answered, for ``--capacity-s`` seconds, with a budget of
      ``gate.max_budget_ms`` so nothing is settled early or shed; capacity = verified
      answers per second after the first second;
   b. **open loop** at each ``--loads`` percentage of that capacity for ``--duration-s``:
      Poisson arrivals (seeded), each request sent at its scheduled time whatever the gate
      does (a closed loop would slow down with the gate and hide its queueing), with the
      default budget (or ``--budget-ms``).

Per level: decision latency p50/p95/p99 measured by the caller from the *scheduled* send
time to the reply, the share answered within the budget and within budget + 50 ms, the
shed share (``reason`` OVERLOADED), the verified share, requests left unanswered (must be
0), the gate process's peak RSS (``VmHWM``), and the cores used on average during the
level (``cpu_cores``: ``service`` the gate, ``load_generator`` this process, ``rest``
the rest of the machine - mostly a private broker). The gate's latency targets are printed with
pass / fail.

Paths: ``http`` (aiohttp client, gate with no Kafka), ``http-publish`` (the same with the
gate publishing its monitored records: needs a broker), ``kafka`` (``streamproc.gate.
client.GateClient`` on the gate's request topic; needs a broker). Without
``--bootstrap`` a path that needs a broker gets a private one from ``scripts/kafka.sh``
(its warm-up then shares the cores; see BENCHMARKS.md).

Answers: ``qa`` = HaluEval QA, ``ragtruth`` = RAGTruth Summary and Data2txt in turn, from
``../shared/data`` (``python -m bench stream``'s pool); every request gets fresh ids.
One gate serves a kind's whole series, so once its pool is used up answers repeat (the
JSON counts the repeats; the judge's embedding cache makes a repeat cheaper).
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench._gate_callers import HttpCaller, Reply
from bench._gate_judge import JUDGE_WARM_UP, judge_alone
from bench._gate_load import (
    KINDS,
    Sample,
    answer_pool,
    closed_loop,
    open_loop,
    poisson_schedule,
)
from bench._gate_process import PATHS, Gate, gate_env, write_tokens
from bench._gate_report import render, report_head
from bench._gate_run import run_gate_series
from bench._gate_summary import GRACE_MS, capacity_of, summarise_level, summarise_ms
from bench._gate_targets import paired_overhead, targets
from bench._log import log

# The runner's entry point and argument parsing live here; the parts live in
# bench/_gate_*.py. The names below them are re-exported for the tests and the
# benchmarks that import them from here.
__all__ = [
    "GRACE_MS",
    "KINDS",
    "PATHS",
    "Gate",
    "HttpCaller",
    "Reply",
    "Sample",
    "answer_pool",
    "capacity_of",
    "closed_loop",
    "gate_env",
    "main",
    "open_loop",
    "paired_overhead",
    "parse_args",
    "poisson_schedule",
    "render",
    "summarise_level",
    "summarise_ms",
    "targets",
    "write_tokens",
]


def _csv(kind: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    def parse(text: str) -> list[Any]:
        return [kind(part) for part in text.split(",") if part.strip()]

    return parse


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(prog="python -m bench gate", description=doc.splitlines()[0])
    parser.add_argument("--paths", type=_csv(str), default=["http", "kafka"])
    parser.add_argument("--loads", type=_csv(float), default=[25.0, 50.0, 90.0, 200.0])
    parser.add_argument("--answers", type=_csv(str), default=["qa", "ragtruth"])
    parser.add_argument("--duration-s", type=float, default=20.0, help="each open-loop level")
    parser.add_argument("--capacity-s", type=float, default=8.0, help="the closed loop")
    parser.add_argument("--callers", type=int, help="closed-loop callers (2 x gate.batch_max)")
    parser.add_argument("--budget-ms", type=float, help="X-Budget-Ms (default: none sent)")
    parser.add_argument(
        "--judge-answers", type=int, default=200, help="judge-alone sample (pool's first)"
    )
    parser.add_argument("--max-rate", type=float, help="cap every open-loop rate (answers/s)")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--bootstrap", metavar="HOST:PORT", help="broker for kafka paths")
    parser.add_argument("--gate-url", help="measure this running gate (HTTP) instead")
    parser.add_argument("--token", help="bearer token for --gate-url")
    parser.add_argument("--gate-pid", type=int, help="pid of --gate-url's process (RSS)")
    parser.add_argument("--data", type=Path, action="append", metavar="FILE")
    parser.add_argument("--judge-only", action="store_true", help="only the judge alone")
    parser.add_argument("--skip-judge", action="store_true", help="no judge-alone baseline")
    parser.add_argument("--log-dir", type=Path, help="gate logs (default: a temp dir)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, for a smoke test: short phases, 10 judge answers, rate cap 40/s",
    )
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH", help="JSON report (to stdout: no PATH)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.duration_s = min(args.duration_s, 1.5)
        args.capacity_s = min(args.capacity_s, 2.0)
        args.judge_answers = min(args.judge_answers, 10)
        args.max_rate = args.max_rate or 40.0
    bad = [p for p in args.paths if p not in PATHS] + [k for k in args.answers if k not in KINDS]
    if bad:
        parser.error(f"unknown path or answer kind: {', '.join(bad)}")
    if any(load <= 0 for load in args.loads) or args.duration_s <= 0 or args.capacity_s <= 0:
        parser.error("--loads, --duration-s and --capacity-s must be positive")
    if args.gate_url and not args.token:
        parser.error("--gate-url needs --token")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    args.log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="bench-gate-logs-"))
    args.log_dir.mkdir(parents=True, exist_ok=True)
    pools = {kind: answer_pool(kind, args.data) for kind in args.answers}
    report: dict[str, Any] = {
        **report_head(pools, args.log_dir),
        "paths": args.paths,
        "loads_pct": args.loads,
        "duration_s": args.duration_s,
        "capacity_s": args.capacity_s,
        "max_rate": args.max_rate,
        "judge_alone": {},
        "runs": [],
    }
    if not args.skip_judge:
        for kind, (pool, _) in pools.items():
            log(f"judge alone, {kind}: {min(args.judge_answers, len(pool))} answers ...")
            sample, warm = pool[: args.judge_answers], pool[-JUDGE_WARM_UP:]
            report["judge_alone"][kind] = judge_alone(sample, warm)
    if not args.judge_only:
        report["runs"] = run_gate_series(args, {k: p for k, (p, _) in pools.items()})
    report["targets"] = targets(report)
    text = json.dumps(report, indent=2, default=_json_default) + "\n"
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


def _json_default(value: object) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)  # type: ignore[call-overload]
    raise TypeError(f"not JSON: {type(value).__name__}")
