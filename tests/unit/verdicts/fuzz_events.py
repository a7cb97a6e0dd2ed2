"""Valid answer events with odd but legal content, for the hostile-input fuzz tests
(test_stage_fuzz.py, and the HTTP gate's test_server_fuzz.py): the Hypothesis strategies,
the event-time bounds they are drawn around, and the helpers that put a value or a raw
JSON literal at a place in an event."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

MAX_EVENT_BYTES = 512 * 1024


NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MAX_FUTURE_S = 300.0
MAX_PAST_S = 7 * 24 * 3600.0


_PLACEHOLDER = "\x01PLACEHOLDER\x01"  # json.dumps writes it as an escape we can find
_PLACEHOLDER_JSON = json.dumps(_PLACEHOLDER)


# ------------------------------------------------------------------- valid material

_ODDITIES = [
    "İstanbul",  # lower() makes it longer
    "straße STRASSE",
    "ﬁne ﬂow",  # ligatures that casefold to two letters
    "e\u0301\u0301\u0301",  # stacked combining marks
    "\u202eevil\u202c",  # right-to-left override
    "👩\u200d👩\u200d👧\u200d👦",  # ZWJ family
    "\ufeffmid-text BOM",
    "\ufffe\uffff\U0001ffff",  # noncharacters
    "line\u2028separator\u2029paragraph",
    "\uff11\uff12\uff13 fullwidth",
    "٣.١٤ arabic digits",
    "\u00a0\u2009\u3000spaces",
    "\u200b\u200c\u200d",
    "x" * 3000,  # one enormous word
    "A. B. C. D. E. F. G.",  # many tiny sentences
    "$5 ... 9:00-17:00 ... 3 May ... 1e9 ... -0 ... 50%",
    "[D1][D2][D999][] [",
    "\U0001f600" * 50,
]
_SENTENCES = [
    "The order was shipped on Monday [D1].",
    "It costs $5 and the store opens at 9:00.",
    "I don't know.",
    "The refund was not approved; the order was cancelled.",
    "According to the policy, returns are accepted within 30 days [D2].",
    "Yes.",
]
_EVIDENCE_TEXT = [
    "The order was shipped on Monday. Price: $5.",
    "Returns are accepted within 30 days.",
    '{"status": "shipped", "price": 5, "hours": "9:00-17:00"}',
    "[1, 2, [3, [4]]]",
    "",
]
_NICE_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)
_PROSE = st.lists(
    st.one_of(st.sampled_from(_SENTENCES), st.sampled_from(_ODDITIES), _NICE_TEXT), max_size=3
).map(" ".join)
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    _NICE_TEXT,
)
_RECORD = st.dictionaries(
    st.sampled_from(["status", "order_id", "price", "hours", "tags", "date", "x"]) | _NICE_TEXT,
    st.one_of(
        _SCALAR, st.lists(_SCALAR, max_size=3), st.dictionaries(_NICE_TEXT, _SCALAR, max_size=2)
    ),
    max_size=3,
)
_EVIDENCE_ITEM = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["D1", "D2", "R1"]) | st.text(min_size=1, max_size=20),
        "text": st.sampled_from(_EVIDENCE_TEXT) | _PROSE,
    },
    optional={
        "kind": st.sampled_from(["passage", "record", "policy", "tool_result"]),
        "source": _NICE_TEXT,
        "fields": _RECORD,
        "executed": st.booleans(),
    },
)
_TOKEN = st.fixed_dictionaries(
    {
        "text": _NICE_TEXT,
        "logprob": st.floats(max_value=0.0, allow_nan=False, allow_infinity=False),
        "offset": st.integers(0, 10**6),
    }
)
_LABELS = st.fixed_dictionaries(
    {},
    optional={
        "claims": st.lists(st.sampled_from(["supported", "contradicted", "unsupported"])),
        "spans": st.lists(
            st.fixed_dictionaries({"start": st.integers(0, 500), "end": st.integers(0, 500)})
        ),
        "response": st.sampled_from(["hallucinated", "faithful"]),
    },
)
_RECENT = st.datetimes(
    min_value=datetime(2026, 2, 22, 13), max_value=datetime(2026, 3, 1, 12), timezones=st.just(UTC)
)
_FIXED_EVENT = {
    "event_id": "e-fixed",
    "answer_id": "ans",
    "conversation_id": "conv",
    "tenant": "t1",
    "assistant_id": "bot",
    "model": "llm-1",
    "occurred_at": NOW.isoformat(),
    "answer": "The order was shipped on Monday [D1].",
}
EVENT = st.fixed_dictionaries(
    {
        "event_id": st.uuids().map(str),
        "answer_id": st.just("ans"),
        "conversation_id": st.just("conv"),
        "tenant": st.sampled_from(["t1", "t2"]),
        "assistant_id": st.sampled_from(["bot", "bot-2"]),
        "model": st.just("llm-1"),
        "occurred_at": _RECENT.map(lambda moment: moment.isoformat()),
        "answer": _PROSE,
        "evidence": st.lists(_EVIDENCE_ITEM, max_size=3),
    },
    optional={
        "question": _PROSE,
        "tokens": st.lists(_TOKEN, max_size=3),
        "answerable": st.booleans(),
        "labels": _LABELS,
        "from_the_future": _SCALAR,
    },
)
"""A valid answer event (as a dict) with odd but legal content."""

PLAIN_EVENT = st.builds(
    lambda event_id, answer, evidence: {
        **_FIXED_EVENT,
        "event_id": event_id,
        "answer": answer,
        "evidence": evidence,
    },
    st.uuids().map(str),
    st.sampled_from(_SENTENCES + _ODDITIES),
    st.sampled_from([[], *([{"id": "D1", "text": text}] for text in _EVIDENCE_TEXT)]),
)
"""A valid answer event drawn cheaply, for attacks on structure rather than content."""

_JSON: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10)),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
"""Any JSON value, NaN and Infinity included (json.dumps writes them)."""

_FIELDS = [
    "event_id",
    "answer_id",
    "conversation_id",
    "tenant",
    "assistant_id",
    "model",
    "occurred_at",
    "question",
    "answer",
    "evidence",
    "tokens",
    "answerable",
    "labels",
    "schema_version",
]
_STRING_PLACES = ["answer", "question", "event_id", "evidence.text", "evidence.id", "key"]
_NUMBER_PLACES = [
    "tokens.logprob",
    "tokens.offset",
    "labels.start",
    "evidence.fields",
    "occurred_at",
    "answer",
    "schema_version",
    "unknown",
]

Mutation = Callable[[dict[str, Any]], bytes | None]


def _dumps(doc: dict[str, Any], **options: Any) -> bytes:
    return json.dumps(doc, **options).encode("utf-8", "surrogatepass")


def _put(doc: dict[str, Any], place: str, value: Any) -> dict[str, Any]:
    """``doc`` with ``value`` at ``place`` (a top-level field or one of a few nested ones)."""
    doc = dict(doc)
    if place == "evidence.text":
        doc["evidence"] = [{"id": "D1", "text": value}]
    elif place == "evidence.id":
        doc["evidence"] = [{"id": value, "text": "t"}]
    elif place == "evidence.fields":
        doc["evidence"] = [{"id": "D1", "text": "t", "fields": {"n": value, "list": [value]}}]
    elif place == "key":
        doc["evidence"] = [{"id": "D1", "text": "t", "fields": {str(value): 1}}]
    elif place.startswith("tokens."):
        doc["tokens"] = [{"text": "x", "logprob": -0.1, "offset": 0, place[7:]: value}]
    elif place == "labels.start":
        doc["labels"] = {"spans": [{"start": value, "end": 3}]}
    else:
        doc[place] = value
    return doc


def _with_literal(doc: dict[str, Any], place: str, literal: str) -> bytes:
    """``doc`` with the raw JSON text ``literal`` at ``place``."""
    text = json.dumps(_put(doc, place, _PLACEHOLDER))
    return text.replace(_PLACEHOLDER_JSON, literal, 1).encode("utf-8", "surrogatepass")


def _mutated(
    mutation: st.SearchStrategy[Mutation], base: st.SearchStrategy[dict[str, Any]] = EVENT
) -> st.SearchStrategy[bytes | None]:
    return st.tuples(base, mutation).map(lambda pair: pair[1](pair[0]))


def _plain(mutation: st.SearchStrategy[Mutation]) -> st.SearchStrategy[bytes | None]:
    return _mutated(mutation, PLAIN_EVENT)
