"""The composition root: settings in; judges (models, calibrators), the judge runner, the
worker's loops and the gate out.

Every entry point - the worker, the offline evaluation, the benchmarks - builds its
judge with :mod:`streamproc.inference.judges` (re-exported here), so one setting means
the same judge everywhere and the judge library never reads settings itself. The wings
never read ``Settings`` either: what they are told comes as their own option groups, or
as small frozen option objects built here once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from streamproc.config import Settings
from streamproc.inference.judges import (
    available_judges,
    build_judge,
    build_nli_judge,
    judge_key_of,
    judge_limits,
    measured_accuracy,
    nli_options,
    record_checks,
)

if TYPE_CHECKING:
    from pydantic import SecretStr

    from streamproc.contracts.openapi import GateApiDefaults
    from streamproc.contracts.topic_names import TopicNames
    from streamproc.evaluate.calibration.label_refit import RefitOptions
    from streamproc.gate.client import GateClient
    from streamproc.gate.kafka.access import ReplyTopicRule
    from streamproc.gate.kafka.loop import GateKafkaOptions, GateRequestLoop
    from streamproc.gate.options import FailurePolicy
    from streamproc.gate.sensor import GateSensor
    from streamproc.gate.service import GateService, GateServiceOptions
    from streamproc.gate.tracing import DecisionTracing
    from streamproc.judge.protocols import Judge
    from streamproc.kafka.consumer import ConsumerLoop, KafkaLoopOptions
    from streamproc.kafka.options import KafkaConnection
    from streamproc.kafka.topics import TopicLayout
    from streamproc.monitor.judging_loop import JudgeLoop
    from streamproc.monitor.windows.loop import WindowLoop, WindowLoopOptions
    from streamproc.review.label_files.exporter import LabelExportOptions
    from streamproc.review.label_files.importer import LabelImportOptions
    from streamproc.review.labels.accuracy_loop import AccuracyLoop
    from streamproc.review.labels.loop import LabelsLoop
    from streamproc.telemetry.metrics import WorkerMetrics
    from streamproc.telemetry.otel import Telemetry
    from streamproc.verdicts.catalog import OutputTopics
    from streamproc.verdicts.runner import JudgeRunner, LogOptions
    from streamproc.verdicts.stage import StageLimits

__all__ = [
    "WorkerLoops",
    "available_judges",
    "build_gate",
    "build_judge",
    "build_loops",
    "build_nli_judge",
    "gate_api_defaults",
    "gate_client",
    "gate_kafka_options",
    "gate_request_loop",
    "gate_service",
    "gate_service_options",
    "internal_topics",
    "judge_key_of",
    "judge_limits",
    "judge_runner",
    "kafka_connection",
    "kafka_loop_options",
    "label_export_options",
    "label_import_options",
    "may_label",
    "measured_accuracy",
    "nli_options",
    "output_topics",
    "prepare_topics",
    "record_checks",
    "refit_options",
    "reply_topic_rule",
    "stage_limits",
    "topic_layout",
    "topic_names",
    "window_loop_options",
]


def judge_runner(settings: Settings, *, log: LogOptions | None = None) -> JudgeRunner:
    """The runner ``worker.judge_process`` asks for. In-thread, the judge is built here
    (models loaded before the worker joins its groups); in a process, by the child at
    :meth:`JudgeRunner.start`."""
    from streamproc.verdicts.runner import JudgeProcess, JudgeThread

    if settings.worker.judge_process:
        return JudgeProcess(partial(build_judge, settings.judge), log)
    return JudgeThread(build_judge(settings.judge))


def topic_names(settings: Settings) -> TopicNames:
    """Every topic's name, as ``settings`` set them."""
    from streamproc.contracts.topic_names import TopicNames

    topics = settings.topics
    return TopicNames(
        app_id=settings.app_id,
        answers=topics.answers,
        verdicts=topics.verdicts,
        flags=topics.flags,
        aggregates=topics.aggregates,
        dead_letter=topics.dead_letter,
        outcomes=topics.outcomes,
        hopping=settings.window.hopping_topic,
        late=settings.window.late_topic,
        alerts=settings.alerts.topic,
        audit=settings.audit.topic,
        audit_checkpoints=settings.audit.checkpoint_topic,
        review_queue=settings.review.queue_topic,
        labels=settings.review.labels_topic,
        label_deltas=settings.labels.deltas_topic,
        judge_accuracy=settings.labels.accuracy_topic,
        gate_requests=settings.gate.requests_topic,
        gate_replies=settings.gate.replies_topic,
    )


