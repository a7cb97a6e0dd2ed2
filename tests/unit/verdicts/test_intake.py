"""Every way an input can be bad ends as a dead letter with the reason and the bytes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime

from streamproc.contracts.events import MAX_INPUT_ITEMS, AnswerEvent, DeadLetterReason
from streamproc.verdicts.dead_letter import Rejection
from streamproc.verdicts.intake import MAX_DEPTH, parse_answer

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


# ------------------------------------------------------------------- hostile input


def _rejected(
    raw: bytes | None,
    *,
    now: datetime | None = None,
    max_future_s: float | None = None,
    max_past_s: float | None = None,
) -> Rejection:
    parsed = parse_answer(raw, 1_000_000, now=now, max_future_s=max_future_s, max_past_s=max_past_s)
    assert isinstance(parsed, Rejection), parsed
    return parsed


def _event(**changes: object) -> bytes:
    return json.dumps({**VALID, **changes}).encode()


def test_deep_nesting_is_bad_json_not_a_recursion_error() -> None:
    rejection = _rejected(b"[" * 100_000)
    assert rejection.reason is DeadLetterReason.BAD_JSON
    assert "nested too deeply" in rejection.error


def test_nesting_the_parser_survives_is_capped_by_depth_with_its_path() -> None:
    fields: object = {"leaf": 1}
    for _ in range(MAX_DEPTH):
        fields = {"x": fields}
    raw = _event(evidence=[{"id": "D1", "text": "t", "fields": fields}])
    rejection = _rejected(raw)
    assert rejection.reason is DeadLetterReason.SCHEMA_VIOLATION
    assert rejection.error.startswith("evidence.0.fields.x")
    assert f"deeper than {MAX_DEPTH}" in rejection.error


def test_lone_surrogate_is_rejected_naming_the_field() -> None:
    rejection = _rejected(_event(evidence=[{"id": "D1", "text": "ok \ud800"}]))
    assert rejection.reason is DeadLetterReason.SCHEMA_VIOLATION
    assert rejection.error == "evidence.0.text: lone surrogate U+D800 at character 3"


def test_lone_surrogate_in_a_key_is_rejected_and_the_error_stays_encodable() -> None:
    rejection = _rejected(_event(evidence=[{"id": "D1", "text": "t", "fields": {"\udfff": 1}}]))
    assert rejection.reason is DeadLetterReason.SCHEMA_VIOLATION
    assert "(the key): lone surrogate U+DFFF" in rejection.error
    rejection.error.encode("utf-8")  # the dead letter's error must serialise


def test_surrogate_pairs_and_escaped_backslashes_are_fine() -> None:
    raw = json.dumps({**VALID, "answer": "Yes 😀 \\ud800."}, ensure_ascii=True).encode()
    parsed = parse_answer(raw, 10_000)
    assert isinstance(parsed, AnswerEvent)
    assert parsed.answer == "Yes 😀 \\ud800."


def test_nul_character_is_rejected_naming_the_field() -> None:
    rejection = _rejected(_event(answer="Yes\u0000"))
    assert rejection.reason is DeadLetterReason.SCHEMA_VIOLATION
    assert rejection.error == "answer: U+0000 (NUL) at character 3"


def test_raw_control_character_in_a_string_is_bad_json() -> None:
    rejection = _rejected(_event(answer="PLACEHOLDER").replace(b"PLACEHOLDER", b"a\x01b"))
    assert rejection.reason is DeadLetterReason.BAD_JSON
    assert "Invalid control character" in rejection.error


def test_nan_and_infinity_are_bad_json() -> None:
    for constant in ("NaN", "Infinity", "-Infinity"):
        raw = _event(answer="x").replace(b'"answer": "x"', f'"n": {constant}'.encode())
        rejection = _rejected(raw)
        assert rejection.reason is DeadLetterReason.BAD_JSON
        assert f"{constant} is not a JSON number" in rejection.error


def test_numbers_beyond_a_double_are_schema_violations() -> None:
    for number in ("1e999", "-1e400", "9" * 400):
        raw = _event(answer="x").replace(b'"answer": "x"', f'"n": {number}'.encode())
        rejection = _rejected(raw)
        assert rejection.reason is DeadLetterReason.SCHEMA_VIOLATION
        assert "out of the range of a double" in rejection.error


def test_non_finite_logprob_given_as_a_string_is_a_schema_violation() -> None:
    rejection = _rejected(_event(tokens=[{"text": "Yes", "logprob": "-inf", "offset": 0}]))
    assert rejection.reason is DeadLetterReason.SCHEMA_VIOLATION
    assert "tokens.0.logprob" in rejection.error


def test_duplicate_keys_are_a_schema_violation() -> None:
    raw = _event(answer="Yes.").replace(b'"answer": "Yes."', b'"answer": "Yes.", "answer": "No."')
    rejection = _rejected(raw)
    assert rejection.reason is DeadLetterReason.SCHEMA_VIOLATION
    assert rejection.error == "duplicate key 'answer' in one JSON object"


def test_wrong_types_name_every_field() -> None:
    rejection = _rejected(_event(answer=["Yes."], evidence={"id": "D1"}, tenant=7))
    assert rejection.reason is DeadLetterReason.SCHEMA_VIOLATION
    assert all(name in rejection.error for name in ("answer", "evidence", "tenant"))


def test_giant_array_is_one_short_schema_error() -> None:
    for field in ("evidence", "tokens"):
        rejection = _rejected(_event(**{field: [0] * (MAX_INPUT_ITEMS * 20)}))
        assert rejection.reason is DeadLetterReason.SCHEMA_VIOLATION
        assert rejection.error == (
            f"1 schema error(s): {field}: List should have at most {MAX_INPUT_ITEMS} items "
            f"after validation, not {MAX_INPUT_ITEMS * 20}"
        )


def test_many_invalid_items_give_a_short_error() -> None:
    rejection = _rejected(_event(evidence=[0] * 5000))
    assert rejection.reason is DeadLetterReason.SCHEMA_VIOLATION
    assert rejection.error.startswith("5000 schema error(s)") and "and 4980 more" in rejection.error


def test_non_object_top_levels_are_schema_violations() -> None:
    for raw, kind in (
        (b'"text"', "a string"),
        (b"null", "null"),
        (b"3", "a number"),
        (b"[]", "an array"),
    ):
        rejection = _rejected(raw)
        assert rejection.reason is DeadLetterReason.SCHEMA_VIOLATION
        assert rejection.error == f"expected a JSON object, got {kind}"


def test_empty_and_whitespace_messages_are_bad_json() -> None:
    for raw in (b"", b" \n\t\r "):
        rejection = _rejected(raw)
        assert rejection.reason is DeadLetterReason.BAD_JSON
        assert "empty message" in rejection.error


def test_tombstone_is_bad_json() -> None:
    rejection = _rejected(None)
    assert rejection.reason is DeadLetterReason.BAD_JSON and "tombstone" in rejection.error


def test_invalid_utf8_names_the_byte() -> None:
    rejection = _rejected(_event(answer="PLACEHOLDER").replace(b"PLACEHOLDER", b"caf\xe9"))
    assert rejection.reason is DeadLetterReason.BAD_JSON
    assert "not valid UTF-8" in rejection.error and "\\xe9" in rejection.error


def test_utf8_encoded_surrogate_is_invalid_utf8() -> None:
    rejection = _rejected(_event(answer="PLACEHOLDER").replace(b"PLACEHOLDER", b"\xed\xa0\x80"))
    assert rejection.reason is DeadLetterReason.BAD_JSON and "not valid UTF-8" in rejection.error


def test_utf16_json_is_not_guessed_at() -> None:
    rejection = _rejected(json.dumps(VALID).encode("utf-16-le"))
    assert rejection.reason is DeadLetterReason.BAD_JSON


def test_byte_order_mark_is_bad_json() -> None:
    rejection = _rejected(b"\xef\xbb\xbf" + json.dumps(VALID).encode())
    assert rejection.reason is DeadLetterReason.BAD_JSON and "byte order mark" in rejection.error


NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_event_time_too_far_ahead_is_out_of_range() -> None:
    raw = _event(occurred_at="2026-01-01T12:05:01Z")
    rejection = _rejected(raw, now=NOW, max_future_s=300.0, max_past_s=3600.0)
    assert rejection.reason is DeadLetterReason.EVENT_TIME_OUT_OF_RANGE
    assert "2026-01-01T12:05:01+00:00" in rejection.error
    assert "301 s ahead" in rejection.error and "at most 300 s" in rejection.error


def test_event_time_too_old_is_out_of_range() -> None:
    raw = _event(occurred_at="2025-12-25T11:59:59Z")
    rejection = _rejected(raw, now=NOW, max_future_s=300.0, max_past_s=7 * 24 * 3600.0)
    assert rejection.reason is DeadLetterReason.EVENT_TIME_OUT_OF_RANGE
    assert "2025-12-25T11:59:59+00:00" in rejection.error and "at most 604800 s" in rejection.error


def test_event_time_at_the_bounds_and_in_other_zones_is_accepted() -> None:
    for stamp in ("2026-01-01T12:05:00Z", "2025-12-25T12:00:00Z", "2026-01-01T13:00:00+01:00"):
        parsed = parse_answer(
            _event(occurred_at=stamp), 10_000, now=NOW, max_future_s=300.0, max_past_s=604800.0
        )
        assert isinstance(parsed, AnswerEvent), (stamp, parsed)


def test_extreme_event_times_are_out_of_range_not_overflow() -> None:
    for stamp in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"):
        rejection = _rejected(_event(occurred_at=stamp), max_future_s=300.0, max_past_s=60.0)
        assert rejection.reason is DeadLetterReason.EVENT_TIME_OUT_OF_RANGE


def test_no_bounds_means_no_event_time_check() -> None:
    parsed = parse_answer(_event(occurred_at="1999-01-01T00:00:00Z"), 10_000, now=NOW)
    assert isinstance(parsed, AnswerEvent)


def test_an_unexpected_failure_is_a_processing_error_not_an_exception() -> None:
    # A naive clock is a caller's bug; intake still answers with a dead letter naming it.
    rejection = _rejected(_event(), now=datetime(2026, 1, 1), max_future_s=1.0)
    assert rejection.reason is DeadLetterReason.PROCESSING_ERROR
    assert "TypeError" in rejection.error


def test_depth_limit_is_exact_and_ignores_brackets_inside_strings() -> None:
    def nested(levels: int) -> object:  # the event object is level 1, evidence level 2, ...
        value: object = '"]}[{\\'
        for _ in range(levels - 4):
            value = [value, "[[[{{{"]
        return [{"id": "D1", "text": "]]]", "fields": {"x": value}}]

    assert isinstance(parse_answer(_event(evidence=nested(MAX_DEPTH)), 10_000), AnswerEvent)
    rejection = _rejected(_event(evidence=nested(MAX_DEPTH + 1)))
    assert rejection.reason is DeadLetterReason.SCHEMA_VIOLATION
    assert f"deeper than {MAX_DEPTH}" in rejection.error


def test_intake_adds_no_pass_that_grows_faster_than_the_json_parser() -> None:
    """No quadratic pass of ours: intake's cost over json.loads's stays the same factor
    when the hostile content grows 4x (json.loads itself is the yardstick, since CPython's
    allocator makes even it superlinear on some shapes)."""
    chain: object = 0
    for _ in range(MAX_DEPTH - 4):
        chain = [chain]
    shapes: dict[str, Callable[[int], dict[str, object]]] = {
        "empty arrays": lambda n: {"x": [[]] * n},
        "objects": lambda n: {"x": [{"a": 1, "b": "c"}] * n},
        "surrogate pairs": lambda n: {"x": ["\U0001f600"] * n},
        "lone surrogate at the end": lambda n: {"x": ["a"] * n + ["\ud800"]},
        "deep chains": lambda n: {"x": [chain] * (n // 20)},
    }

    def fastest_seconds(work: Callable[[], object]) -> float:
        """The fastest of 5 runs: noise only ever adds time (a median once read 3.3x in
        a fresh-clone CI run)."""
        runs = []
        for _ in range(5):
            started = time.process_time()  # CPU time: other processes on the box do not count
            work()
            runs.append(time.process_time() - started)
        return min(runs)

    def overhead(raw: bytes) -> float:
        return fastest_seconds(lambda: parse_answer(raw, 10**7)) / fastest_seconds(
            lambda: json.loads(raw)
        )

    for name, shape in shapes.items():
        small, large = (
            json.dumps({**VALID, **shape(n)}).encode("utf-8", "surrogatepass")
            for n in (4000, 16000)
        )
        growth = overhead(large) / overhead(small)
        for _ in range(2):  # a noisy neighbour passes; a real quadratic pass stays near 4x
            if growth < 3.0:
                break
            growth = min(growth, overhead(large) / overhead(small))
        assert growth < 3.0, f"{name}: intake's overhead grew {growth:.1f}x with 4x the input"
