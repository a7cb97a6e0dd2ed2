"""Evidence as checkable units: sentences, flattened record fields and sliding windows.

An NLI model reads at most 512 tokens, so a whole passage is never one premise: it is
split into sentences (the answer's own splitter), and adjacent sentences are joined
into windows so that a fact spread over two short lines is still entailed by one
premise. Structured records - ``fields`` of a record or tool result, or item text that
is a JSON object (RAGTruth Data2txt) - become one "field: value" sentence per value,
with readable field names ("hours Monday: 11:00-17:00"). Nothing is truncated or
dropped: a long sentence stays whole, every value of a record is kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from streamproc.contracts.events import EvidenceItem, EvidenceKind
from streamproc.judge.text.sentences import split_sentences

__all__ = [
    "MAX_FIELD_DEPTH",
    "NOT_EXECUTED_PREFIX",
    "QUESTION_ID",
    "EvidenceUnit",
    "FieldLeaf",
    "UnitKind",
    "build_units",
    "is_structured",
    "readable_field",
    "record_leaves",
    "units_for",
]

UnitKind = Literal["passage", "record", "policy", "tool_result", "question"]

QUESTION_ID: Final = "<question>"
"""``evidence_id`` of the question's unit (no evidence item can be named like this)."""

NOT_EXECUTED_PREFIX: Final = "Not executed (the call was refused): "
"""Starts every unit of a refused tool call: it grounds "that was refused", never
"it happened" - a model reading the call's arguments alone would see the effect."""

_KINDS: Final[Mapping[EvidenceKind, UnitKind]] = {
    EvidenceKind.PASSAGE: "passage",
    EvidenceKind.RECORD: "record",
    EvidenceKind.POLICY: "policy",
    EvidenceKind.TOOL_RESULT: "tool_result",
}
_STRUCTURED: Final = frozenset({EvidenceKind.RECORD, EvidenceKind.TOOL_RESULT})


@dataclass(frozen=True, slots=True)
class EvidenceUnit:
    """One premise to check a claim against.

    ``first``/``last`` are the indices of the item's sentences it covers (equal for a
    single sentence); a window covers ``last - first + 1`` adjacent sentences.
    """

    evidence_id: str
    kind: UnitKind
    text: str
    first: int
    last: int
    is_window: bool = False


# ----------------------------------------------------------------------------- fields

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class FieldLeaf:
    """One value of a structured record: its path of keys (ints are list positions) and
    the value itself - a JSON scalar, or ``()`` for an empty list or object."""

    path: Path
    value: Any

    @property
    def name(self) -> str:
        """The path as written: ``order.status``, ``review_info[0].review_stars``."""
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        return out

    @property
    def label(self) -> str:
        """The path for a reader: ``review info 1 stars`` (see :func:`readable_field`)."""
        return _label(self.path)


_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def readable_field(key: str) -> str:
    """``business_stars`` -> "business stars", ``RestaurantsTakeOut`` -> "restaurants take
    out"; a plain word keeps its case ("Monday"), and so does a key whose camel pieces are
    all tiny ("WiFi"): splitting it would say less than the key."""
    pieces = [p for chunk in re.split(r"[\s_\-.]+", key) for p in _CAMEL.findall(chunk)]
    if len(pieces) <= 1 or all(len(p) <= 2 for p in pieces):
        return key.replace("_", " ").strip() or key
    return " ".join(p.lower() for p in pieces)


def _label(path: Path) -> str:
    words: list[str] = []
    for part in path:
        text = str(part + 1) if isinstance(part, int) else readable_field(part)
        for word in text.split():
            if word.isdecimal() or word.lower() not in {w.lower() for w in words}:
                words.append(word)  # "review info 1 review stars" -> "review info 1 stars"
    return " ".join(words)


MAX_FIELD_DEPTH: Final = 64
"""Levels of a record's fields that are read (as the stream's intake allows): what is
nested deeper is read as an empty value, so a record nested thousands deep is no crash."""


def _leaves(value: Any, path: Path) -> Iterator[FieldLeaf]:
    if len(path) >= MAX_FIELD_DEPTH:
        yield FieldLeaf(path, ())
    elif isinstance(value, Mapping) and value:
        for key, inner in value.items():
            yield from _leaves(inner, (*path, str(key)))
    elif isinstance(value, list | tuple) and value:
        for position, inner in enumerate(value):
            yield from _leaves(inner, (*path, position))
    else:
        yield FieldLeaf(path, () if isinstance(value, Mapping | list | tuple) else value)