def gate_api_defaults(settings: Settings) -> GateApiDefaults:
    """What the gate's OpenAPI document says of ``settings.gate``: its server and budgets."""
    from streamproc.contracts.openapi import GateApiDefaults

    gate = settings.gate
    return GateApiDefaults(
        host=gate.host,
        port=gate.port,
        default_budget_ms=gate.default_budget_ms,
        max_budget_ms=gate.max_budget_ms,
    )


def output_topics(settings: Settings) -> OutputTopics:
    """The catalog of every topic the worker writes: named, keyed and sized as ``settings``
    say. Build it once per process and hand it to whoever writes."""
    from streamproc.verdicts.catalog import OutputTopics

    return OutputTopics.named(topic_names(settings), settings.topics.output_max_message_bytes)


def topic_layout(settings: Settings) -> TopicLayout:
    """Every topic a deployment creates, and how (``topics.*``, the audit retention, and
    which optional topics the audit trail, the reviewers' loop and the gate need)."""
    from streamproc.kafka.topics import TopicLayout

    topics = settings.topics
    return TopicLayout(
        names=topic_names(settings),
        partitions=topics.partitions,
        replication_factor=topics.replication_factor,
        output_max_message_bytes=topics.output_max_message_bytes,
        dead_letter_retention_ms=topics.dead_letter_retention_ms,
        audit_retention_days=settings.audit.retention_days,
        audit=settings.audit.enabled,
        review=settings.review.enabled or settings.labels.enabled,
        gate_requests=settings.gate.kafka_requests,
    )


def kafka_connection(settings: Settings) -> KafkaConnection:
    """Where the broker is and how to reach it (``broker_*``, ``security.*``)."""
    from streamproc.kafka.options import KafkaConnection

    return KafkaConnection(
        bootstrap_servers=settings.bootstrap_servers,
        security=settings.security,
        flavour=settings.broker_flavour,
        connect_timeout_s=settings.broker_connect_timeout_s,
    )


def kafka_loop_options(settings: Settings) -> KafkaLoopOptions:
    """What every consumer loop of a process shares: the broker, ``worker.*``, the topics'
    names and the output topics. Build it once per process and hand it to every loop."""
    from streamproc.kafka.consumer import KafkaLoopOptions

    return KafkaLoopOptions(
        connection=kafka_connection(settings),
        worker=settings.worker,
        names=topic_names(settings),
        outputs=output_topics(settings),
    )


async def prepare_topics(settings: Settings, *, delay_s: float = 2.0) -> None:
    """Create the topics ``settings`` need, waiting for the broker to come up."""
    from streamproc.kafka.topics import prepare_topics as create

    await create(topic_layout(settings), kafka_connection(settings), delay_s=delay_s)


def stage_limits(settings: Settings, *, judge_key: str | None = None) -> StageLimits:
    """The judging stage's bounds (``worker.*``), the settings written into audit records
    (when ``audit.enabled``) and the review sampling (when ``review.enabled``).
    ``judge_key``: the judge's key in the measured-accuracy table, stamped on review
    items (:func:`judge_key_of`)."""
    from streamproc.verdicts.options import applied_settings
    from streamproc.verdicts.review_sampling import ReviewSampling
    from streamproc.verdicts.stage import StageLimits

    worker, review = settings.worker, settings.review
    return StageLimits(
        max_event_bytes=worker.max_event_bytes,
        judge_deadline_s=worker.judge_deadline_s,
        event_time_max_future_s=worker.event_time_max_future_s,
        event_time_max_past_s=worker.event_time_max_past_s,
        audit_settings=applied_settings(settings.judge, worker, settings.topics)
        if settings.audit.enabled
        else None,
        review=ReviewSampling(
            review.sample_rate, tuple(review.sample_rates), review.seed, judge_key
        )
        if review.enabled
        else None,
    )


@dataclass(frozen=True)
class WorkerLoops:
    """The consumer loops of one worker process: judging and windows always; the labels
    and accuracy loops of the reviewers' loop unless ``labels.enabled`` is off."""

    judging: JudgeLoop
    windows: WindowLoop
    labels: LabelsLoop | None = None
    accuracy: AccuracyLoop | None = None

    def all(self) -> list[ConsumerLoop]:
        """Every loop, in start order."""
        loops: list[ConsumerLoop] = [self.judging, self.windows]
        loops.extend(each for each in (self.labels, self.accuracy) if each is not None)
        return loops


def may_label(settings: Settings) -> Callable[[str, str], bool]:
    """Whether a reviewer may label a tenant's answers: the tokens file's reviewers and
    their tenants (``review.tokens_file``); without one, labels on the topic are trusted
    (who may write to it is the broker's ACLs' business) and only their tenant must match
    the answer's."""
    from streamproc.review.page.auth import reviewers_for

    reviewers = reviewers_for(settings.review)
    if reviewers is None:
        return lambda reviewer, tenant: True

    def allowed(reviewer: str, tenant: str) -> bool:
        found = reviewers.by_name(reviewer)
        return found is not None and found.may_see(tenant)

    return allowed


