"""Turning raw input bytes into an :class:`AnswerEvent`, or a dead letter saying why not.

Pure functions, so every way an event can be bad is unit-tested without a broker.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import ValidationError

from streamproc.events import AnswerEvent, DeadLetter, DeadLetterReason

__all__ = ["MessageOrigin", "Rejection", "dead_letter_for", "parse_answer"]

_MAX_ERROR_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why an input could not be judged."""

    reason: DeadLetterReason
    error: str


@dataclass(frozen=True, slots=True)
class MessageOrigin:
    """Where a message came from, so a dead letter can point back at it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None


def parse_answer(raw: bytes | None, max_bytes: int) -> AnswerEvent | Rejection:
    """Validate one input message; never raises."""
    if raw is None:
        return Rejection(DeadLetterReason.BAD_JSON, "empty message (tombstone)")
    if len(raw) > max_bytes:
        return Rejection(
            DeadLetterReason.OVERSIZED, f"{len(raw)} bytes is over the limit of {max_bytes}"
        )
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return Rejection(DeadLetterReason.BAD_JSON, f"not valid JSON: {exc}")
    if not isinstance(document, dict):
        return Rejection(
            DeadLetterReason.SCHEMA_VIOLATION,
            f"expected a JSON object, got {type(document).__name__}",
        )
    try:
        return AnswerEvent.model_validate(document)
    except ValidationError as exc:
        return Rejection(DeadLetterReason.SCHEMA_VIOLATION, _summarise(exc))


def dead_letter_for(
    rejection: Rejection, origin: MessageOrigin, value: bytes | None, now: datetime | None = None
) -> DeadLetter:
    """The dead letter for a rejected message, carrying the original bytes."""
    return DeadLetter(
        reason=rejection.reason,
        error=rejection.error[:_MAX_ERROR_CHARS],
        topic=origin.topic,
        partition=origin.partition,
        offset=origin.offset,
        key_b64=_b64(origin.key),
        value_b64=_b64(value) or "",
        received_at=now or datetime.now(UTC),
    )


def _summarise(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False, include_input=False):
        location = ".".join(str(item) for item in error["loc"]) or "<root>"
        parts.append(f"{location}: {error['msg']}")
    return f"{exc.error_count()} schema error(s): " + "; ".join(parts)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")
