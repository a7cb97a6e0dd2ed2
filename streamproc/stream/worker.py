"""Running one worker process: create topics, build the app, hand it to faust."""

from __future__ import annotations

import asyncio
from typing import NoReturn

import faust
import structlog
from aiokafka.errors import KafkaError

from streamproc.config import Settings
from streamproc.judge import build_judge
from streamproc.stream.app import create_app
from streamproc.stream.topics import ensure_topics, topic_specs

__all__ = ["prepare_topics", "run_worker"]

log = structlog.get_logger(__name__)


async def prepare_topics(settings: Settings, *, attempts: int = 30, delay_s: float = 2.0) -> None:
    """Create the topics, waiting for the broker to come up (containers start in any order)."""
    for attempt in range(1, attempts + 1):
        try:
            created = await ensure_topics(settings.bootstrap_servers, topic_specs(settings))
            log.info("topics_ready", created=created, partitions=settings.topics.partitions)
            return
        except (KafkaError, OSError) as exc:
            if attempt == attempts:
                raise
            log.warning("broker_not_ready", attempt=attempt, error=repr(exc))
            await asyncio.sleep(delay_s)


def run_worker(settings: Settings) -> NoReturn:
    """Block running the worker until SIGTERM/SIGINT; offsets of judged answers are
    committed on the way out."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.run_until_complete(prepare_topics(settings))
    judge = build_judge(settings.judge)
    app = create_app(settings, judge)
    log.info("worker_starting", app_id=settings.app_id, judge=judge.info.name)
    worker = faust.Worker(
        app,
        loop=loop,
        loglevel=settings.log_level,
        override_logging=False,
        redirect_stdouts=False,
        quiet=True,
    )
    worker.execute_from_commandline()
