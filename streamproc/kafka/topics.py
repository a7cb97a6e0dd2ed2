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
keys and sizes every record under the limits set here. Both are read from the settings
once, by the composition root (:func:`streamproc.wiring.topic_layout`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import structlog
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code

from streamproc.contracts.topic_names import TopicNames
from streamproc.kafka.options import KafkaConnection, KafkaSecurity
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
    "TopicLayout",
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


@dataclass(frozen=True, slots=True)
class TopicLayout:
    """Every topic a deployment creates, and how: the names, partition count, replication,
    record caps and retention, and which optional groups of topics exist."""

    names: TopicNames
    partitions: int
    """``topics.partitions``: of every topic but the audit checkpoints (one)."""
    replication_factor: int
    """``topics.replication_factor``."""
    output_max_message_bytes: int
    """``topics.output_max_message_bytes``: ``max.message.bytes`` of the output topics."""
    dead_letter_retention_ms: int
    """``topics.dead_letter_retention_ms``."""
    audit_retention_days: int
    """``audit.retention_days``: of the audit topic and its checkpoints."""
    audit: bool
    """``audit.enabled``: the worker creates the audit topic."""
    review: bool
    """``review.enabled`` or ``labels.enabled``: the worker creates the reviewers' loop's
    topics."""
    gate_requests: bool
    """``gate.kafka_requests``: the worker creates the gate's request and reply topics."""

    def spec(self, name: str, config: dict[str, str] | None = None) -> TopicSpec:
        """A topic of the usual partition count and replication."""
        return TopicSpec(name, self.partitions, self.replication_factor, config or {})

    @property
    def output(self) -> dict[str, str]:
        """The config of an output topic: its record cap."""
        return {"max.message.bytes": str(self.output_max_message_bytes)}


def review_topic_specs(layout: TopicLayout) -> list[TopicSpec]:
    """The reviewers' loop: the queue and the labels (co-partitioned, by answer id), the
    internal deltas, the compacted accuracy table and the two loops' changelogs."""
    names, output, spec = layout.names, layout.output, layout.spec
    compacted = {"cleanup.policy": "compact", **output}
    return [
        # A review item carries the answer and its evidence, like an audit record.
        spec(names.review_queue, {"max.message.bytes": str(AUDIT_MAX_MESSAGE_BYTES)}),
        spec(names.labels, output),
        spec(names.label_deltas, output),
        spec(names.judge_accuracy, compacted),
        spec(names.labels_changelog, compacted),
        spec(names.accuracy_changelog, compacted),
    ]


def topic_specs(layout: TopicLayout) -> list[TopicSpec]:
    """Every topic the worker needs, with explicit partition counts and an explicit
    ``max.message.bytes`` on every topic the worker writes: the judging stage fits its
    outputs under exactly these limits (``verdicts/catalog.py``), so they must not be
    whatever the broker's default happens to be."""
    names, output, spec = layout.names, layout.output, layout.spec
    return [
        spec(names.answers),
        spec(names.verdicts, output),
        spec(names.flags, output),
        spec(names.outcomes, output),
        spec(names.aggregates, output),
        spec(names.hopping, output),
        spec(names.late, output),
        spec(names.alerts, output),  # firing / resolved events, key tenant/assistant
        # The window loop's state, partitioned like the outcomes it is derived from.
        spec(names.window_changelog, {"cleanup.policy": "compact", **output}),
        # The judging loop's (tenant, event_id) marks, partitioned like the answers.
        spec(names.judge_dedup_changelog, {"cleanup.policy": "compact", **output}),
        *([audit_topic_spec(layout)] if layout.audit else []),
        *(review_topic_specs(layout) if layout.review else []),
        *(gate_topic_specs(layout) if layout.gate_requests else []),
        spec(
            names.dead_letter,
            {
                "max.message.bytes": str(DEAD_LETTER_MAX_BYTES),
                # Dead letters hold raw evidence: kept only as long as replays need.
                "retention.ms": str(layout.dead_letter_retention_ms),
            },
        ),
    ]


def gate_topic_specs(layout: TopicLayout) -> list[TopicSpec]:
    """The gate's Kafka request / reply: its requests topic (answer events, as on the
    answers topic) and the default reply topic (``gate.replies_topic``; a reply holds
    a whole verdict, so it takes the output topics' record size). Both short-lived."""
    short = {"retention.ms": str(_GATE_RETENTION_MS)}
    return [
        layout.spec(layout.names.gate_requests, short),
        layout.spec(layout.names.gate_replies, {**short, **layout.output}),
    ]


def audit_topic_spec(layout: TopicLayout) -> TopicSpec:
    """The audit topic: keyed by answer id, compacted (a re-judged answer replaces its
    record), records older than the retention dropped, segments rolled daily so that
    compaction and purges take effect within a day. The sink's signed chain-head
    checkpoints go to a topic of their own (:func:`audit_checkpoint_topic_spec`)."""
    return layout.spec(
        layout.names.audit,
        {
            "cleanup.policy": "compact,delete",
            "retention.ms": str(layout.audit_retention_days * _DAY_MS),
            "segment.ms": str(_DAY_MS),
            "max.message.bytes": str(AUDIT_MAX_MESSAGE_BYTES),
        },
    )


def audit_checkpoint_topic_spec(layout: TopicLayout) -> TopicSpec:
    """The signed chain-head checkpoints of the audit sink, apart from the store (key
    ``checkpoint:<partition>``): every checkpoint kept for the audit retention, never
    compacted, so a store whose tail and checkpoint rows were cut is still caught."""
    return TopicSpec(
        layout.names.audit_checkpoints,
        1,
        layout.replication_factor,
        {
            "cleanup.policy": "delete",
            "retention.ms": str(layout.audit_retention_days * _DAY_MS),
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


async def prepare_topics(
    layout: TopicLayout, connection: KafkaConnection, *, delay_s: float = 2.0
) -> None:
    """Create the topics, waiting for the broker to come up (containers start in any order)."""
    created = await await_topics(
        connection.bootstrap_servers,
        topic_specs(layout),
        connection.security,
        give_up_s=connection.connect_timeout_s,
        delay_s=delay_s,
    )
    log.info("topics_ready", created=created, partitions=layout.partitions)


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
