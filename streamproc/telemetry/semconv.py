"""Every OpenTelemetry name streamproc emits, in one place.

Three families:

- **Messaging** (OpenTelemetry messaging and Kafka conventions): the attributes of the
  micro-batch ``process`` span, of its links to each message and of each answer's span.
- **GenAI evaluation**: the ``gen_ai.evaluation.result`` log record and its attributes.
  These conventions are at *Development* status and moved out of the main repository
  into ``open-telemetry/semantic-conventions-genai``; names may still change there, which
  is why nothing outside this module spells them.
- **Ours** (``streamproc.*``): the facts of a judgement that no convention covers.

The strings are written out rather than imported from
``opentelemetry.semconv._incubating`` (a private module whose GenAI names are already
marked deprecated there); a unit test checks them against the installed package.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ANSWER_SPAN",
    "BATCH_OPERATION",
    "CLAIM_EVALUATION",
    "ERROR_TYPE",
    "EVALUATION_RESULT_EVENT",
    "GEN_AI_EVALUATION_EXPLANATION",
    "GEN_AI_EVALUATION_NAME",
    "GEN_AI_EVALUATION_SCORE_LABEL",
    "GEN_AI_EVALUATION_SCORE_VALUE",
    "GEN_AI_RESPONSE_ID",
    "GROUNDEDNESS_EVALUATION",
    "INSTRUMENTATION_SCOPE",
    "MESSAGING_BATCH_MESSAGE_COUNT",
    "MESSAGING_CONSUMER_GROUP_NAME",
    "MESSAGING_DESTINATION_NAME",
    "MESSAGING_DESTINATION_PARTITION_ID",
    "MESSAGING_KAFKA_MESSAGE_KEY",
    "MESSAGING_KAFKA_OFFSET",
    "MESSAGING_OPERATION_NAME",
    "MESSAGING_OPERATION_TYPE",
    "MESSAGING_SYSTEM",
    "MESSAGING_SYSTEM_KAFKA",
    "OPERATION_PROCESS",
    "SERVICE_INSTANCE_ID",
    "SERVICE_NAME",
    "SERVICE_VERSION",
    "STAGE_SPAN_PREFIX",
    "STREAMPROC_ACTION",
    "STREAMPROC_ANSWER_ID",
    "STREAMPROC_ASSISTANT_ID",
    "STREAMPROC_CLAIMS_CHECKED",
    "STREAMPROC_CLAIMS_CONTRADICTED",
    "STREAMPROC_CLAIMS_UNSUPPORTED",
    "STREAMPROC_CLAIM_INDEX",
    "STREAMPROC_FAITHFULNESS",
    "STREAMPROC_HALLUCINATED",
    "STREAMPROC_MODEL",
    "STREAMPROC_TENANT",
    "WINDOW_CLOSE_SPAN",
]

# --- resource -----------------------------------------------------------------------------

SERVICE_NAME: Final = "service.name"
SERVICE_VERSION: Final = "service.version"
SERVICE_INSTANCE_ID: Final = "service.instance.id"

INSTRUMENTATION_SCOPE: Final = "streamproc"
"""Name of our tracer and logger (the instrumentation scope)."""

# --- messaging (stable names of the messaging conventions, Kafka flavour) ------------------

MESSAGING_SYSTEM: Final = "messaging.system"
MESSAGING_SYSTEM_KAFKA: Final = "kafka"
MESSAGING_DESTINATION_NAME: Final = "messaging.destination.name"
MESSAGING_CONSUMER_GROUP_NAME: Final = "messaging.consumer.group.name"
MESSAGING_DESTINATION_PARTITION_ID: Final = "messaging.destination.partition.id"
MESSAGING_KAFKA_OFFSET: Final = "messaging.kafka.offset"
MESSAGING_KAFKA_MESSAGE_KEY: Final = "messaging.kafka.message.key"
MESSAGING_BATCH_MESSAGE_COUNT: Final = "messaging.batch.message_count"
MESSAGING_OPERATION_TYPE: Final = "messaging.operation.type"
MESSAGING_OPERATION_NAME: Final = "messaging.operation.name"
OPERATION_PROCESS: Final = "process"
"""Value of both operation attributes: a consumer processing messages."""

ERROR_TYPE: Final = "error.type"

# --- span names ---------------------------------------------------------------------------

BATCH_OPERATION: Final = OPERATION_PROCESS
"""The batch span is named ``"process <topic>"``, as the messaging conventions ask."""
ANSWER_SPAN: Final = "groundedness.check"
WINDOW_CLOSE_SPAN: Final = "groundedness.windows.close"
"""The closing of windows whose aggregates one transaction publishes."""
"""One answer's span: the child of the producer's ``traceparent``."""
STAGE_SPAN_PREFIX: Final = "groundedness."
"""Stage spans are ``groundedness.<stage>`` (validate, judge, fit, publish, ...)."""

# --- GenAI evaluation (Development status, semantic-conventions-genai) ---------------------

EVALUATION_RESULT_EVENT: Final = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"

GROUNDEDNESS_EVALUATION: Final = "groundedness"
"""``gen_ai.evaluation.name`` of the answer-level record (score: faithfulness, label:
the action)."""
CLAIM_EVALUATION: Final = "groundedness.claim"
"""``gen_ai.evaluation.name`` of a claim-level record (score: the claim's support score,
label: its verdict)."""

# --- ours ---------------------------------------------------------------------------------

STREAMPROC_ANSWER_ID: Final = "streamproc.answer.id"
STREAMPROC_ASSISTANT_ID: Final = "streamproc.assistant.id"
STREAMPROC_TENANT: Final = "streamproc.tenant"
STREAMPROC_MODEL: Final = "streamproc.model"
STREAMPROC_ACTION: Final = "streamproc.action"
STREAMPROC_HALLUCINATED: Final = "streamproc.hallucinated"
STREAMPROC_FAITHFULNESS: Final = "streamproc.faithfulness"
STREAMPROC_CLAIMS_CHECKED: Final = "streamproc.claims.checked"
STREAMPROC_CLAIMS_CONTRADICTED: Final = "streamproc.claims.contradicted"
STREAMPROC_CLAIMS_UNSUPPORTED: Final = "streamproc.claims.unsupported"
STREAMPROC_CLAIM_INDEX: Final = "streamproc.claim.index"
