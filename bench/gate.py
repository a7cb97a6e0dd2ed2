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
import asyncio
import contextlib
import gc
import hashlib
import json
import logging
import math
import os
import random
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import IO, Any, Protocol

from bench import command_line
from bench.cpu_share import cores_used, snapshot
from bench.machine import machine_info
from bench.stream import (
    Answers,
    event_pool,
    kafka_broker,
    run_topics,
)
from bench.stream_bench import percentile
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent
from streamproc.contracts.gate_events import BUDGET_HEADER
from streamproc.kafka.brokers._process_group import stop_process_group

KINDS: dict[str, tuple[str, ...]] = {"qa": ("QA",), "ragtruth": ("Summary", "Data2txt")}
"""Answer kinds and the task types each is drawn from."""
PATHS = ("http", "http-publish", "kafka")
BROKER_PATHS = frozenset({"http-publish", "kafka"})
CHECK_PATH = "/v1/check"
GRACE_MS = 50.0
"""At 200 % load every request must be answered within budget + this."""
UNANSWERED_AFTER_S = 10.0
"""A request with no reply this long after its budget counts as unanswered."""
READY_TIMEOUT_S = 240.0
SHED_REASON = "OVERLOADED"
CAPACITY_WARM_S = 1.0
"""The first second of the closed loop fills the batches; it is not counted."""
JUDGE_WARM_UP = 5
"""Untimed judge calls before the judge alone is timed (the last answers of the pool)."""
QA_P99_TARGET_MS = 250.0
GATE_OVERHEAD_TARGET_MS = 10.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- answers


def answer_pool(kind: str, data: Sequence[Path] | None) -> tuple[list[AnswerEvent], str]:
    """The distinct answers of ``kind``, in ``python -m bench stream``'s order."""
    return event_pool(data, list(KINDS[kind]))


def bodies(answers: Answers, count: int) -> list[bytes]:
    """``count`` request bodies, made before a level starts so that serialising an
    answer never delays a scheduled send."""
    return [body for _, body in indexed_bodies(answers, count)]


def indexed_bodies(answers: Answers, count: int) -> list[tuple[int | None, bytes]]:
    """As :func:`bodies`, each with its answer's pool index on its first use (None for
    a repeat): what pairs a gate decision with the judge alone on the same answer."""
    out: list[tuple[int | None, bytes]] = []
    for _ in range(count):
        index = answers.taken
        first_use = index < answers.size
        out.append((index if first_use else None, answers.take()[2]))
    return out


# -------------------------------------------------------------------------- schedule


def poisson_schedule(rate_per_s: float, duration_s: float, seed: int) -> list[float]:
    """Send times (seconds from the start, below ``duration_s``) of a Poisson process of
    ``rate_per_s``: exponential gaps, seeded, so a run is repeatable. Random arrivals
    bunch up as real callers do; a fixed pace would flatter the queue."""
    if not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise ValueError(f"rate must be a positive number, not {rate_per_s}")
    if not (duration_s > 0 and math.isfinite(duration_s)):
        raise ValueError(f"duration must be a positive number, not {duration_s}")
    rng = random.Random(seed)
    times: list[float] = []
    at = rng.expovariate(rate_per_s)
    while at < duration_s:
        times.append(at)
        at += rng.expovariate(rate_per_s)
    return times


# ------------------------------------------------------------------------- the judge


def summarise_ms(values: Sequence[float]) -> dict[str, float] | None:
    """p50 / p95 / p99 / max / mean of milliseconds; None for none."""
    if not values:
        return None
    return {
        "count": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values),
        "mean": statistics.fmean(values),
    }


