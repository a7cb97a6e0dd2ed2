"""Running one worker process: create topics, build the judging loop and the windows' faust
app, hand both to faust's worker."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import NoReturn

import faust
import structlog
from aiokafka.errors import KafkaError

from streamproc.adapters.health import HealthServer, HealthState
from streamproc.adapters.kafka_security import aiokafka_options
from streamproc.config import Settings
from streamproc.judge import build_judge
from streamproc.stream.app import create_app
from streamproc.stream.judge_loop import JudgeLoop
from streamproc.stream.publisher import PublishFailed
from streamproc.stream.topics import ensure_topics, topic_specs

__all__ = ["prepare_topics", "run_worker"]

log = structlog.get_logger(__name__)


async def prepare_topics(settings: Settings, *, attempts: int = 30, delay_s: float = 2.0) -> None:
    """Create the topics, waiting for the broker to come up (containers start in any order)."""
    for attempt in range(1, attempts + 1):
        try:
            created = await ensure_topics(
                settings.bootstrap_servers, topic_specs(settings), settings.security
            )
            log.info("topics_ready", created=created, partitions=settings.topics.partitions)
            return
        except (KafkaError, OSError) as exc:
            if attempt == attempts:
                raise
            log.warning("broker_not_ready", attempt=attempt, error=repr(exc))
            await asyncio.sleep(delay_s)


def run_worker(settings: Settings) -> NoReturn:
    """Block running the worker until SIGTERM/SIGINT.

    Two consumers share the process: our judging loop (answers -> verdicts, one Kafka
    transaction per micro-batch) and faust's windows agent (outcomes -> aggregates).
    A batch that cannot be published ends the process with exit code 3, after one log
    line, so the orchestrator restarts it; nothing unpublished was acknowledged.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.run_until_complete(prepare_topics(settings))
    judge = build_judge(settings.judge)
    app = create_app(settings)
    judging = JudgeLoop(settings, judge, client_options=aiokafka_options(settings.security))
    health = _health_server(settings, judging)

    @app.task  # type: ignore[untyped-decorator]
    async def judge_answers() -> None:
        if health is not None:
            await health.start()
            log.info("health_server_started", port=health.port)
        try:
            await judging.run()
        except PublishFailed as exc:
            _exit(EXIT_PUBLISH_FAILED, "publish_failed_exiting", exc)
        except Exception as exc:  # noqa: BLE001 - the loop must never end silently
            _exit(EXIT_JUDGE_LOOP_CRASHED, "judge_loop_crashed_exiting", exc)

    log.info(
        "worker_starting",
        app_id=settings.app_id,
        judge=judge.info.name,
        guarantee="exactly_once" if judging.transactional else "at_least_once",
    )
    worker = faust.Worker(
        app,
        loop=loop,
        loglevel=settings.log_level,
        override_logging=False,
        redirect_stdouts=False,
        quiet=True,
    )
    worker.execute_from_commandline()


EXIT_PUBLISH_FAILED = 3
EXIT_JUDGE_LOOP_CRASHED = 4


def _exit(code: int, event: str, exc: BaseException) -> NoReturn:
    """One clear line, then leave at once: no offset of the failed batch is committed,
    and faust's orderly shutdown could itself hang on a broker that is gone."""
    log.error(event, error=repr(exc), exit_code=code)
    logging.shutdown()
    os._exit(code)


def _health_server(settings: Settings, judging: JudgeLoop) -> HealthServer | None:
    port = settings.worker.health_port
    if port is None:
        return None

    def probe() -> HealthState:
        watch = judging.watch
        return HealthState(
            live=judging.live,
            ready=judging.started,
            detail={
                "lag": watch.total_lag(),
                "partitions": len(watch.partitions),
                "judged": judging.judged,
            },
        )

    return HealthServer(probe, host="0.0.0.0", port=port)
