"""Every Kafka client of streamproc over SASL (PLAIN, SCRAM) and TLS, against a real broker
in kafka.sh's security mode; a refused login fails fast and says why; and ``kafka.sh
restart`` brings the same broker back on the same ports with its records."""

from __future__ import annotations

import asyncio
import base64
import logging
import subprocess
import time
import uuid
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent, DeadLetter, DeadLetterReason, Verdict
from streamproc.kafka.clients import OutputTail, publish_answers, publish_raw
from streamproc.kafka.options import KafkaSecurity
from streamproc.kafka.security import BrokerAccessDenied, aiokafka_options
from streamproc.kafka.topics import TopicSpec, ensure_topics, topic_specs
from streamproc.samples import SEED_LAB, load_answers
from streamproc.verdicts.options import TopicSettings
from streamproc.wiring import prepare_topics, topic_layout

if TYPE_CHECKING:
    from tests.integration.conftest import SaslMechanism, SecureKafka

# A refused login must surface well inside this; aiokafka alone would retry "Unable to
# bootstrap" in callers' loops for minutes.
REFUSAL_BOUND_S = 20.0


def _settings(address: str, security: KafkaSecurity, prefix: str, **extra: Any) -> Settings:
    run = uuid.uuid4().hex[:8]
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return Settings(
        app_id=f"{prefix}-{run}",
        broker_url=f"kafka://{address}",
        security=security,
        topics={**{name: f"{prefix}-{run}.{name}" for name in names}, "partitions": 1},
        audit={"topic": f"{prefix}-{run}.audit"},
        alerts={"topic": f"{prefix}-{run}.alerts"},
        review={
            "queue_topic": f"{prefix}-{run}.review-queue",
            "labels_topic": f"{prefix}-{run}.labels",
        },
        labels={
            "deltas_topic": f"{prefix}-{run}.label-deltas",
            "accuracy_topic": f"{prefix}-{run}.judge-accuracy",
        },
        **{
            "window": {
                "late_topic": f"{prefix}-{run}.late",
                "hopping_topic": f"{prefix}-{run}.hopping",
            },
            "gate": {
                "requests_topic": f"{prefix}-{run}.gate-requests",
                "replies_topic": f"{prefix}-{run}.gate-replies",
            },
            **extra,
        },
    )


def _answers(count: int) -> list[AnswerEvent]:
    """Seed answers stamped now: a worker dead-letters event times far from its clock."""
    start = datetime.now(UTC)
    return [
        a.model_copy(update={"occurred_at": start + timedelta(milliseconds=40 * index)})
        for index, a in enumerate(load_answers(SEED_LAB)[:count])
    ]


def _dead_letter(topic: str, offset: int) -> DeadLetter:
    return DeadLetter(
        reason=DeadLetterReason.BAD_JSON,
        error="written by test_security",
        topic=topic,
        partition=0,
        offset=offset,
        value_b64=base64.b64encode(b"{").decode(),
        received_at=datetime.now(UTC),
    )


async def _read_all(
    address: str, security: KafkaSecurity, topic: str, count: int
) -> list[bytes | None]:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=address,
        group_id=None,
        auto_offset_reset="earliest",
        **aiokafka_options(security),
    )
    await consumer.start()
    values: list[bytes | None] = []
    try:
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            for messages in (await consumer.getmany(timeout_ms=1000)).values():
                values.extend(message.value for message in messages)
    finally:
        await consumer.stop()
    return values


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-256"), ("SASL_PLAINTEXT", "SCRAM-SHA-512")],
)
async def test_clients_work_over_sasl(
    secure_kafka: SecureKafka,
    protocol: Literal["SASL_SSL", "SASL_PLAINTEXT"],
    mechanism: SaslMechanism,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    security = secure_kafka.security(mechanism, protocol=protocol)
    address = secure_kafka.address(protocol)
    settings = _settings(address, security, "sec")
    topics = settings.topics

    created = await ensure_topics(address, topic_specs(topic_layout(settings)), security)
    assert sorted(created) == sorted(spec.name for spec in topic_specs(topic_layout(settings)))
    assert await ensure_topics(address, topic_specs(topic_layout(settings)), security) == []

    answers = _answers(3)
    assert await publish_answers(address, topics.answers, answers, security=security) == 3
    read_back = await _read_all(address, security, topics.answers, 3)
    assert [AnswerEvent.model_validate_json(v or b"").event_id for v in read_back] == [
        a.event_id for a in answers
    ]

    letters = [_dead_letter(topics.answers, offset) for offset in range(2)]
    records: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]] = [
        (None, letter.model_dump_json().encode(), []) for letter in letters
    ]
    await publish_raw(address, topics.dead_letter, records, security=security)
    seen: list[object] = []
    async with OutputTail(address, topics, security=security) as tail:
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:
            seen.extend(record.event for record in await tail.poll(1.0))
    assert seen == letters

    assert secure_kafka.password not in caplog.text


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
async def test_wrong_password_is_refused_quickly_and_clearly(
    secure_kafka: SecureKafka, mechanism: SaslMechanism
) -> None:
    security = secure_kafka.security(mechanism, password="not-the-password")
    address = secure_kafka.sasl_ssl
    settings = _settings(address, security, "denied")
    expected = f"as 'alice' with {mechanism}: SaslAuthenticationFailed"

    async def refused(call: Awaitable[object]) -> str:
        with pytest.raises(BrokerAccessDenied, match=expected) as caught:
            await asyncio.wait_for(call, REFUSAL_BOUND_S)
        return str(caught.value)

    await refused(ensure_topics(address, topic_specs(topic_layout(settings)), security))
    await refused(publish_answers(address, settings.topics.answers, _answers(1), security=security))
    await refused(_tail_once(address, settings.topics, security))
    # The worker's start-up retry loop lets a refusal through instead of retrying it.
    await refused(prepare_topics(settings))