def time_judge_alone(events_json: list[str], warm_json: list[str]) -> dict[str, Any]:
    """The default judge's own time per answer, one answer per call (as the gate sees a
    quiet stream), after untimed warm-up calls on other answers (models load, and the
    language detector loads on the first answer long enough to need it). Runs in a fresh
    process."""
    import resource

    from streamproc.wiring import build_judge

    events = [AnswerEvent.model_validate_json(text) for text in events_json]
    settings = Settings().judge
    judge = build_judge(settings)
    for text in warm_json:  # warm-up, not timed
        judge.judge_batch([AnswerEvent.model_validate_json(text)])
    times_ms = []
    for event in events:
        start = time.perf_counter()
        judge.judge_batch([event])
        times_ms.append((time.perf_counter() - start) * 1000)
    return {
        "judge": settings.name,
        "answers": len(events),
        "ms": summarise_ms(times_ms),
        "per_answer_ms": times_ms,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def judge_alone(events: Sequence[AnswerEvent], warm: Sequence[AnswerEvent]) -> dict[str, Any]:
    """:func:`time_judge_alone` in a fresh spawned process (its models, its peak RSS)."""
    payload = [event.model_dump_json() for event in events]
    warm_payload = [event.model_dump_json() for event in warm]
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        result: dict[str, Any] = pool.submit(time_judge_alone, payload, warm_payload).result()
    return result


# --------------------------------------------------------------------- gate process


def write_tokens(path: Path, tenants: Sequence[str]) -> str:
    """A tokens file with one caller for ``tenants``; the token itself is returned (the
    file keeps only its sha256, as a deployment's would)."""
    token = secrets.token_urlsafe(24)
    digest = hashlib.sha256(token.encode()).hexdigest()
    names = ", ".join(json.dumps(t) for t in tenants)
    path.write_text(
        f'[[caller]]\nname = "bench"\ntenants = [{names}]\ntoken_sha256 = "{digest}"\n',
        encoding="utf-8",
    )
    return token


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def peak_rss_mib(pid: int | None) -> float | None:
    """``VmHWM`` of ``pid`` in MiB; None where /proc cannot tell."""
    if pid is None:
        return None
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
    return None


def gate_env(
    *, port: int, tokens_file: Path, app_id: str, path: str, bootstrap: str | None
) -> dict[str, str]:
    """The gate's ``STREAMPROC_*`` variables: product defaults (and whatever the
    environment sets, e.g. ``STREAMPROC_JUDGE__NAME``) apart from its port, the tokens
    file, publishing (off on the plain ``http`` path), and, with a broker, every topic
    named after ``app_id``."""
    publish = path in BROKER_PATHS
    env = {
        "STREAMPROC_APP_ID": app_id,
        "STREAMPROC_GATE__HOST": "127.0.0.1",
        "STREAMPROC_GATE__PORT": str(port),
        "STREAMPROC_GATE__TOKENS_FILE": str(tokens_file),
        "STREAMPROC_GATE__PUBLISH": "true" if publish else "false",
        "STREAMPROC_GATE__KAFKA_REQUESTS": "true" if path == "kafka" else "false",
        "STREAMPROC_LOG_JSON": "true",
    }
    if publish and bootstrap is not None:
        settings = topic_settings(app_id, bootstrap)
        env["STREAMPROC_BROKER_URL"] = settings.broker_url
        named = {k: v for k, v in settings.to_env().items() if v.startswith(f"{app_id}.")}
        env.update(named)
    return env


def topic_settings(app_id: str, bootstrap: str) -> Settings:
    """Settings whose every topic (the gate's request and reply topics too) is named after
    ``app_id``, so a run on a shared broker meets no other run."""
    return Settings(app_id=app_id, broker_url=f"kafka://{bootstrap}", **run_topics(app_id))


class GateProcess:
    """``python -m streamproc gate serve`` in its own process group, logging to a file."""

    def __init__(self, env: Mapping[str, str], log_path: Path) -> None:
        self._env = {**os.environ, **env}
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> GateProcess:
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "streamproc", "gate", "serve"],
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> int | None:
        if self._process is None:
            return None
        code = stop_process_group(self._process, signal.SIGTERM, 20.0)
        self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


# --------------------------------------------------------------------------- callers


@dataclass(frozen=True, slots=True)
class Reply:
    """What a caller got back for one request; ``error`` set when it got no decision."""

    decision: str | None = None
    verified: bool | None = None
    reason: str | None = None
    gate_latency_ms: float | None = None
    budget_ms: float | None = None
    judge_ms: float | None = None
    """The verdict's judge time: the whole judge call of the batch it was judged in."""
    batch_size: int | None = None
    error: str | None = None


