"""Every way an input can be bad ends as a dead letter with the reason and the bytes."""

from __future__ import annotations

import base64
import json

from streamproc.events import AnswerEvent, DeadLetterReason
from streamproc.stream.intake import MessageOrigin, Rejection, dead_letter_for, parse_answer

VALID = {
    "event_id": "e1",
    "answer_id": "a1",
    "conversation_id": "c1",
    "tenant": "t",
    "assistant_id": "bot",
    "model": "llm-1",
    "occurred_at": "2026-01-01T00:00:00Z",
    "answer": "Yes.",
    "evidence": [{"id": "D1", "text": "Yes.", "kind": "passage"}],
    "a_field_from_the_future": 1,
}


def test_valid_event_parses_and_ignores_unknown_fields() -> None:
    parsed = parse_answer(json.dumps(VALID).encode(), max_bytes=10_000)
    assert isinstance(parsed, AnswerEvent)
    assert parsed.evidence[0].id == "D1"


def test_bad_json_is_rejected_with_the_parser_message() -> None:
    parsed = parse_answer(b'{"event_id": ', max_bytes=10_000)
    assert isinstance(parsed, Rejection)
    assert parsed.reason is DeadLetterReason.BAD_JSON
    assert "not valid JSON" in parsed.error


def test_non_utf8_bytes_are_bad_json() -> None:
    parsed = parse_answer(b"\xff\xfe\x00", max_bytes=10_000)
    assert isinstance(parsed, Rejection) and parsed.reason is DeadLetterReason.BAD_JSON


def test_schema_violation_names_the_fields() -> None:
    broken = {**VALID, "occurred_at": "yesterday"}
    del broken["tenant"]
    parsed = parse_answer(json.dumps(broken).encode(), max_bytes=10_000)
    assert isinstance(parsed, Rejection)
    assert parsed.reason is DeadLetterReason.SCHEMA_VIOLATION
    assert "tenant" in parsed.error and "occurred_at" in parsed.error


def test_naive_event_time_is_a_schema_violation() -> None:
    parsed = parse_answer(
        json.dumps({**VALID, "occurred_at": "2026-01-01T00:00:00"}).encode(), max_bytes=10_000
    )
    assert isinstance(parsed, Rejection) and parsed.reason is DeadLetterReason.SCHEMA_VIOLATION


def test_json_that_is_not_an_object_is_a_schema_violation() -> None:
    parsed = parse_answer(b"[1, 2]", max_bytes=10_000)
    assert isinstance(parsed, Rejection) and parsed.reason is DeadLetterReason.SCHEMA_VIOLATION


def test_oversized_is_rejected_before_parsing() -> None:
    raw = json.dumps({**VALID, "answer": "x" * 5000}).encode()
    parsed = parse_answer(raw, max_bytes=1000)
    assert isinstance(parsed, Rejection) and parsed.reason is DeadLetterReason.OVERSIZED
    assert str(len(raw)) in parsed.error


def test_tombstone_is_rejected() -> None:
    parsed = parse_answer(None, max_bytes=1000)
    assert isinstance(parsed, Rejection)


def test_dead_letter_keeps_original_bytes_and_position() -> None:
    origin = MessageOrigin(topic="answers", partition=2, offset=41, key=b"conv-9")
    letter = dead_letter_for(Rejection(DeadLetterReason.BAD_JSON, "nope"), origin, b"\x00raw bytes")
    assert base64.b64decode(letter.value_b64) == b"\x00raw bytes"
    assert letter.key_b64 is not None and base64.b64decode(letter.key_b64) == b"conv-9"
    assert (letter.topic, letter.partition, letter.offset) == ("answers", 2, 41)
    assert letter.reason is DeadLetterReason.BAD_JSON
