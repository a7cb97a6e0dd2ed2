"""Our attribute names are the ones the installed semantic conventions publish (the
GenAI ones are at Development status, so a rename upstream must show up here)."""

from __future__ import annotations

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes, messaging_attributes
from opentelemetry.semconv.attributes import error_attributes, service_attributes

from streamproc.telemetry import semconv


def test_names_match_the_published_conventions() -> None:
    published = {
        semconv.MESSAGING_SYSTEM: messaging_attributes.MESSAGING_SYSTEM,
        semconv.MESSAGING_SYSTEM_KAFKA: messaging_attributes.MessagingSystemValues.KAFKA.value,
        semconv.MESSAGING_DESTINATION_NAME: messaging_attributes.MESSAGING_DESTINATION_NAME,
        semconv.MESSAGING_CONSUMER_GROUP_NAME: messaging_attributes.MESSAGING_CONSUMER_GROUP_NAME,
        semconv.MESSAGING_DESTINATION_PARTITION_ID: (
            messaging_attributes.MESSAGING_DESTINATION_PARTITION_ID
        ),
        semconv.MESSAGING_KAFKA_OFFSET: messaging_attributes.MESSAGING_KAFKA_OFFSET,
        semconv.MESSAGING_KAFKA_MESSAGE_KEY: messaging_attributes.MESSAGING_KAFKA_MESSAGE_KEY,
        semconv.MESSAGING_BATCH_MESSAGE_COUNT: messaging_attributes.MESSAGING_BATCH_MESSAGE_COUNT,
        semconv.MESSAGING_OPERATION_TYPE: messaging_attributes.MESSAGING_OPERATION_TYPE,
        semconv.MESSAGING_OPERATION_NAME: messaging_attributes.MESSAGING_OPERATION_NAME,
        semconv.OPERATION_PROCESS: messaging_attributes.MessagingOperationTypeValues.PROCESS.value,
        semconv.GEN_AI_EVALUATION_NAME: gen_ai_attributes.GEN_AI_EVALUATION_NAME,
        semconv.GEN_AI_EVALUATION_SCORE_VALUE: gen_ai_attributes.GEN_AI_EVALUATION_SCORE_VALUE,
        semconv.GEN_AI_EVALUATION_SCORE_LABEL: gen_ai_attributes.GEN_AI_EVALUATION_SCORE_LABEL,
        semconv.GEN_AI_EVALUATION_EXPLANATION: gen_ai_attributes.GEN_AI_EVALUATION_EXPLANATION,
        semconv.GEN_AI_RESPONSE_ID: gen_ai_attributes.GEN_AI_RESPONSE_ID,
        semconv.SERVICE_NAME: service_attributes.SERVICE_NAME,
        semconv.SERVICE_VERSION: service_attributes.SERVICE_VERSION,
        semconv.ERROR_TYPE: error_attributes.ERROR_TYPE,
    }
    assert {ours: ours for ours in published} == published


def test_our_own_names_are_namespaced_and_distinct() -> None:
    ours = [getattr(semconv, name) for name in semconv.__all__ if name.startswith("STREAMPROC_")]
    assert all(name.startswith("streamproc.") for name in ours)
    assert len(set(ours)) == len(ours)