def reply_of(payload: Mapping[str, Any]) -> Reply:
    """A :class:`~streamproc.contracts.gate_events.GateReply` as JSON, reduced to what is
    counted."""
    timings = (payload.get("verdict") or {}).get("timings") or {}
    return Reply(
        decision=str(payload["decision"]),
        verified=bool(payload["verified"]),
        reason=None if payload.get("reason") is None else str(payload["reason"]),
        gate_latency_ms=float(payload["latency_ms"]),
        budget_ms=float(payload["budget_ms"]),
        judge_ms=None if timings.get("judge_ms") is None else float(timings["judge_ms"]),
        batch_size=None if timings.get("batch_size") is None else int(timings["batch_size"]),
    )


class Caller(Protocol):
    """One way into the gate."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def check(self, body: bytes, budget_ms: float | None) -> Reply: ...


class HttpCaller:
    """``POST /v1/check`` with aiohttp, a bearer token, ``X-Budget-Ms`` when given."""

    def __init__(self, base_url: str, token: str, *, timeout_s: float) -> None:
        self._url = base_url.rstrip("/") + CHECK_PATH
        self._token = token
        self._timeout_s = timeout_s
        self._session: Any = None

    async def start(self) -> None:
        import aiohttp

        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),  # open loop: no client-side queue
            timeout=aiohttp.ClientTimeout(total=self._timeout_s),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def check(self, body: bytes, budget_ms: float | None) -> Reply:
        headers = {"Authorization": f"Bearer {self._token}", "Content-Type": "application/json"}
        if budget_ms is not None:
            headers[BUDGET_HEADER] = f"{budget_ms:g}"
        try:
            async with self._session.post(self._url, data=body, headers=headers) as response:
                payload = await response.read()
                if response.status != 200:
                    return Reply(error=f"http {response.status}: {payload[:200]!r}")
                return reply_of(json.loads(payload))
        except TimeoutError:
            return Reply(error="timeout")
        except Exception as error:  # noqa: BLE001 - counted as unanswered, the run goes on
            return Reply(error=f"{type(error).__name__}: {error}")


class KafkaCaller:
    """``streamproc.gate.client.GateClient`` on the gate's request topic, replies on a
    topic of this run's own. The client never waits past the budget: when no reply came
    in time it decides by policy itself; such a decision counts as unanswered (by the
    gate), under the error ``client_policy``. Requests carry the run's caller token, as
    the gate requires of Kafka requests by default."""

    def __init__(self, settings: Settings, token: str, *, default_budget_ms: float) -> None:
        self._settings = settings
        self._token = token
        self._default_budget_ms = default_budget_ms
        self._client: Any = None

    async def start(self) -> None:
        from streamproc.wiring import gate_client

        # The run's own reply topic, which is the gate's default one: always allowed.
        self._client = gate_client(self._settings, token=self._token)
        await self._client.start()

    async def close(self) -> None:
        if self._client is not None:
            await self._client.stop()

    async def check(self, body: bytes, budget_ms: float | None) -> Reply:
        budget = self._default_budget_ms if budget_ms is None else budget_ms
        try:
            decided = await self._client.check(body, budget_ms=budget)
        except Exception as error:  # noqa: BLE001 - counted as unanswered, the run goes on
            return Reply(error=f"{type(error).__name__}: {error}")
        if decided.reply is None:
            refused = "" if decided.error is None else f" (gate refused: {decided.error.error})"
            return Reply(error=f"client_policy: {decided.reason}{refused}")
        return reply_of(decided.reply.model_dump(mode="json"))


# ---------------------------------------------------------------------------- phases


@dataclass(frozen=True, slots=True)
class Sample:
    """One request: when it was due, when it went, when its reply came (monotonic s)."""

    due: float
    sent: float
    done: float
    reply: Reply
    pool_index: int | None = None
    """The answer's place in the pool on its first use (None: a repeat, or not tracked)."""

    @property
    def latency_ms(self) -> float:
        """From the scheduled send to the reply: what the caller waited."""
        return (self.done - self.due) * 1000


