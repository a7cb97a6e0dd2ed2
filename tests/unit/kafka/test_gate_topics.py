"""The gate's topics, created with the others when the Kafka request path is on: the
requests topic and the default reply topic, short-lived, replies as large as a verdict."""

from __future__ import annotations

from streamproc.config import Settings
from streamproc.kafka.topics import gate_topic_specs, topic_specs
from streamproc.wiring import topic_layout


def test_the_requests_and_default_reply_topics_are_created_with_the_others() -> None:
    settings = Settings(
        topics={"partitions": 4, "output_max_message_bytes": 2 * 1024 * 1024},
        gate={"requests_topic": "team.gate-requests", "replies_topic": "team.gate-replies"},
    )
    requests, replies = gate_topic_specs(topic_layout(settings))
    assert (requests.name, replies.name) == ("team.gate-requests", "team.gate-replies")
    assert {requests.partitions, replies.partitions} == {4}
    hour_ms = str(3600 * 1000)
    assert requests.config == {"retention.ms": hour_ms}
    assert replies.config == {"retention.ms": hour_ms, "max.message.bytes": str(2 * 1024 * 1024)}
    created = {spec.name for spec in topic_specs(topic_layout(settings))}
    assert {"team.gate-requests", "team.gate-replies"} <= created


def test_without_the_kafka_request_path_the_gate_topics_are_not_created() -> None:
    created = {
        spec.name for spec in topic_specs(topic_layout(Settings(gate={"kafka_requests": False})))
    }
    assert Settings().gate.replies_topic not in created
    assert Settings().gate.requests_topic not in created