def window_loop_options(settings: Settings) -> WindowLoopOptions:
    """What the window loop reads besides every loop's options: ``window.*`` and
    ``labels.min_labels``."""
    from streamproc.monitor.windows.loop import WindowLoopOptions

    return WindowLoopOptions(window=settings.window, min_labels=settings.labels.min_labels)


def build_loops(
    settings: Settings, runner: JudgeRunner, *, telemetry: Telemetry, metrics: WorkerMetrics
) -> WorkerLoops:
    """The judging loop over ``runner`` and the window loop with its alert hooks, both
    reporting to ``telemetry`` and ``metrics``."""
    from streamproc.kafka.security import aiokafka_options
    from streamproc.monitor.judging_loop import JudgeLoop
    from streamproc.monitor.windows.alert_stage import AlertHooks
    from streamproc.monitor.windows.live_accuracy import LiveAccuracy
    from streamproc.monitor.windows.loop import WindowLoop
    from streamproc.review.labels.accuracy_loop import AccuracyLoop
    from streamproc.review.labels.loop import LabelsLoop

    options = aiokafka_options(settings.security)
    kafka = kafka_loop_options(settings)
    alerting = AlertHooks(settings.alerts, kafka.outputs.alerts, metrics)
    key = judge_key_of(settings.judge)
    live = settings.labels.enabled
    return WorkerLoops(
        judging=JudgeLoop(
            kafka,
            runner,
            limits=stage_limits(settings, judge_key=key),
            client_options=options,
            telemetry=telemetry,
            metrics=metrics,
        ),
        windows=WindowLoop(
            kafka,
            window_loop_options(settings),
            client_options=options,
            telemetry=telemetry,
            accuracy=measured_accuracy(settings.judge),
            live_accuracy=LiveAccuracy(
                kafka.connection.bootstrap_servers,
                kafka.names.judge_accuracy,
                client_options=options,
            )
            if live
            else None,
            judge_key=key,
            in_transaction=alerting.in_transaction,
            after_commit=alerting.after_commit,
        ),
        labels=(
            LabelsLoop(
                kafka,
                settings.labels,
                client_options=options,
                sensor=metrics,
                may_label=may_label(settings),
            )
            if live
            else None
        ),
        accuracy=(
            AccuracyLoop(kafka, settings.labels, client_options=options, sensor=metrics)
            if live
            else None
        ),
    )


def build_gate(settings: Settings, *, telemetry: Telemetry, sensor: GateSensor) -> GateService:
    """The inline gate's service over the judge ``settings.judge`` configure, in this
    process (its judge thread), tracing to ``telemetry`` and reporting to ``sensor``."""
    from streamproc.gate.span_tracing import gate_tracing

    return gate_service(
        settings,
        build_judge(settings.judge),
        judge_key=judge_key_of(settings.judge),
        sensor=sensor,
        tracing=gate_tracing(telemetry),
    )


def gate_client(
    settings: Settings,
    *,
    reply_topic: str | None = None,
    policy: FailurePolicy | Callable[[str], FailurePolicy] | None = None,
    create_reply_topic: bool = True,
    token: SecretStr | str | None = None,
) -> GateClient:
    """A Kafka client of the gate ``settings`` describe: its broker, security, requests
    topic, default reply topic (unless ``reply_topic``) and (unless ``policy``) its
    per-tenant failure policies. ``token``: the caller's token in the gate's tokens file,
    which the gate requires unless ``gate.kafka_auth`` is ``none``."""
    from streamproc.gate.client import GateClient

    topics = settings.topics
    return GateClient(
        settings.bootstrap_servers,
        reply_topic=reply_topic if reply_topic is not None else settings.gate.replies_topic,
        policy=policy if policy is not None else settings.gate.policy_for,
        requests_topic=settings.gate.requests_topic,
        security=settings.security,
        create_reply_topic=create_reply_topic,
        reply_partitions=topics.partitions,
        replication_factor=topics.replication_factor,
        idempotent=settings.broker_flavour == "kafka",
        token=token,
    )


def internal_topics(settings: Settings) -> frozenset[str]:
    """Every topic streamproc reads or writes but the gate's default reply topic."""
    from streamproc.kafka.topics import (
        audit_checkpoint_topic_spec,
        audit_topic_spec,
        gate_topic_specs,
        review_topic_specs,
        topic_specs,
    )

    layout = topic_layout(settings)
    specs = [
        *topic_specs(layout),
        *review_topic_specs(layout),
        audit_topic_spec(layout),
        audit_checkpoint_topic_spec(layout),
        *gate_topic_specs(layout),
    ]
    names = {spec.name for spec in specs}
    names.discard(settings.gate.replies_topic)
    return frozenset(names)


