"""The topics streamproc reads and writes, created explicitly at start-up.

We never rely on broker auto-creation: partition counts decide how far a consumer group
can scale, so they are chosen here, from settings, on purpose. Keys (docs/stream.md):

- answers (input): producers key by ``conversation_id`` so one conversation stays in
  order; streamproc does not depend on it.
- verdicts, flags: ``answer_id`` - what auditors and products look an answer up by.
- answer-outcomes (internal): ``assistant_id`` - all of one assistant's outcomes meet in
  one partition, which is what per-assistant windows need.
- aggregates: ``assistant_id`` - one assistant's windows arrive in order.
- dead letter: the original key, so a replay lands where the original would have.
- audit: ``answer_id`` (compacted), one record per judged answer, written in the same
  transaction as its verdict; accepted reviewer labels as ``label:<answer_id>:<label_id>``.
- review queue, labels: ``answer_id``, with the same partition count, so an answer's review
  item and its labels meet in one partition of the labels loop (co-partitioned join).
- label deltas (internal), judge accuracy (compacted): the accuracy cell
  ``tenant/assistant/task_type/judge_key``.

The loops write through :class:`~streamproc.verdicts.catalog.OutputTopics`, which
keys and sizes every record under the limits set here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import structlog
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code

from streamproc.config import Settings
from streamproc.kafka.options import KafkaSecurity
from streamproc.kafka.security import (
    BrokerUnreachable,
    aiokafka_options,
    explain_access_errors,
    socket_error,
)
from streamproc.verdicts.topic_names import (
    AUDIT_MAX_MESSAGE_BYTES,
    DEAD_LETTER_MAX_BYTES,
    accuracy_changelog_topic,
    judge_dedup_changelog_topic,
    labels_changelog_topic,
    window_changelog_topic,
)

__all__ = [
    "AUDIT_MAX_MESSAGE_BYTES",
    "DEAD_LETTER_MAX_BYTES",
    "TopicSpec",
    "accuracy_changelog_topic",
    "audit_checkpoint_topic_spec",
    "audit_topic_spec",
    "await_topics",
    "ensure_topics",
    "gate_topic_specs",
    "judge_dedup_changelog_topic",
    "labels_changelog_topic",
    "prepare_topics",
    "review_topic_specs",
    "topic_specs",
    "window_changelog_topic",
]

log = structlog.get_logger(__name__)


_DAY_MS = 24 * 3600 * 1000

_GATE_RETENTION_MS = 3600 * 1000
"""Gate requests and replies matter for one budget (milliseconds to seconds): an hour
is ample for a replay or a look, and keeps the topics small."""


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    config: dict[str, str] = field(default_factory=dict)


def review_topic_specs(settings: Settings) -> list[TopicSpec]:
    """The reviewers' loop: the queue and the labels (co-partitioned, by answer id), the
    internal deltas, the compacted accuracy table and the two loops' changelogs."""
    topics = settings.topics

    def spec(name: str, config: dict[str, str]) -> TopicSpec:
        return TopicSpec(name, topics.partitions, topics.replication_factor, config)

    output = {"max.message.bytes": str(topics.output_max_message_bytes)}
    compacted = {"cleanup.policy": "compact", **output}
    return [
        # A review item carries the answer and its evidence, like an audit record.
        spec(settings.review.queue_topic, {"max.message.bytes": str(AUDIT_MAX_MESSAGE_BYTES)}),
        spec(settings.review.labels_topic, output),
        spec(settings.labels.deltas_topic, output),
        spec(settings.labels.accuracy_topic, compacted),
        spec(labels_changelog_topic(settings.app_id), compacted),
        spec(accuracy_changelog_topic(settings.app_id), compacted),
    ]


def topic_specs(settings: Settings) -> list[TopicSpec]:
    """Every topic the worker needs, with explicit partition counts and an explicit
    ``max.message.bytes`` on every topic the worker writes: the judging stage fits its
    outputs under exactly these limits (``stream/output/catalog.py``), so they must not be
    whatever the broker's default happens to be."""
    topics = settings.topics

    def spec(name: str, config: dict[str, str] | None = None) -> TopicSpec:
        return TopicSpec(name, topics.partitions, topics.replication_factor, config or {})

    output = {"max.message.bytes": str(topics.output_max_message_bytes)}
    return [
        spec(topics.answers),
        spec(topics.verdicts, output),
        spec(topics.flags, output),
        spec(topics.outcomes, output),
        spec(topics.aggregates, output),
        spec(settings.window.hopping_topic, output),
        spec(settings.window.late_topic, output),
        spec(settings.alerts.topic, output),  # firing / resolved events, key tenant/assistant
        # The window loop's state, partitioned like the outcomes it is derived from.
        spec(
            window_changelog_topic(settings.app_id),
            {"cleanup.policy": "compact", **output},
        ),
        # The judging loop's (tenant, event_id) marks, partitioned like the answers.
        spec(judge_dedup_changelog_topic(settings.app_id), {"cleanup.policy": "compact", **output}),
        *([audit_topic_spec(settings)] if settings.audit.enabled else []),
        *(
            review_topic_specs(settings)
            if settings.review.enabled or settings.labels.enabled
            else []
        ),
        *(gate_topic_specs(settings) if settings.gate.kafka_requests else []),
        spec(
            topics.dead_letter,
            {
                "max.message.bytes": str(DEAD_LETTER_MAX_BYTES),
                # Dead letters hold raw evidence: kept only as long as replays need.
                "retention.ms": str(topics.dead_letter_retention_ms),
            },
        ),
    ]