async def _one(
    caller: Caller, body: bytes, budget_ms: float | None, due: float, index: int | None = None
) -> Sample:
    sent = time.monotonic()
    reply = await caller.check(body, budget_ms)
    return Sample(due, sent, time.monotonic(), reply, index)


async def open_loop(
    caller: Caller,
    payloads: Sequence[tuple[int | None, bytes]],
    schedule: Sequence[float],
    budget_ms: float | None,
) -> list[Sample]:
    """Every payload (pool index, body) sent at its scheduled time as a task of its own,
    whether or not earlier ones were answered; then every reply awaited."""
    start = time.monotonic()
    tasks = []
    for offset, (index, body) in zip(schedule, payloads, strict=True):
        due = start + offset
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_one(caller, body, budget_ms, due, index)))
    return list(await asyncio.gather(*tasks))


async def closed_loop(
    caller: Caller,
    next_body: Callable[[], bytes],
    callers: int,
    duration_s: float,
    budget_ms: float,
) -> tuple[list[Sample], float]:
    """``callers`` callers, each sending again as soon as it is answered, for
    ``duration_s``; returns the samples and the start time."""
    start = time.monotonic()
    end = start + duration_s
    samples: list[Sample] = []

    async def run() -> None:
        while time.monotonic() < end:
            now = time.monotonic()
            samples.append(await _one(caller, next_body(), budget_ms, now))

    await asyncio.gather(*(run() for _ in range(callers)))
    return samples, start


def capacity_of(samples: Sequence[Sample], start: float, duration_s: float) -> dict[str, Any]:
    """Verified answers per second over the closed loop after its first second, and what
    else came back."""
    window_start = start + min(CAPACITY_WARM_S, duration_s / 2)
    window_end = start + duration_s
    counted = [s for s in samples if window_start <= s.done <= window_end]
    verified = sum(1 for s in counted if s.reply.verified)
    seconds = window_end - window_start
    return {
        "answers_per_s": verified / seconds if seconds > 0 else None,
        "requests": len(samples),
        "verified_in_window": verified,
        "unverified_in_window": sum(1 for s in counted if s.reply.verified is False),
        "errors": sum(1 for s in samples if s.reply.error),
        "window_s": seconds,
        "latency_ms": summarise_ms([s.latency_ms for s in samples if not s.reply.error]),
    }


def summarise_level(
    samples: Sequence[Sample], caller_budget_ms: float, schedule_s: float
) -> dict[str, Any]:
    """A level's numbers; shares are of every request sent. "Within budget" is the
    caller's budget (the one it sent, else the gate's default), not the reply's
    ``budget_ms``: over Kafka the gate decides within less, keeping time for the reply."""
    sent = len(samples)
    answered = [s for s in samples if s.reply.error is None]

    def within(extra_ms: float) -> float | None:
        if not sent:
            return None
        ok = sum(1 for s in answered if s.latency_ms <= caller_budget_ms + extra_ms)
        return ok / sent

    def share(test: Callable[[Reply], bool]) -> float | None:
        return sum(1 for s in answered if test(s.reply)) / sent if sent else None

    last_done = max((s.done for s in answered), default=None)
    first_due = min((s.due for s in samples), default=None)
    span = None if last_done is None or first_due is None else last_done - first_due
    slips = [(s.sent - s.due) * 1000 for s in samples]
    late = [
        s
        for s in samples
        if s.reply.error is not None or s.latency_ms > caller_budget_ms + GRACE_MS
    ]
    return {
        "sent": sent,
        "offered_rate": sent / schedule_s if schedule_s > 0 else None,
        "answered": len(answered),
        "unanswered": sent - len(answered),
        "errors": dict(Counter(s.reply.error.split(":")[0] for s in samples if s.reply.error)),
        "achieved_rate": len(answered) / span if span else None,
        "latency_ms": summarise_ms([s.latency_ms for s in answered]),
        "gate_latency_ms": summarise_ms(
            [s.reply.gate_latency_ms for s in answered if s.reply.gate_latency_ms is not None]
        ),
        **split_latency(answered),
        "within_budget": within(0.0),
        "within_budget_plus_50ms": within(GRACE_MS),
        "shed": share(lambda r: r.reason == SHED_REASON),
        "verified": share(lambda r: bool(r.verified)),
        "decisions": dict(Counter(str(s.reply.decision) for s in answered)),
        "reasons": dict(Counter(str(s.reply.reason) for s in answered if s.reply.reason)),
        "send_slip_ms": summarise_ms(slips),
        "late_at_s": [] if first_due is None else [round(s.due - first_due, 3) for s in late[:200]],
        "latency_by_pool_index": {
            str(s.pool_index): s.latency_ms for s in answered if s.pool_index is not None
        },
    }


