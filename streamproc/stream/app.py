"""``create_app``: the faust application of a worker, built from settings, doing nothing
on import.

faust keeps what it is good at: the ``count-windows`` agent with its changelogged window
table (``stream/window_agent.py``). The judging consumer is not a faust agent any more:
it is our own aiokafka loop with Kafka transactions (``stream/judge_loop.py``), which
the worker runs beside this app (``stream/worker.py``).
"""

from __future__ import annotations

import faust
from faust.types import TopicT

from streamproc.adapters.kafka_security import faust_options
from streamproc.config import Settings
from streamproc.stream.topics import DEAD_LETTER_MAX_BYTES
from streamproc.stream.window_agent import install_window_agent

__all__ = ["create_app"]


def create_app(settings: Settings) -> faust.App:
    """Build the faust app (windows); starts nothing."""
    tansu = settings.broker_flavour == "tansu"
    app = faust.App(
        settings.app_id,
        broker=settings.broker_url,
        store="memory://",
        autodiscover=False,
        env={},  # settings come from STREAMPROC_* only, never faust's unprefixed variables
        web_enabled=False,
        topic_partitions=settings.topics.partitions,
        topic_replication_factor=settings.topics.replication_factor,
        topic_allow_declare=True,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        producer_max_request_size=DEAD_LETTER_MAX_BYTES + 64 * 1024,
        # Tansu under-reports the last offset of multi-record batches; one record per batch.
        producer_max_batch_size=1 if tansu else 16384,
        broker_rebalance_timeout=settings.worker.rebalance_timeout_s,
        broker_session_timeout=settings.worker.session_timeout_s,
        broker_heartbeat_interval=min(3.0, settings.worker.session_timeout_s / 3),
        table_standby_replicas=0,
        **faust_options(settings.security),
    )
    topics = settings.topics
    install_window_agent(
        app,
        settings,
        outcomes=_raw_topic(app, topics.outcomes, topics.partitions),
        aggregates=_raw_topic(app, topics.aggregates, topics.partitions),
        dead_letters=_raw_topic(app, topics.dead_letter, topics.partitions),
    )
    return app


def _raw_topic(app: faust.App, name: str, partitions: int) -> TopicT:
    """A topic of plain bytes: we (de)serialise with pydantic ourselves, so a bad record
    reaches our code (and the dead-letter topic) instead of failing inside faust."""
    return app.topic(
        name,
        partitions=partitions,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
    )