def gate_topic_specs(settings: Settings) -> list[TopicSpec]:
    """The gate's Kafka request / reply: its requests topic (answer events, as on the
    answers topic) and the default reply topic (``gate.replies_topic``; a reply holds
    a whole verdict, so it takes the output topics' record size). Both short-lived."""
    topics = settings.topics
    short = {"retention.ms": str(_GATE_RETENTION_MS)}
    output = {"max.message.bytes": str(topics.output_max_message_bytes)}
    return [
        TopicSpec(
            settings.gate.requests_topic, topics.partitions, topics.replication_factor, short
        ),
        TopicSpec(
            settings.gate.replies_topic,
            topics.partitions,
            topics.replication_factor,
            {**short, **output},
        ),
    ]


def audit_topic_spec(settings: Settings) -> TopicSpec:
    """The audit topic: keyed by answer id, compacted (a re-judged answer replaces its
    record), records older than the retention dropped, segments rolled daily so that
    compaction and purges take effect within a day. The sink's signed chain-head
    checkpoints go to a topic of their own (:func:`audit_checkpoint_topic_spec`)."""
    topics = settings.topics
    return TopicSpec(
        settings.audit.topic,
        topics.partitions,
        topics.replication_factor,
        {
            "cleanup.policy": "compact,delete",
            "retention.ms": str(settings.audit.retention_days * _DAY_MS),
            "segment.ms": str(_DAY_MS),
            "max.message.bytes": str(AUDIT_MAX_MESSAGE_BYTES),
        },
    )


def audit_checkpoint_topic_spec(settings: Settings) -> TopicSpec:
    """The signed chain-head checkpoints of the audit sink, apart from the store (key
    ``checkpoint:<partition>``): every checkpoint kept for the audit retention, never
    compacted, so a store whose tail and checkpoint rows were cut is still caught."""
    topics = settings.topics
    return TopicSpec(
        settings.audit.checkpoint_topic,
        1,
        topics.replication_factor,
        {
            "cleanup.policy": "delete",
            "retention.ms": str(settings.audit.retention_days * _DAY_MS),
        },
    )


async def ensure_topics(
    bootstrap_servers: str, specs: list[TopicSpec], security: KafkaSecurity
) -> list[str]:
    """Create the missing topics; return the names created. Existing ones are left as they
    are (a different partition count there is an operator's decision, not ours).

    Raises ``BrokerAccessDenied`` when the broker refuses our credentials or certificate."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap_servers, request_timeout_ms=30_000, **aiokafka_options(security)
    )
    try:
        async with explain_access_errors(bootstrap_servers, security):
            await admin.start()
        existing = set(await admin.list_topics())
        missing = [spec for spec in specs if spec.name not in existing]
        if not missing:
            return []
        response = await admin.create_topics(
            [
                NewTopic(s.name, s.partitions, s.replication_factor, topic_configs=s.config)
                for s in missing
            ],
            timeout_ms=30_000,
        )
        created: list[str] = []
        for name, code, *detail in response.topic_errors:
            if code == 0:
                created.append(name)
            elif code != TopicAlreadyExistsError.errno:  # another worker won the race: fine
                raise for_code(code)(f"cannot create topic {name!r}: {detail}")
        return created
    finally:
        await admin.close()


async def prepare_topics(settings: Settings, *, delay_s: float = 2.0) -> None:
    """Create the topics, waiting for the broker to come up (containers start in any order)."""
    created = await await_topics(
        settings.bootstrap_servers,
        topic_specs(settings),
        settings.security,
        give_up_s=settings.broker_connect_timeout_s,
        delay_s=delay_s,
    )
    log.info("topics_ready", created=created, partitions=settings.topics.partitions)


async def await_topics(
    bootstrap_servers: str,
    specs: list[TopicSpec],
    security: KafkaSecurity,
    *,
    give_up_s: float,
    delay_s: float = 2.0,
) -> list[str]:
    """:func:`ensure_topics`, retried quietly (at debug level) until the broker answers;
    after ``give_up_s`` it raises ``BrokerUnreachable``, one line saying what was tried.
    ``BrokerAccessDenied`` is not retried: credentials do not get better by waiting."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + give_up_s
    log.info(
        "broker_connecting",
        bootstrap_servers=bootstrap_servers,
        security_protocol=security.protocol,
        give_up_s=give_up_s,
    )
    attempt = 0
    last: BaseException | None = None
    while True:
        attempt += 1
        try:
            async with asyncio.timeout_at(deadline):
                return await ensure_topics(bootstrap_servers, specs, security)
        except (KafkaError, OSError, TimeoutError) as exc:
            # Our own deadline cutting an attempt short says less than the error before it.
            last = last if isinstance(exc, TimeoutError) and last is not None else exc
            if loop.time() >= deadline:
                reason = await socket_error(bootstrap_servers)
                waited_s = loop.time() - started
                raise BrokerUnreachable(
                    bootstrap_servers, security, waited_s, last, reason
                ) from None
            log.debug("broker_not_ready", attempt=attempt, error=repr(exc))
            await asyncio.sleep(min(delay_s, deadline - loop.time()))