def split_latency(answered: Sequence[Sample]) -> dict[str, Any]:
    """Where a verified reply's time went: the judge call it was in (``judge_ms``), the
    rest of the gate's own time (queueing behind a batch, parsing, the reply), and the
    rest of what the caller waited (transport, the caller's own event loop); and what an
    answer judged alone (a batch of one, mostly one that met an idle gate) waited beyond
    its judge call."""
    judged = [
        s
        for s in answered
        if s.reply.verified and s.reply.judge_ms is not None and s.reply.gate_latency_ms
    ]
    return {
        "judge_call_ms": summarise_ms([s.reply.judge_ms or 0.0 for s in judged]),
        "in_gate_beyond_judge_ms": summarise_ms(
            [(s.reply.gate_latency_ms or 0.0) - (s.reply.judge_ms or 0.0) for s in judged]
        ),
        "outside_gate_ms": summarise_ms(
            [s.latency_ms - (s.reply.gate_latency_ms or 0.0) for s in judged]
        ),
        "batch_sizes": dict(Counter(s.reply.batch_size for s in judged)),
        "batch_of_one_beyond_judge_ms": summarise_ms(
            [s.latency_ms - (s.reply.judge_ms or 0.0) for s in judged if s.reply.batch_size == 1]
        ),
    }


# -------------------------------------------------------------------------- one run


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


@dataclass
class Gate:
    """Where the gate under test is and what to read its memory from."""

    url: str
    token: str
    pid: int | None
    alive: Callable[[], bool] = field(default=lambda: True)


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
    log(f"  {_fmt(capacity['answers_per_s'], 2)} verified answers/s")
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


def describe(level: Mapping[str, Any]) -> str:
    latency = level["latency_ms"] or {}
    return (
        f"{level['answered']}/{level['sent']} answered, p50 {_fmt(latency.get('p50'), 0)} "
        f"p99 {_fmt(latency.get('p99'), 0)} ms, within budget {_pct(level['within_budget'])}, "
        f"shed {_pct(level['shed'])}, verified {_pct(level['verified'])}; cores: "
        + ", ".join(f"{who} {_fmt(n, 2)}" for who, n in (level.get("cpu_cores") or {}).items())
    )


@contextlib.contextmanager
def gate_process(
    path: str, bootstrap: str | None, log_dir: Path
) -> Iterator[tuple[Gate, Settings | None]]:
    """A fresh gate for one path (and topics of its own when it publishes)."""
    app_id = f"bench-gate-{uuid.uuid4().hex[:8]}"
    port = free_port()
    tokens = log_dir / f"{app_id}.tokens.toml"
    token = write_tokens(tokens, ["demo"])
    publish = path in BROKER_PATHS
    settings = topic_settings(app_id, bootstrap) if publish and bootstrap else None
    if settings is not None:
        asyncio.run(_prepare(settings))
    env = gate_env(port=port, tokens_file=tokens, app_id=app_id, path=path, bootstrap=bootstrap)
    process = GateProcess(env, log_dir / f"{app_id}.log").start()
    gate = Gate(f"http://127.0.0.1:{port}", token, process.pid, lambda: process.running)
    try:
        yield gate, settings
    except Exception:
        log(process.log_tail())
        raise
    finally:
        process.stop()
        if settings is not None:
            asyncio.run(_delete(settings))


async def _prepare(settings: Settings) -> None:
    from streamproc.wiring import prepare_topics

    await prepare_topics(settings)
    await _ensure_gate_topic(settings)


