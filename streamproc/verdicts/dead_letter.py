"""Dead letters: why an input was not handled, with its original bytes and position.

Every loop that sets an input aside (the judging stage for a bad or unjudgeable answer,
the judging loop for a record the client cannot read, the window loop for an outcome it
cannot count) builds its dead letter here, so a replay tool reads one shape from every
loop: the reason, the error, the source topic, partition and offset, the original key
and value (base64), the time received; the record keyed by the original key (a replay
lands where the original would have), carrying the headers the caller hands on.

:func:`prepare_dead_letter` never raises: a dead letter is the last resort. If even the
pydantic model cannot be built or serialised (say, the error text holds a lone
surrogate), a minimal ASCII one is built without pydantic.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from streamproc.contracts.events import DeadLetter, DeadLetterReason
from streamproc.verdicts.fit import TooLarge
from streamproc.verdicts.output_topic import OutHeaders, OutputTopic, Prepared

__all__ = [
    "MessageOrigin",
    "Rejection",
    "dead_letter_for",
    "original_key",
    "prepare_dead_letter",
]

_MAX_ERROR_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why an input could not be handled."""

    reason: DeadLetterReason
    error: str


@dataclass(frozen=True, slots=True)
class MessageOrigin:
    """Where a message came from, so a dead letter can point back at it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None


def dead_letter_for(
    rejection: Rejection, origin: MessageOrigin, value: bytes | None, now: datetime | None = None
) -> DeadLetter:
    """The dead letter for a rejected message, carrying the original bytes."""
    return DeadLetter(
        reason=rejection.reason,
        error=_encodable(rejection.error[:_MAX_ERROR_CHARS]),
        topic=origin.topic,
        partition=origin.partition,
        offset=origin.offset,
        key_b64=_b64(origin.key),
        value_b64=_b64(value) or "",
        received_at=now or datetime.now(UTC),
    )


def original_key(letter: DeadLetter) -> bytes | None:
    """The dead-letter topic's key: the original message's key."""
    return None if letter.key_b64 is None else base64.b64decode(letter.key_b64)


def prepare_dead_letter(
    topic: OutputTopic[DeadLetter],
    rejection: Rejection,
    origin: MessageOrigin,
    value: bytes | None,
    *,
    headers: OutHeaders = (),
    now: datetime | None = None,
) -> Prepared[DeadLetter]:
    """The dead letter of the message at ``origin`` (``value``: its bytes) and its record
    on ``topic``, shrunk to fit; never raises (see the module docstring)."""
    received_at = now or datetime.now(UTC)
    try:
        prepared = topic.prepare(
            dead_letter_for(rejection, origin, value, received_at), headers=headers
        )
        if isinstance(prepared, TooLarge):  # fit_dead_letter always fits; a topic may not
            raise ValueError(prepared.detail)
        return prepared
    except Exception as exc:  # noqa: BLE001 - the fallback below cannot fail
        return _minimal(topic, rejection, origin, value, headers, received_at, exc)


def _minimal(
    topic: OutputTopic[DeadLetter],
    rejection: Rejection,
    origin: MessageOrigin,
    value: bytes | None,
    headers: OutHeaders,
    received_at: datetime,
    failure: Exception,
) -> Prepared[DeadLetter]:
    raw = value or b""
    error = _ascii(rejection.error)[:_MAX_ERROR_CHARS] + (
        f" [dead letter rebuilt in ASCII after {type(failure).__name__}]"
    )
    value_b64 = base64.b64encode(raw).decode("ascii")
    key_b64 = None if origin.key is None else base64.b64encode(origin.key).decode("ascii")
    if 4 * (len(raw) + len(origin.key or b"")) // 3 + 8192 > topic.max_bytes:
        value_b64 = ""
        error += f" [original value of {len(raw)} bytes left out: too large]"
    letter = DeadLetter.model_construct(  # no validation, so it cannot fail
        reason=rejection.reason,
        error=error,
        topic=_ascii(origin.topic),
        partition=int(origin.partition),
        offset=int(origin.offset),
        key_b64=key_b64,
        value_b64=value_b64,
        received_at=received_at,
    )
    document = {
        "schema_version": 1,
        "reason": rejection.reason.value,
        "error": letter.error,
        "topic": letter.topic,
        "partition": letter.partition,
        "offset": letter.offset,
        "key_b64": key_b64,
        "value_b64": value_b64,
        "received_at": received_at.isoformat(),
    }
    encoded = json.dumps(document, ensure_ascii=True).encode("ascii")
    return Prepared(letter, topic.forward(origin.key, encoded, headers=headers))


def _encodable(text: str) -> str:
    """``text`` with anything UTF-8 cannot carry (lone surrogates) written as escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _ascii(text: str) -> str:
    return text.encode("ascii", "backslashreplace").decode("ascii")


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")