def reply_topic_rule(settings: Settings) -> ReplyTopicRule:
    """Where the gate's Kafka replies may go: ``gate.replies_topic`` and names matching
    ``gate.reply_topic_pattern``, never a topic streamproc reads or writes."""
    from streamproc.gate.kafka.access import ReplyTopicRule

    return ReplyTopicRule(
        default=settings.gate.replies_topic,
        pattern=re.compile(settings.gate.reply_topic_pattern),
        internal=internal_topics(settings),
        internal_prefix=f"{settings.app_id}.",
    )


def gate_kafka_options(settings: Settings) -> GateKafkaOptions:
    """What the gate's Kafka request loop reads of ``settings`` besides what every
    consumer loop does (:func:`kafka_loop_options`): ``gate.*``, the replies' size limit
    and where replies may go."""
    from streamproc.gate.kafka.loop import GateKafkaOptions

    return GateKafkaOptions(
        gate=settings.gate,
        max_message_bytes=settings.topics.output_max_message_bytes,
        reply_rule=reply_topic_rule(settings),
    )


def gate_request_loop(
    settings: Settings,
    service: GateService,
    *,
    client_options: Mapping[str, Any] | None = None,
    sensor: GateSensor | None = None,
    clock: Callable[[], float] = time.time,
) -> GateRequestLoop:
    """The gate's Kafka request loop over ``service``, told what ``settings`` say."""
    from streamproc.gate.kafka.loop import GateRequestLoop

    return GateRequestLoop(
        kafka_loop_options(settings),
        gate_kafka_options(settings),
        service,
        client_options=client_options,
        sensor=sensor,
        clock=clock,
    )


def gate_service_options(settings: Settings, *, judge_key: str | None = None) -> GateServiceOptions:
    """What the gate's service reads of ``settings``: ``gate.*`` and the verdict stage's
    limits and output topics. ``judge_key``: the judge's key in the measured-accuracy
    table, on review items."""
    from streamproc.gate.service import GateServiceOptions

    gate = settings.gate
    policies: dict[str, FailurePolicy] = {}
    for each in gate.policies:
        policies.setdefault(each.tenant, each.policy)  # the first entry of a tenant wins
    return GateServiceOptions(
        limits=stage_limits(settings, judge_key=judge_key),
        topics=output_topics(settings),
        batch_max=gate.batch_max,
        max_pending_factor=gate.max_pending_factor,
        settle_reserve_ms=gate.settle_reserve_ms,
        default_budget_ms=gate.default_budget_ms,
        max_budget_ms=gate.max_budget_ms,
        publish=gate.publish,
        policy=gate.policy,
        policies=MappingProxyType(policies),
    )


def gate_service(
    settings: Settings,
    judge: Judge,
    *,
    judge_key: str | None = None,
    sensor: GateSensor | None = None,
    tracing: DecisionTracing | None = None,
) -> GateService:
    """The gate's service over ``judge`` (in-process), told what ``settings`` say."""
    from streamproc.gate.service import GateService

    return GateService(
        gate_service_options(settings, judge_key=judge_key),
        judge,
        sensor=sensor,
        tracing=tracing,
    )


def label_import_options(settings: Settings) -> LabelImportOptions:
    """What ``review import`` reads of ``settings``: the broker, the tokens file and the
    labels topic (its key, size limit and how it is created)."""
    from streamproc.kafka.topics import review_topic_specs
    from streamproc.review.label_files.importer import LabelImportOptions

    labels = output_topics(settings).labels
    return LabelImportOptions(
        connection=kafka_connection(settings),
        review=settings.review,
        labels=labels,
        labels_spec=tuple(
            spec for spec in review_topic_specs(topic_layout(settings)) if spec.name == labels.name
        ),
    )


def label_export_options(settings: Settings) -> LabelExportOptions:
    """What ``review export`` reads of ``settings``: the broker, ``review.*`` (the topics
    read, the split's seed) and the labels' size limit."""
    from streamproc.review.label_files.exporter import LabelExportOptions

    return LabelExportOptions(
        connection=kafka_connection(settings),
        review=settings.review,
        labels_max_bytes=settings.topics.output_max_message_bytes,
    )


def refit_options(settings: Settings) -> RefitOptions:
    """What ``calibrate --from-labels`` reads of ``settings``: the judge, ``worker.batch_max``
    and ``labels.target_precision``."""
    from streamproc.evaluate.calibration.label_refit import RefitOptions

    return RefitOptions(
        judge=settings.judge,
        batch_max=settings.worker.batch_max,
        target_precision=settings.labels.target_precision,
    )
