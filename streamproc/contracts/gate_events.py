"""The inline gate's contract: an answer in, a decision back within the caller's budget.

- Request (HTTP ``POST /v1/check``, or Kafka topic ``gate.requests_topic``): an
  :class:`~streamproc.contracts.events.AnswerEvent` exactly as on the answers topic. The budget is
  the ``X-Budget-Ms`` header (HTTP) or the ``x-budget-ms`` record header (Kafka); the
  caller's ``traceparent`` is continued. On Kafka the request also carries the
  ``reply-topic`` and ``correlation-id`` headers, and the reply goes to that topic with the
  same ``correlation-id`` header.
- Reply: :class:`GateReply` - the decision, whether it was verified, the answer text ready
  to send, the verdict (same schema as the verdicts topic) and the decision latency.
- Error (HTTP 400/401/403/413/415/503): :class:`GateError`, one line of JSON.

Like :mod:`streamproc.contracts.events`, these models are the source of the generated schema files
(JSON Schema, the OpenAPI document) and import nothing of streamproc but the event contract.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat

from streamproc.contracts.events import SCHEMA_VERSION, Action, UnverifiedReason, Verdict

__all__ = [
    "AUTHORIZATION_HEADER",
    "BUDGET_HEADER",
    "CORRELATION_ID_HEADER",
    "REPLY_TOPIC_HEADER",
    "FailurePolicy",
    "GateError",
    "GateErrorCode",
    "GateReply",
]

BUDGET_HEADER: Final = "x-budget-ms"
"""The caller's latency budget in milliseconds (HTTP: ``X-Budget-Ms``; Kafka: header)."""
REPLY_TOPIC_HEADER: Final = "reply-topic"
"""Kafka requests: the topic the reply goes to."""
CORRELATION_ID_HEADER: Final = "correlation-id"
"""Kafka requests and replies: the caller's id matching a reply to its request."""
AUTHORIZATION_HEADER: Final = "authorization"
"""Kafka requests: ``Bearer <token>``, a caller's token from the gate's tokens file
(header names are matched in lower case)."""

FailurePolicy = Literal["fail-open", "fail-closed"]
"""What the gate decides when it cannot check an answer in time (budget, overload, judge
error): fail-open passes it (``verified: false``), fail-closed withholds it."""

GateErrorCode = Literal[
    "bad_json",
    "schema_violation",
    "oversized",
    "event_time_out_of_range",
    "bad_budget",
    "bad_request",
    "unauthorized",
    "forbidden",
    "unsupported_media_type",
    "not_ready",
    "busy",
    "caller_busy",
]


class _GateModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GateReply(_GateModel):
    """The gate's answer to one request (HTTP 200 body; Kafka reply value)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    decision: Action = Field(
        description="pass: send answer_text; trim: send answer_text (refuted sentences "
        "removed); withhold: send a safe response instead."
    )
    verified: bool = Field(
        description="True only when every claim that needed checking was checked in time. "
        "False: the decision came (in part) from the failure policy."
    )
    reason: UnverifiedReason | None = Field(
        default=None, description="Why not verified (None when verified)."
    )
    answer_text: str = Field(
        description="The answer ready to send: the whole answer on pass, trimmed sentences "
        "removed on trim, empty on withhold."
    )
    verdict: Verdict = Field(description="The verdict, as published on the verdicts topic.")
    latency_ms: NonNegativeFloat = Field(description="From the request's arrival to this decision.")
    budget_ms: NonNegativeFloat = Field(description="The budget the decision was made within.")
    policy: FailurePolicy = Field(description="The failure policy of the answer's tenant.")


class GateError(_GateModel):
    """A refused request: a code and one line saying what was wrong."""

    error: GateErrorCode
    detail: str = Field(max_length=2000)
