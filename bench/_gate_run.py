"""One gate put through its series (ready, capacity in a closed loop, then each
open-loop level), and every path x answer kind, each against a fresh gate or the one
given. The orchestration only: the load, the callers, the summaries and the gate
process are modules of their own."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench._answer_pool import Answers
from bench._broker import kafka_broker
from bench._gate_callers import Caller, HttpCaller, KafkaCaller
from bench._gate_load import bodies, closed_loop, indexed_bodies, open_loop, poisson_schedule
from bench._gate_process import BROKER_PATHS, Gate, gate_process, peak_rss_mib
from bench._gate_report import describe, fmt
from bench._gate_summary import capacity_of, summarise_level
from bench._log import log
from bench.cpu_share import cores_used, snapshot
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent

__all__ = [
    "READY_TIMEOUT_S",
    "UNANSWERED_AFTER_S",
    "RunPlan",
    "caller_for",
    "measure_gate",
    "run_gate_series",
    "run_one",
    "wait_ready",
]

UNANSWERED_AFTER_S = 10.0
"""A request with no reply this long after its budget counts as unanswered."""
READY_TIMEOUT_S = 240.0


@dataclass
class RunPlan:
    """What one gate is put through."""

    path: str
    kind: str
    loads: Sequence[float]
    duration_s: float
    capacity_s: float
    callers: int
    budget_ms: float | None
    max_rate: float | None
    seed: int
    warm_up: int


async def wait_ready(caller: Caller, warm: Sequence[bytes], gate: Gate, timeout_s: float) -> None:
    """Until the gate answers a warm-up request (models load before it listens), then
    the rest of the warm-up answers, untimed."""
    deadline = time.monotonic() + timeout_s
    max_budget = Settings().gate.max_budget_ms
    while True:
        if not gate.alive():
            raise RuntimeError("the gate process exited")
        reply = await caller.check(warm[0], max_budget)
        if reply.error is None:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"gate not ready after {timeout_s:g} s: {reply.error}")
        await asyncio.sleep(0.5)
    await asyncio.gather(*(caller.check(body, max_budget) for body in warm[1:]))


async def measure_gate(
    caller: Caller, gate: Gate, plan: RunPlan, pool: Sequence[AnswerEvent]
) -> dict[str, Any]:
    """Capacity, then each open-loop level, against one running gate."""
    defaults = Settings().gate
    default_budget = plan.budget_ms or defaults.default_budget_ms
    # The open loop sends the pool from its start (the answers the judge alone was timed
    # on come first); the warm-up and the closed loop take it from its end.
    answers = Answers(pool, f"bench-gate-{uuid.uuid4().hex[:8]}")
    back = Answers(list(reversed(pool)), f"bench-gate-back-{uuid.uuid4().hex[:8]}")
    await wait_ready(caller, bodies(back, max(1, plan.warm_up)), gate, READY_TIMEOUT_S)
    log(f"{plan.path} / {plan.kind}: capacity, {plan.callers} callers for {plan.capacity_s:g} s")
    samples, start = await closed_loop(
        caller, lambda: back.take()[2], plan.callers, plan.capacity_s, defaults.max_budget_ms
    )
    capacity = capacity_of(samples, start, plan.capacity_s)
    log(f"  {fmt(capacity['answers_per_s'], 2)} verified answers/s")
    levels = []
    rate_of_capacity = capacity["answers_per_s"]
    for index, load in enumerate(plan.loads):
        if not rate_of_capacity:
            log("  no capacity measured: open loop skipped")
            break
        rate = load / 100 * rate_of_capacity
        capped = plan.max_rate is not None and rate > plan.max_rate
        rate = min(rate, plan.max_rate) if plan.max_rate is not None else rate
        schedule = poisson_schedule(rate, plan.duration_s, plan.seed + index)
        if not schedule:
            schedule = [0.0]
        payloads = indexed_bodies(answers, len(schedule))
        log(f"  open loop {load:g} % = {rate:.2f}/s for {plan.duration_s:g} s")
        # What exists now is out of the cyclic collector's reach: a full collection in
        # the load generator would otherwise stall its reading of replies, counted
        # against the gate.
        gc.collect()
        gc.freeze()
        started_at = time.time()
        cpu_before = snapshot(gate.pid)
        got = await open_loop(caller, payloads, schedule, plan.budget_ms)
        cpu = cores_used(cpu_before, snapshot(gate.pid))
        level = {
            "load_pct": load,
            "target_rate": rate,
            "rate_capped": capped,
            "started_at": started_at,
            **summarise_level(got, default_budget, plan.duration_s),
            "peak_rss_mib": peak_rss_mib(gate.pid),
            "cpu_cores": cpu,
        }
        levels.append(level)
        log(f"    {describe(level)}")
        await asyncio.sleep(1.0)  # let what was shed or settled drain before the next level
    return {
        "path": plan.path,
        "kind": plan.kind,
        "budget_ms": default_budget,
        "capacity": capacity,
        "levels": levels,
        "repeated_answers": answers.repeats,
        "closed_loop_repeated_answers": back.repeats,
        "pool": len(pool),
        "peak_rss_mib": peak_rss_mib(gate.pid),
    }


def caller_for(path: str, gate: Gate, settings: Settings | None, budget_ms: float) -> Caller:
    timeout = Settings().gate.max_budget_ms / 1000 + UNANSWERED_AFTER_S
    if path == "kafka":
        assert settings is not None
        return KafkaCaller(settings, gate.token, default_budget_ms=budget_ms)
    return HttpCaller(gate.url, gate.token, timeout_s=timeout)


async def run_one(
    path: str, gate: Gate, settings: Settings | None, plan: RunPlan, pool: Sequence[AnswerEvent]
) -> dict[str, Any]:
    caller = caller_for(path, gate, settings, plan.budget_ms or Settings().gate.default_budget_ms)
    await caller.start()
    try:
        return await measure_gate(caller, gate, plan, pool)
    finally:
        await caller.close()


def run_gate_series(args: argparse.Namespace, pools: Mapping[str, list[AnswerEvent]]) -> list[Any]:
    """Every path x kind, each against a fresh gate (or the given one)."""
    gate_settings = Settings().gate
    callers = args.callers or 2 * gate_settings.batch_max
    runs = []

    def plan(path: str, kind: str) -> RunPlan:
        return RunPlan(
            path, kind, args.loads, args.duration_s, args.capacity_s, callers,
            args.budget_ms, args.max_rate, args.seed, gate_settings.batch_max,
        )  # fmt: skip

    if args.gate_url:
        gate = Gate(args.gate_url, args.token, args.gate_pid)
        for kind in args.answers:
            runs.append(asyncio.run(run_one("http", gate, None, plan("http", kind), pools[kind])))
        return runs
    needs_broker = any(p in BROKER_PATHS for p in args.paths)
    with contextlib.ExitStack() as stack:
        bootstrap = None
        if needs_broker:
            bootstrap, broker = stack.enter_context(kafka_broker(args.bootstrap))
            log(f"broker: {broker}")
        for path in args.paths:
            for kind in args.answers:
                with gate_process(path, bootstrap, args.log_dir) as (gate, settings):
                    runs.append(
                        asyncio.run(run_one(path, gate, settings, plan(path, kind), pools[kind]))
                    )
    return runs
