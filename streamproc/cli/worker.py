"""Running one worker process: create topics, then run the judging loop, the window loop
and the reviewers' labels and accuracy loops (built by :mod:`streamproc.wiring`) side by
side until a signal stops them."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import NoReturn

import structlog

from streamproc.config import Settings
from streamproc.contracts.events import JudgeInfo
from streamproc.kafka.consumer import ConsumerLoop
from streamproc.kafka.progress import partition_lags
from streamproc.kafka.publisher import PublishFailed
from streamproc.kafka.security import EXIT_BROKER_UNREACHABLE, BrokerUnreachable
from streamproc.monitor.judging_loop import JudgeLoop
from streamproc.monitor.windows.loop import WindowLoop
from streamproc.telemetry.logging import START_UP_SETTLE_S, start_up_done
from streamproc.telemetry.loop_guard import LoopGuard
from streamproc.telemetry.metrics import WorkerMetrics
from streamproc.telemetry.otel import Telemetry
from streamproc.telemetry.task_dump import install_task_dump
from streamproc.verdicts.runner import JudgeProcessDied, JudgeRunner, LogOptions
from streamproc.web.health import HealthServer, HealthState
from streamproc.web.metrics_server import MetricsServer
from streamproc.wiring import build_loops, judge_runner, prepare_topics

__all__ = ["run_worker"]

log = structlog.get_logger(__name__)


def run_worker(settings: Settings) -> NoReturn:
    """Block running the worker until SIGTERM/SIGINT, then leave the groups cleanly.

    The consumer loops share the process, each with its own group and Kafka
    transactions: judging (answers -> verdicts, flags, outcomes, review items, dead
    letters), windows (outcomes -> aggregates, with changelogged state), and unless
    ``labels.enabled`` is off labels (review items + labels -> label audit entries and
    deltas) and accuracy (deltas -> judge-accuracy events, judge_drift alerts). A batch
    that cannot be published ends the process with exit code 3 after one log line, so the
    orchestrator restarts it; nothing unpublished was acknowledged. So does a judge
    process that died (exit code 7). A broker that does not answer within
    ``broker_connect_timeout_s`` of the start ends it with exit code 8, after one line.
    """
    code = asyncio.run(_serve(settings))
    logging.shutdown()
    sys.exit(code)


EXIT_PUBLISH_FAILED = 3
EXIT_LOOP_CRASHED = 4
EXIT_STALLED = 6
EXIT_JUDGE_DIED = 7


async def _serve(settings: Settings) -> int:
    runner = judge_runner(settings, log=_log_options(settings))
    try:
        try:
            # Models first: a missing model fails at once, before any broker is awaited.
            judge_info = await runner.start()
        except JudgeProcessDied as exc:
            _judge_died(exc)
        try:
            await prepare_topics(settings)
        except BrokerUnreachable as exc:
            log.error("broker_unreachable", **exc.fields, exit_code=EXIT_BROKER_UNREACHABLE)
            return EXIT_BROKER_UNREACHABLE
        return await _serve_with(settings, runner, judge_info)
    finally:
        await asyncio.to_thread(runner.close)


def _log_options(settings: Settings) -> LogOptions | None:
    """The worker's own logging for the judge's process, when the worker's is set up
    (``streamproc worker`` configures it; an embedding program may not have)."""
    if not structlog.is_configured():
        return None
    return LogOptions(settings.log_level, settings.log_json, settings.audit.log_texts)


async def _serve_with(settings: Settings, runner: JudgeRunner, judge_info: JudgeInfo) -> int:
    telemetry = Telemetry.from_settings(settings.telemetry)
    metrics = WorkerMetrics()
    loops = build_loops(settings, runner, telemetry=telemetry, metrics=metrics)
    judging, windows = loops.judging, loops.windows
    every = loops.all()
    for each in every:
        metrics.add_lag_source(each.name, _lags_of(each))
    probe = _probe(judging, windows, every)
    health = _health_server(settings, probe)
    if health is not None:
        await health.start()
        log.info("health_server_started", port=health.port)
    metrics_server = MetricsServer.from_settings(settings.metrics, metrics, probe=probe)
    if metrics_server is not None:
        await metrics_server.start()
        log.info("metrics_server_started", url=metrics_server.url)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _stop_all, *every)
    install_task_dump(loop)
    log.info(
        "worker_starting",
        app_id=settings.app_id,
        judge=judge_info.name,
        judge_pid=runner.pid,
        telemetry=settings.telemetry.exporter,
        guarantee="exactly_once" if judging.transactional else "at_least_once",
    )
    guard = LoopGuard(blocked_after_s=max(30.0, settings.worker.stall_after_s))
    guard.start()
    beating = asyncio.create_task(guard.beat(), name="loop-guard-beat")
    helpers = [beating, asyncio.create_task(_exit_when_judge_dies(runner), name="judge-watch")]
    started = _end_start_up(settings.broker_connect_timeout_s, *every)
    helpers.append(asyncio.create_task(started, name="start-up-end"))
    if settings.worker.stall_exit_s is not None:
        stall_exit = _exit_when_stalled(settings.worker.stall_exit_s, *every)
        helpers.append(asyncio.create_task(stall_exit, name="stall-exit"))
    tasks = [asyncio.create_task(each.run(), name=f"{each.name}-loop") for each in every]
    try:
        for finished in asyncio.as_completed(tasks):
            try:
                await finished
            except PublishFailed as exc:
                _exit(EXIT_PUBLISH_FAILED, "publish_failed_exiting", exc)
            except JudgeProcessDied as exc:
                _judge_died(exc)
            except Exception as exc:  # noqa: BLE001 - a loop must never end silently
                _exit(EXIT_LOOP_CRASHED, "loop_crashed_exiting", exc)
            _stop_all(*every)  # one loop ended (a stop): end the others too
    finally:
        guard.stop()
        for helper in helpers:
            helper.cancel()
        if health is not None:
            await health.stop()
        if metrics_server is not None:
            await metrics_server.stop()
        await asyncio.to_thread(telemetry.shutdown)  # flush what is still batched
    log.info("worker_stopped", judged=judging.judged, windows_closed=windows.closed)
    return 0


async def _exit_when_judge_dies(runner: JudgeRunner) -> None:
    """A judge process that died while the stream is quiet ends the worker now, not at
    the next answer (a batch in flight fails by itself and ends it the same way)."""
    try:
        await runner.watch()
    except JudgeProcessDied as exc:
        _judge_died(exc)


async def _end_start_up(limit_s: float, *loops: ConsumerLoop) -> None:
    """Once every loop joined (or ``limit_s`` passed), and the first transactions had time
    to meet their coordinators, aiokafka's transient-state errors count as errors again."""
    deadline = time.monotonic() + limit_s
    while not all(each.started for each in loops) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    await asyncio.sleep(START_UP_SETTLE_S)
    start_up_done()


