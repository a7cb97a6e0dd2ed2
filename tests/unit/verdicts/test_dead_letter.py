"""Dead letters: one shape from every loop (reason, error, origin, original key and bytes),
keyed by the original key, carrying the headers handed on, and never failing to come back."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

from streamproc.config import Settings
from streamproc.contracts.events import DeadLetter, DeadLetterReason
from streamproc.verdicts.dead_letter import (
    MessageOrigin,
    Rejection,
    dead_letter_for,
    original_key,
    prepare_dead_letter,
)
from streamproc.verdicts.fit import encode
from streamproc.verdicts.output_topic import OutputTopic
from streamproc.wiring import output_topics

AT = datetime(2026, 1, 1, tzinfo=UTC)
TOPIC = output_topics(Settings.model_construct()).dead_letters
HEADERS = (("traceparent", b"00-abc"),)


def test_dead_letter_keeps_original_bytes_and_position() -> None:
    origin = MessageOrigin(topic="answers", partition=2, offset=41, key=b"conv-9")
    letter = dead_letter_for(Rejection(DeadLetterReason.BAD_JSON, "nope"), origin, b"\x00raw bytes")
    assert base64.b64decode(letter.value_b64) == b"\x00raw bytes"
    assert letter.key_b64 is not None and base64.b64decode(letter.key_b64) == b"conv-9"
    assert (letter.topic, letter.partition, letter.offset) == ("answers", 2, 41)
    assert letter.reason is DeadLetterReason.BAD_JSON
    assert original_key(letter) == b"conv-9"


def test_dead_letter_of_a_hostile_error_serialises() -> None:
    origin = MessageOrigin(topic="answers", partition=0, offset=1, key=None)
    letter = dead_letter_for(Rejection(DeadLetterReason.BAD_JSON, "bad \ud800"), origin, b"x")
    assert b"bad" in letter.model_dump_json().encode()
    assert original_key(letter) is None


def test_the_record_is_keyed_by_the_original_key_and_carries_the_headers() -> None:
    origin = MessageOrigin("outcomes", 3, 12, b"bot")
    rejection = Rejection(DeadLetterReason.SCHEMA_VIOLATION, "bad outcome")
    prepared = prepare_dead_letter(TOPIC, rejection, origin, b"{}", headers=HEADERS, now=AT)
    record = prepared.record
    assert (record.topic, record.key, record.headers) == (TOPIC.name, b"bot", HEADERS)
    assert record.partition is None  # by key, as the original
    assert prepared.model == dead_letter_for(rejection, origin, b"{}", AT)
    assert record.value == encode(prepared.model)


def test_an_unreadable_record_has_neither_key_nor_value() -> None:
    origin = MessageOrigin("answers", 0, 5, None)
    rejection = Rejection(DeadLetterReason.UNREADABLE_RECORD, "corrupt batch")
    record = prepare_dead_letter(TOPIC, rejection, origin, None, now=AT).record
    assert record.key is None
    document = json.loads(record.value or b"")
    assert (document["value_b64"], document["key_b64"], document["offset"]) == ("", None, 5)


def test_a_dead_letter_over_its_topic_is_shrunk_not_refused() -> None:
    small = OutputTopic(TOPIC.name, 64 * 1024, TOPIC.key, TOPIC.fit)
    origin = MessageOrigin("answers", 0, 1, b"k")
    rejection = Rejection(DeadLetterReason.OVERSIZED, "too big")
    prepared = prepare_dead_letter(small, rejection, origin, b"x" * 100_000, now=AT)
    assert prepared.model.value_b64 == "" and "original value left out" in prepared.model.error
    assert prepared.record.key == b"k"


def test_when_even_the_dead_letter_fails_a_minimal_ascii_one_comes_back() -> None:
    origin = MessageOrigin("answers-\ud800", 3, 9, b"k\xff")
    rejection = Rejection(DeadLetterReason.BAD_JSON, "bad \ud800")
    prepared = prepare_dead_letter(TOPIC, rejection, origin, b"\xff", headers=HEADERS, now=AT)
    record = prepared.record
    assert (record.topic, record.key, record.headers) == (TOPIC.name, b"k\xff", HEADERS)
    assert record.value is not None
    document = json.loads(record.value.decode("ascii"))
    assert document["topic"] == "answers-\\ud800" and document["offset"] == 9
    assert "rebuilt in ASCII after PydanticSerializationError" in document["error"]
    assert DeadLetter.model_validate(document).received_at == AT
    assert prepared.model.reason is DeadLetterReason.BAD_JSON