async def _ensure_gate_topic(settings: Settings) -> None:
    """The request topic, in case the topic list does not hold it (yet)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    await admin.start()
    try:
        with contextlib.suppress(TopicAlreadyExistsError):
            await admin.create_topics(
                [NewTopic(settings.gate.requests_topic, settings.topics.partitions, 1)]
            )
    finally:
        await admin.close()


async def _delete(settings: Settings) -> None:
    from bench.stream import delete_topics

    await delete_topics(settings)


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


# --------------------------------------------------------------------------- targets


def _level(run: Mapping[str, Any], load: float) -> Mapping[str, Any] | None:
    return next((lv for lv in run["levels"] if lv["load_pct"] == load), None)


def targets(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The gate's latency targets, one line per path and kind measured; ``passed`` None when the
    level needed was not run."""
    out: list[dict[str, Any]] = []
    alone = report.get("judge_alone", {})
    for run in report.get("runs", []):
        who = f"{run['path']}, {run['kind']}"
        half = _level(run, 50)
        p99 = half["latency_ms"]["p99"] if half and half["latency_ms"] else None
        limit = QA_P99_TARGET_MS if run["kind"] == "qa" else run["budget_ms"]
        out.append(_target(f"{who}: p99 at 50 % load", p99, limit, "ms"))
        quarter = _level(run, 25)
        added = paired_overhead(quarter, alone.get(run["kind"]))
        out.append(
            _target(
                f"{who}: what the gate adds at p50, 25 % load (median over the same answers "
                f"of gate latency - judge alone)",
                added["median_of_differences_ms"] if added else None,
                GATE_OVERHEAD_TARGET_MS,
                "ms",
            )
            | {"detail": added}
        )
        double = _level(run, 200)
        within = double["within_budget_plus_50ms"] if double else None
        unanswered = double["unanswered"] if double else None
        ok = None if within is None else within == 1.0 and unanswered == 0
        out.append(
            {
                "target": f"{who}: at 200 % every request answered within budget + 50 ms",
                "value": within,
                "limit": 1.0,
                "unit": "share",
                "passed": ok,
            }
        )
        latency = double["latency_ms"] if double else None
        out.append(
            _target(
                f"{who}: p99 at 200 % load, as the client measures it (p50 "
                f"{_fmt(latency['p50'] if latency else None)} ms), within budget + 50 ms",
                latency["p99"] if latency else None,
                run["budget_ms"] + GRACE_MS,
                "ms",
            )
        )
    return out


