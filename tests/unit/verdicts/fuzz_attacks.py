"""The attacks of the hostile-input fuzz tests, as Hypothesis strategies of raw message
bytes: random bytes, JSON of the wrong shape, structural attacks, hostile strings,
numbers and wrong types, event times far and near, and floods."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from streamproc.contracts.events import MAX_INPUT_ITEMS
from streamproc.verdicts.intake import MAX_DEPTH
from tests.unit.verdicts.fuzz_events import (
    _FIELDS,
    _JSON,
    _NUMBER_PLACES,
    _ODDITIES,
    _PLACEHOLDER,
    _PLACEHOLDER_JSON,
    _SENTENCES,
    _STRING_PLACES,
    EVENT,
    MAX_EVENT_BYTES,
    MAX_FUTURE_S,
    MAX_PAST_S,
    NOW,
    Mutation,
    _dumps,
    _mutated,
    _plain,
    _put,
    _with_literal,
)

# --------------------------------------------------------------------- the attacks

RANDOM_BYTES = st.one_of(
    st.binary(max_size=200),
    st.text(alphabet='{}[]":,0123456789.eE+- \t\ntrufalsn\\u', max_size=200).map(str.encode),
    st.builds(
        lambda junk, cut: junk[:cut],
        st.binary(max_size=50).map(lambda b: b'{"a":' + b),
        st.integers(0, 60),
    ),
)

WRONG_SHAPE = st.one_of(
    _JSON.map(lambda value: json.dumps(value).encode()),
    st.fixed_dictionaries({}, optional={name: _JSON for name in _FIELDS}).map(
        lambda doc: json.dumps(doc).encode()
    ),
    st.dictionaries(st.text(max_size=10), _JSON, max_size=6).map(lambda d: json.dumps(d).encode()),
)


def _nest(depth: int, place: str, opener: str) -> Mutation:
    closer = "]" if opener == "[" else "}"
    inner = '"x": ' if opener == "{" else ""
    literal = (opener + inner) * (depth - 1) + opener + closer * depth
    return lambda doc: _with_literal(doc, place, literal)


def _duplicate(key: str, value: Any, nested: bool) -> Mutation:
    def apply(doc: dict[str, Any]) -> bytes:
        member = f"{json.dumps(key)}: {json.dumps(value)}, "
        if nested:
            doc = {**doc, "evidence": [{"id": "D1", "text": "t"}]}
            return _dumps(doc).replace(b'[{"id"', b"[{" + member.encode() + b'"id"', 1)
        return b"{" + member.encode() + _dumps(doc)[1:]

    return apply


def _giant(place: str, count: int) -> Mutation:
    items = {
        "tokens": {"text": "x", "logprob": -1.0, "offset": 1},
        "labels": "supported",
        "evidence.fields": 0,
        "answer": "x",
        "unknown": None,
    }

    def apply(doc: dict[str, Any]) -> bytes:
        if place == "evidence":  # distinct ids; repeated ones have their own test below
            evidence = [{"id": f"D{i}", "text": "x"} for i in range(count)]
            return _dumps({**doc, "evidence": evidence})
        if place == "labels":
            return _dumps({**doc, "labels": {"claims": [items[place]] * count}})
        if place == "evidence.fields":
            return _dumps(_put(doc, place, [0] * count))
        return _dumps({**doc, place: [items[place]] * count})

    return apply


STRUCTURE: st.SearchStrategy[bytes | None] = st.one_of(
    st.sampled_from([None, b"", b" ", b"\n\t\r ", b"\x00", b"\xef\xbb\xbf", b"{}", b"[]"]),
    _plain(
        st.builds(
            _nest,
            st.sampled_from([MAX_DEPTH - 2, MAX_DEPTH, MAX_DEPTH + 1, 999, 1000, 5000, 100_000])
            | st.integers(1, 2000),
            st.sampled_from(["answer", "evidence", "evidence.fields", "labels", "unknown"]),
            st.sampled_from(["[", "{"]),
        )
    ),
    _plain(st.builds(_duplicate, st.sampled_from([*_FIELDS, "id", "text"]), _JSON, st.booleans())),
    _plain(
        st.builds(
            _giant,
            st.sampled_from(
                ["evidence", "tokens", "labels", "evidence.fields", "answer", "unknown"]
            ),
            st.sampled_from([MAX_INPUT_ITEMS, MAX_INPUT_ITEMS + 1, 60_000])
            | st.integers(0, 300)
            | st.integers(0, 30),
        )
    ),
    _plain(  # truncated anywhere
        st.integers(0, 2000).map(lambda cut: lambda doc: _dumps(doc)[:cut])
    ),
    _plain(  # other encodings, a byte order mark, a top level that is not an object
        st.sampled_from(
            [
                lambda doc: json.dumps(doc).encode("utf-16"),
                lambda doc: json.dumps(doc).encode("utf-32-le"),
                lambda doc: json.dumps(doc, ensure_ascii=False).encode("utf-8-sig"),
                lambda doc: json.dumps(doc, ensure_ascii=False).encode("latin-1", "replace"),
                lambda doc: json.dumps([doc]).encode(),
                lambda doc: json.dumps(json.dumps(doc)).encode(),
                lambda doc: _dumps(doc) + b" trailing",
                lambda doc: _dumps(doc) * 2,
                lambda doc: b"x" * (MAX_EVENT_BYTES + 1),
                lambda doc: _dumps({**doc, "answer": "y" * MAX_EVENT_BYTES}),
            ]
        )
    ),
)


def _insert(place: str, text: str, position: int, ensure_ascii: bool) -> Mutation:
    def apply(doc: dict[str, Any]) -> bytes:
        if place == "key":
            value = text
        else:
            original = str(doc.get(place, "abc"))
            cut = position % (len(original) + 1)
            value = original[:cut] + text + original[cut:]
        return _dumps(_put(doc, place, value), ensure_ascii=ensure_ascii)

    return apply


def _raw_control(code: int) -> Mutation:
    char = chr(code).encode()
    return lambda doc: _dumps(_put(doc, "answer", _PLACEHOLDER)).replace(
        _PLACEHOLDER_JSON.encode(), b'"a' + char + b'b"', 1
    )


_HOSTILE_CHARS = st.one_of(
    st.integers(0xD800, 0xDFFF).map(chr),  # lone surrogates
    st.sampled_from(["\ud83d", "\ude00", "\udc80abc", "\ud800\ud800"]),
    st.integers(0, 0x1F).map(chr),
    st.sampled_from(["\x7f", "\x85", "\x9b", "\u2028", "\x00\x00"]),
    st.sampled_from(_ODDITIES),
)

STRINGS: st.SearchStrategy[bytes | None] = st.one_of(
    _mutated(
        st.builds(
            _insert,
            st.sampled_from(_STRING_PLACES),
            _HOSTILE_CHARS,
            st.integers(0, 100),
            st.booleans(),
        )
    ),
    _mutated(st.integers(0, 0x1F).map(_raw_control)),
    _mutated(  # empty and blank answers
        st.sampled_from(
            ["", " ", "\n\n", "\t", "\u200b", "\u3000", "\ufeff", ".", "?!", "[D1]"]
        ).map(lambda blank: lambda doc: _dumps({**doc, "answer": blank}))
    ),
    _mutated(  # oddities all over a valid event, judged for real
        st.tuples(st.sampled_from(_ODDITIES), st.sampled_from(_ODDITIES)).map(
            lambda odd: (
                lambda doc: _dumps(
                    {
                        **doc,
                        "answer": f"{odd[0]} The order was shipped on Monday [D1]. {odd[1]}",
                        "question": odd[1],
                        "evidence": [
                            {"id": "D1", "text": f"{odd[1]} The order was shipped on Monday."},
                            {"id": odd[0][:200], "text": odd[0], "fields": {odd[1]: odd[0]}},
                        ],
                        "tokens": [{"text": odd[0], "logprob": -0.5, "offset": 3}],
                    }
                )
            )
        )
    ),
)

_NUMBER_LITERALS = st.sampled_from(
    [
        "NaN",
        "Infinity",
        "-Infinity",
        "1e999",
        "-1e999",
        "1.0e+400",
        "1e308",
        "-1e308",
        "5e-324",
        "1e-400",
        "-0.0",
        "-0",
        "9" * 309,
        "9" * 310,
        "-" + "9" * 5000,
        "123456789012345678901234567890",
        "0.1e1",
    ]
) | st.integers().map(str)

NUMBERS_AND_TYPES: st.SearchStrategy[bytes | None] = st.one_of(
    _plain(
        st.builds(
            lambda place, literal: lambda doc: _with_literal(doc, place, literal),
            st.sampled_from(_NUMBER_PLACES),
            _NUMBER_LITERALS,
        )
    ),
    _plain(  # any JSON value where a field should be
        st.builds(
            lambda place, value: lambda doc: _dumps(_put(doc, place, value)),
            st.sampled_from([*_FIELDS, *_NUMBER_PLACES, "evidence.text", "evidence.id"]),
            _JSON,
        )
    ),
    _plain(  # a field left out
        st.sampled_from(_FIELDS).map(
            lambda name: lambda doc: _dumps({k: v for k, v in doc.items() if k != name})
        )
    ),
)

_ZONES = st.sampled_from([UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-14))])
_ANY_TIME = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=_ZONES
)
_NEAR_BOUNDS = st.sampled_from(
    [
        NOW + timedelta(seconds=MAX_FUTURE_S),
        NOW + timedelta(seconds=MAX_FUTURE_S + 1),
        NOW - timedelta(seconds=MAX_PAST_S),
        NOW - timedelta(seconds=MAX_PAST_S + 1),
        NOW,
    ]
)
_TIME_TEXT = st.one_of(
    _ANY_TIME.map(datetime.isoformat),
    _NEAR_BOUNDS.map(datetime.isoformat),
    st.datetimes().map(datetime.isoformat),  # naive
    st.sampled_from(
        [
            "0001-01-01T00:00:00+14:00",
            "9999-12-31T23:59:59-14:00",
            "9999-12-31T23:59:59.999999Z",
            "10000-01-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-03-01T23:59:60Z",
            "2026-03-01T12:00:00+24:00",
            "2026-03-01",
            "",
            "now",
        ]
    ),
)

EVENT_TIMES: st.SearchStrategy[bytes | None] = _plain(
    st.one_of(
        _TIME_TEXT.map(lambda stamp: lambda doc: _dumps({**doc, "occurred_at": stamp})),
        st.one_of(st.integers(-(10**12), 10**12), st.floats()).map(
            lambda number: lambda doc: _dumps({**doc, "occurred_at": number})
        ),
    )
)


def _flood(items: int, sentences: int) -> Mutation:
    def apply(doc: dict[str, Any]) -> bytes:
        evidence = [
            {"id": f"D{i}", "text": f"Item {i} was shipped on day {i % 28 + 1}. It costs ${i}."}
            for i in range(items)
        ]
        answer = " ".join(_SENTENCES[i % len(_SENTENCES)] for i in range(sentences))
        tokens = [{"text": "x", "logprob": -0.01, "offset": i} for i in range(sentences)]
        return _dumps({**doc, "answer": answer, "evidence": evidence, "tokens": tokens})

    return apply


FLOODS: st.SearchStrategy[bytes | None] = st.one_of(
    _mutated(st.builds(_flood, st.integers(0, 300), st.integers(0, 30))),
    _mutated(st.builds(_flood, st.sampled_from([800, 2500]), st.sampled_from([64, 65, 300]))),
    EVENT.map(_dumps),
    EVENT.map(_dumps),
)
