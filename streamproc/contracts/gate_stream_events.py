"""The streaming gate's contract: an answer checked sentence by sentence while it streams.

Over a WebSocket (``GET /v1/stream``, the same bearer token as ``/v1/check``), JSON text
messages:

- client to gate: one :class:`StreamStart` (the answer event, its ``answer`` empty or a
  first piece, and the budget), any number of :class:`StreamDelta`, one :class:`StreamEnd`;
- gate to client: one :class:`StreamSentence` per sentence as soon as it is complete and
  checked, then one :class:`StreamFinal` (the fields of ``/v1/check``'s reply);
- a refusal: one :class:`StreamError` (the codes of ``/v1/check``), then a close with
  the code :data:`STREAM_CLOSE_CODES` gives it.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt

from streamproc.contracts.events import Action, ClaimVerdict, UnverifiedReason, Verdict
from streamproc.contracts.gate_events import FailurePolicy, GateErrorCode

__all__ = [
    "STREAM_CLOSE_CODES",
    "STREAM_ENDED_IDLE",
    "STREAM_ENDED_TOO_LONG",
    "STREAM_PATH",
    "SentenceDecision",
    "StreamClientMessage",
    "StreamDelta",
    "StreamEnd",
    "StreamError",
    "StreamErrorCode",
    "StreamFinal",
    "StreamSentence",
    "StreamStart",
]

STREAM_PATH: Final = "/v1/stream"

StreamErrorCode = GateErrorCode | Literal["protocol"]
"""``/v1/check``'s codes, and the stream's own: a message out of order (a delta before
the start, a second start)."""

STREAM_ENDED_IDLE: Final = 4000
"""Close code: nothing arrived for ``gate.stream_idle_s``; the final was sent first."""
STREAM_ENDED_TOO_LONG: Final = 4001
"""Close code: the stream was open longer than ``gate.stream_max_s``; the final was sent."""

STREAM_CLOSE_CODES: Final[dict[str, int]] = {
    "unauthorized": 1008,
    "forbidden": 1008,
    "bad_json": 1007,
    "schema_violation": 1007,
    "event_time_out_of_range": 1007,
    "bad_budget": 1007,
    "bad_request": 1007,
    "unsupported_media_type": 1003,
    "protocol": 1002,
    "oversized": 1009,
    "not_ready": 1013,
    "busy": 1013,
    "caller_busy": 1013,
}
"""The close code after each error (RFC 6455's). A stream closed by the gate for being
idle or too long gets its final first, then :data:`STREAM_ENDED_IDLE` or
:data:`STREAM_ENDED_TOO_LONG`; a normal end, 1000 after the final."""

SentenceDecision = Literal["release", "hold"]


class _StreamModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StreamStart(_StreamModel):
    """The first message: the answer event and the budget of each check."""

    type: Literal["start"]
    event: dict[str, Any] = Field(
        description="An answer event (answer-event.schema.json) whose answer is empty or "
        "the answer's first piece; checked with the same schema and intake limits as "
        "/v1/check, the whole answer included."
    )
    budget_ms: float | None = Field(
        default=None,
        description="Each check's budget in milliseconds, from the moment its sentence is "
        "complete (default gate.default_budget_ms; cut to gate.max_budget_ms).",
    )


class StreamDelta(_StreamModel):
    """The next piece of the answer, of any size down to one character."""

    type: Literal["delta"]
    text: str


class StreamEnd(_StreamModel):
    """The answer is whole."""

    type: Literal["end"]


StreamClientMessage = Annotated[StreamStart | StreamDelta | StreamEnd, Field(discriminator="type")]
"""What a client sends."""


class StreamSentence(_StreamModel):
    """One sentence, once it is complete and checked."""

    type: Literal["sentence"] = "sentence"
    index: NonNegativeInt = Field(description="The sentence's place in the answer, from 0.")
    text: str = Field(description="The sentence as it stands in the answer.")
    decision: SentenceDecision = Field(
        description="release: show it; hold: do not (refuted, or not checked in time "
        "under fail-closed)."
    )
    verified: bool = Field(
        description="Every claim of the sentence that needed checking was checked in time."
    )
    reason: UnverifiedReason | None = Field(default=None, description="Why not verified.")
    claims: list[ClaimVerdict] = Field(description="The sentence's claims and their verdicts.")
    latency_ms: NonNegativeFloat = Field(
        description="From the sentence's completion (its next sentence's first word, or "
        "the end) to this message."
    )


class StreamFinal(_StreamModel):
    """The whole answer's decision: what ``/v1/check`` replies for the whole answer."""

    type: Literal["final"] = "final"
    decision: Action
    verified: bool
    reason: UnverifiedReason | None = None
    answer_text: str = Field(
        description="What the caller may show: the answer as /v1/check returns it (pass: "
        "whole; trim: refuted sentences removed; withhold: empty)."
    )
    verdict: Verdict
    latency_ms: NonNegativeFloat = Field(description="From the end (or the close) to this.")
    budget_ms: NonNegativeFloat
    policy: FailurePolicy
    withdrawn: list[NonNegativeInt] = Field(
        default_factory=list,
        description="Sentences released earlier that the whole answer's decision does not "
        "keep (an answer-level withhold, or a trim): take them back.",
    )


class StreamError(_StreamModel):
    """A refusal; the connection closes next with the code in STREAM_CLOSE_CODES."""

    type: Literal["error"] = "error"
    error: StreamErrorCode
    detail: str = Field(max_length=2000)