def paired_overhead(
    level: Mapping[str, Any] | None, alone: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """What the gate adds to a decision over the judge's own time, on the answers both
    saw (the open loop's first answers are the judge alone's): the median of the
    per-answer differences, and for comparison the difference of the two medians over
    those answers. None when either side is missing."""
    if not level or not alone or not alone.get("per_answer_ms"):
        return None
    judge_ms: Sequence[float] = alone["per_answer_ms"]
    pairs = [
        (latency, judge_ms[int(index)])
        for index, latency in level.get("latency_by_pool_index", {}).items()
        if int(index) < len(judge_ms)
    ]
    if not pairs:
        return None
    gate = [g for g, _ in pairs]
    judge = [j for _, j in pairs]
    return {
        "answers": len(pairs),
        "median_of_differences_ms": statistics.median(g - j for g, j in pairs),
        "difference_of_medians_ms": statistics.median(gate) - statistics.median(judge),
        "gate_p50_ms": statistics.median(gate),
        "judge_alone_p50_ms": statistics.median(judge),
    }


def _target(name: str, value: float | None, limit: float, unit: str) -> dict[str, Any]:
    return {
        "target": name,
        "value": value,
        "limit": limit,
        "unit": unit,
        "passed": None if value is None else value <= limit,
    }


# --------------------------------------------------------------------------- report


def _fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def render(report: Mapping[str, Any]) -> str:
    """Markdown: the judge alone, one table row per level, the targets."""
    lines = [
        f"Gate benchmark, judge `{report['judge']}`; machine {report['machine']['nproc']} "
        f"CPUs ({report['machine']['cpu_model']}), Python {report['machine']['python']}."
    ]
    lines.append("")
    for kind, alone in report.get("judge_alone", {}).items():
        ms = alone.get("ms") or {}
        lines.append(
            f"- judge alone, {kind}: p50 {_fmt(ms.get('p50'))} / p99 {_fmt(ms.get('p99'))} ms "
            f"per answer ({alone.get('answers')} answers, one per call), peak RSS "
            f"{_fmt(alone.get('peak_rss_mib'), 0)} MiB"
        )
    header = [
        "path", "answers", "load", "offered/s", "sent", "p50 ms", "p95 ms", "p99 ms",
        "within budget", "within +50 ms", "shed", "verified", "unanswered", "peak RSS MiB",
    ]  # fmt: skip
    lines += ["", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for run in report.get("runs", []):
        cap = run["capacity"]
        lines.append(
            f"| {run['path']} | {run['kind']} | capacity (closed loop) | - | "
            f"{cap['requests']} | - | - | - | - | - | - | - | {cap['errors']} | - |"
        )
        for lv in run["levels"]:
            lat = lv["latency_ms"] or {}
            lines.append(
                "| "
                + " | ".join(
                    [
                        run["path"],
                        run["kind"],
                        f"{lv['load_pct']:g} %",
                        _fmt(lv["offered_rate"], 2),
                        str(lv["sent"]),
                        *(_fmt(lat.get(k), 0) for k in ("p50", "p95", "p99")),
                        _pct(lv["within_budget"]),
                        _pct(lv["within_budget_plus_50ms"]),
                        _pct(lv["shed"]),
                        _pct(lv["verified"]),
                        str(lv["unanswered"]),
                        _fmt(lv["peak_rss_mib"], 0),
                    ]
                )
                + " |"
            )
    lines += ["", "Capacity (closed loop, verified answers/s):"]
    for run in report.get("runs", []):
        lines.append(
            f"- {run['path']}, {run['kind']}: {_fmt(run['capacity']['answers_per_s'], 2)} "
            f"(budget {run['budget_ms']:g} ms in the open loop; {run['repeated_answers']} "
            f"repeated answers of a pool of {run['pool']})"
        )
    lines += ["", "Targets:"]
    for each in report.get("targets", []):
        verdict = {True: "PASS", False: "FAIL", None: "n/a"}[each["passed"]]
        value = each["value"]
        shown = _pct(value) if each["unit"] == "share" else f"{_fmt(value)} ms"
        limit = _pct(each["limit"]) if each["unit"] == "share" else f"{each['limit']:g} ms"
        lines.append(f"- {verdict}: {each['target']}: {shown} (target {limit})")
        detail = each.get("detail")
        if detail:
            lines.append(
                f"  ({detail['answers']} answers; gate p50 {_fmt(detail['gate_p50_ms'])} ms, "
                f"judge alone p50 {_fmt(detail['judge_alone_p50_ms'])} ms, difference of the "
                f"medians {_fmt(detail['difference_of_medians_ms'])} ms)"
            )
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- main


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


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    command = command_line()
    args.log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="bench-gate-logs-"))
    args.log_dir.mkdir(parents=True, exist_ok=True)
    pools = {kind: answer_pool(kind, args.data) for kind in args.answers}
    report: dict[str, Any] = {
        "command": command,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "judge": Settings().judge.name,
        "gate_settings": Settings().gate.model_dump(mode="json"),
        "answers": {kind: text for kind, (_, text) in pools.items()},
        "paths": args.paths,
        "loads_pct": args.loads,
        "duration_s": args.duration_s,
        "capacity_s": args.capacity_s,
        "max_rate": args.max_rate,
        "gate_logs": str(args.log_dir),
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
        print(f"Command: `{command}`\n", flush=True)
        print(render(report), flush=True)
        if args.json:
            Path(args.json).write_text(text, encoding="utf-8")
            log(f"wrote {args.json}")
    return 0


def _json_default(value: object) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)  # type: ignore[call-overload]
    raise TypeError(f"not JSON: {type(value).__name__}")