async def _exit_when_stalled(limit_s: float, *loops: ConsumerLoop) -> None:
    """Leave when a loop has not been live for ``limit_s``: a stall the worker cannot
    get out of by itself (a rebalance that never completes) ends with a restart."""
    not_live_since: float | None = None
    while True:
        await asyncio.sleep(1.0)
        if all(each.live for each in loops):
            not_live_since = None
            continue
        now = time.monotonic()
        not_live_since = not_live_since or now
        if now - not_live_since >= limit_s:
            _exit(EXIT_STALLED, "stalled_exiting", TimeoutError(f"not live for {limit_s:g} s"))


def _stop_all(*loops: ConsumerLoop) -> None:
    for each in loops:
        each.stop()


def _judge_died(exc: JudgeProcessDied) -> NoReturn:
    _exit(EXIT_JUDGE_DIED, "judge_process_died_exiting", exc)


def _exit(code: int, event: str, exc: BaseException) -> NoReturn:
    """One clear line, then leave at once: no offset of the failed batch is committed,
    and an orderly shutdown could itself hang on a broker that is gone."""
    log.error(event, error=repr(exc), exit_code=code)
    logging.shutdown()
    os._exit(code)


def _lags_of(loop: ConsumerLoop) -> Callable[[], dict[int, int | None]]:
    return lambda: partition_lags(loop.watch.progress)


def _probe(
    judging: JudgeLoop, windows: WindowLoop, every: list[ConsumerLoop]
) -> Callable[[], HealthState]:
    """Live: no loop has ended and each makes progress where it has work (a worker still
    joining is live: start-up probes cover that); ready: every loop joined."""

    def probe() -> HealthState:
        return HealthState(
            live=not any(each.ended for each in every) and all(each.live for each in every),
            ready=all(each.started for each in every),
            detail={
                "judge_lag": judging.watch.progress.total_lag(),
                "windows_lag": windows.watch.progress.total_lag(),
                "judged": judging.judged,
                "windows_closed": windows.closed,
            },
        )

    return probe


def _health_server(settings: Settings, probe: Callable[[], HealthState]) -> HealthServer | None:
    port = settings.worker.health_port
    if port is None:
        return None
    return HealthServer(probe, host="0.0.0.0", port=port)