async def _tail_once(address: str, topics: TopicSettings, security: KafkaSecurity) -> None:
    async with OutputTail(address, topics, security=security) as tail:
        await tail.poll(0.1)


async def test_certificate_from_another_ca_is_refused(
    secure_kafka: SecureKafka, tmp_path: Path
) -> None:
    other_ca = tmp_path / "other-ca.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=not the broker's CA",
         "-keyout", str(tmp_path / "other-ca.key"), "-out", str(other_ca)],
        check=True, capture_output=True,
    )  # fmt: skip
    security = secure_kafka.security().model_copy(update={"ssl_cafile": other_ca})
    settings = _settings(secure_kafka.sasl_ssl, security, "badca")
    with pytest.raises(BrokerAccessDenied, match="SSLCertVerificationError"):
        await asyncio.wait_for(
            ensure_topics(secure_kafka.sasl_ssl, topic_specs(topic_layout(settings)), security),
            REFUSAL_BOUND_S,
        )


async def test_restart_keeps_port_and_records(secure_kafka: SecureKafka) -> None:
    """Produced over PLAINTEXT before a restart, read over SASL_SSL/SCRAM after it: the
    records, the ports and the SCRAM users (cluster metadata) all survive."""
    topic = f"restart-{uuid.uuid4().hex[:8]}"
    await ensure_topics(secure_kafka.bootstrap, [TopicSpec(topic, 1, 1)], KafkaSecurity())
    producer = AIOKafkaProducer(bootstrap_servers=secure_kafka.bootstrap, acks="all")
    await producer.start()
    try:
        for index in range(5):
            await producer.send_and_wait(topic, f"record-{index}".encode())
    finally:
        await producer.stop()

    before = secure_kafka.run("status")
    after = secure_kafka.run("restart")
    assert after == before  # same bootstrap, same SASL listeners, same CA

    values = await _read_all(
        secure_kafka.sasl_ssl, secure_kafka.security("SCRAM-SHA-256"), topic, 5
    )
    assert values == [f"record-{index}".encode() for index in range(5)]


async def test_worker_judges_over_sasl_ssl(secure_kafka: SecureKafka, tmp_path: Path) -> None:
    security = secure_kafka.security("SCRAM-SHA-256")
    settings = _settings(
        secure_kafka.sasl_ssl,
        security,
        "secworker",
        judge={"name": "rules"},
        worker={"rebalance_timeout_s": 10.0, "session_timeout_s": 6.0},
    )
    await prepare_topics(settings)
    answers = _answers(4)
    judged: set[str] = set()
    dead: list[DeadLetter] = []
    async with OutputTail(settings.bootstrap_servers, settings.topics, security=security) as tail:
        worker = WorkerProcess(settings, tmp_path / "worker.log").start()
        try:
            await publish_answers(
                settings.bootstrap_servers, settings.topics.answers, answers, security=security
            )
            deadline = time.monotonic() + 90
            while len(judged) + len(dead) < len(answers) and time.monotonic() < deadline:
                assert worker.running, worker.log_tail()
                for record in await tail.poll(1.0):
                    if isinstance(record.event, Verdict):
                        judged.add(record.event.event_id)
                    elif isinstance(record.event, DeadLetter):
                        dead.append(record.event)
        finally:
            worker.stop()
    assert dead == []
    assert judged == {a.event_id for a in answers}, worker.log_tail()