def _json_record(text: str) -> dict[str, Any] | list[Any] | None:
    """The item text as JSON, when it is a JSON object or array (Data2txt records)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        parsed = json.loads(stripped)
    except (ValueError, RecursionError):  # "[[[[...": nested past the parser's stack
        return None
    return parsed if isinstance(parsed, dict | list) and parsed else None


def record_leaves(item: EvidenceItem) -> list[FieldLeaf]:
    """Every value of a structured item: its ``fields``, then its text if that is JSON.

    For any kind of item (a passage may be JSON too); each (path, value) once.
    """
    found: list[FieldLeaf] = []
    if item.fields:
        found.extend(_leaves(item.fields, ()))
    parsed = _json_record(item.text)
    if parsed is not None:
        found.extend(_leaves(parsed, ()))
    return list(dict.fromkeys(found))


# --------------------------------------------------------------------------- rendering

_SHORT_TIME = re.compile(r"\d{1,2}:\d{1,2}(?:\s*-\s*\d{1,2}:\d{1,2})?")


def _render_scalar(value: Any) -> str:
    if value is None:
        return "unknown"  # not "none": null says nothing, it must not read as "no"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, Mapping | list | tuple):
        return "none"  # an empty list or object
    text = str(value).strip()
    if _SHORT_TIME.fullmatch(text):  # "11:0-23:0" -> "11:00-23:00"
        text = re.sub(r"(\d{1,2}):(\d{1,2})", lambda m: f"{m[1]}:{int(m[2]):02d}", text)
    return text


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, Mapping | list | tuple) or not value


def _record_lines(value: Any, path: Path) -> Iterator[str]:
    """ "label: value" sentences. A list of scalars is one sentence ("tags: a, b"); a
    string of several sentences is split, its first sentence carrying the label."""
    if len(path) >= MAX_FIELD_DEPTH:
        yield _labelled(path, "none")
        return
    if isinstance(value, Mapping) and value:
        for key, inner in value.items():
            yield from _record_lines(inner, (*path, str(key)))
        return
    if isinstance(value, list | tuple) and value:
        if all(_is_scalar(v) for v in value):
            yield _labelled(path, ", ".join(_render_scalar(v) for v in value))
        else:
            for position, inner in enumerate(value):
                yield from _record_lines(inner, (*path, position))
        return
    rendered = _render_scalar(value)
    parts = _sentences(rendered) if isinstance(value, str) else [rendered]
    yield _labelled(path, parts[0] if parts else rendered)
    yield from parts[1:]


def _labelled(path: Path, text: str) -> str:
    label = _label(path)
    return f"{label}: {text}" if label else text


def _sentences(text: str) -> list[str]:
    return [text[s:e].strip() for s, e in split_sentences(text)]


def _item_sentences(item: EvidenceItem) -> list[str]:
    """The item's sentences: prose split into sentences, structure into field lines."""
    parsed = _json_record(item.text)
    lines = list(_record_lines(parsed, ())) if parsed is not None else _sentences(item.text)
    if item.fields:
        said = set(lines)  # a text that serialises the fields: its lines once, not twice
        lines.extend(line for line in _record_lines(item.fields, ()) if line not in said)
    lines = [line for line in lines if line]  # a repeated sentence stays: nothing is dropped
    if item.executed is False:
        lines = [NOT_EXECUTED_PREFIX + line for line in lines]
    return lines


def _join(sentences: Sequence[str]) -> str:
    out = sentences[0]
    for sentence in sentences[1:]:
        out += (" " if out.endswith((".", "!", "?", '"', "'", ")")) else "; ") + sentence
    return out


# ------------------------------------------------------------------------------- units


def build_units(
    question: str | None, evidence: Sequence[EvidenceItem], window_sentences: int = 2
) -> list[EvidenceUnit]:
    """All units of one answer's evidence: the question (a claim may repeat the user's
    words), then per item its sentences followed by its sliding windows of
    ``window_sentences`` adjacent sentences (fewer when the item is shorter; none for a
    one-sentence item or ``window_sentences=1``). Windows never cross items."""
    if window_sentences < 1:
        raise ValueError(f"window_sentences must be >= 1, got {window_sentences}")
    units: list[EvidenceUnit] = []
    if question and question.strip():
        units.append(EvidenceUnit(QUESTION_ID, "question", question.strip(), 0, 0))
    for item in evidence:
        kind = _KINDS[item.kind]
        sentences = _item_sentences(item)
        units.extend(
            EvidenceUnit(item.id, kind, text, index, index) for index, text in enumerate(sentences)
        )
        size = min(window_sentences, len(sentences))
        if size >= 2:
            units.extend(
                EvidenceUnit(
                    item.id, kind, _join(sentences[i : i + size]), i, i + size - 1, is_window=True
                )
                for i in range(len(sentences) - size + 1)
            )
    return units


def units_for(
    evidence_ids: Iterable[str], units: Sequence[EvidenceUnit], *, include_question: bool = True
) -> list[EvidenceUnit]:
    """The units of the cited items (a citation check reads only those), in order; the
    question's unit too, since the course checks citations against question + cited notes."""
    wanted = set(evidence_ids)
    if include_question:
        wanted.add(QUESTION_ID)
    return [unit for unit in units if unit.evidence_id in wanted]


def is_structured(item: EvidenceItem) -> bool:
    """Records and tool results: what only a record can ground (claims about this case)."""
    return item.kind in _STRUCTURED
