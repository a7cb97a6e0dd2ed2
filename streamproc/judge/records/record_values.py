"""The record side of value comparison: one structured item's typed values.

Read once per answer by ``structured.StructuredEvidence.from_items``: leaves of the
record with their paths as words, opening hours as minutes, numbers as decimals, and
measures with their units. Nothing here looks at a claim.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final, Literal

from streamproc.contracts.events import EvidenceItem
from streamproc.judge.records import value_parse as vp
from streamproc.judge.records.money import parse_amount
from streamproc.judge.records.value_parse import CONCEPTS, Concept
from streamproc.judge.text.evidence import FieldLeaf, readable_field, record_leaves

__all__ = ["WORD", "HoursValue", "RecordValues", "ZeroLengthHours"]


_HOURS_VALUE = re.compile(r"^\s*(\d{1,2}):(\d{1,2})\s*-\s*(\d{1,2}):(\d{1,2})\s*$")
_DAY_KEYS: Final = {day.lower(): index for index, day in enumerate(vp.DAYS)}
_RATING_KEY = re.compile(r"\b(?:stars?|rating|rated)\b")
_COUNT_KEY = re.compile(r"\b(?:count|num|number|total)\b")
_PRICE_KEY = re.compile(r"\b(?:price|cost|fee|fare|charge)\b")
_ORDER_MONEY = re.compile(r"\b(?:total|amount|refund|subtotal|balance|paid|due|range)\b")
_ATTRIBUTE_KEY = re.compile(r"attribut|amenit|feature|facilit|services")
WORD = re.compile(r"[a-z]{3,}")
"""Words of three letters or more, as record keys and claims are matched."""

HoursValue = tuple[int, int] | str  # (opens, closes) in minutes, "closed" or "unknown"
ZeroLengthHours = Literal["closed", "unknown"]
"""How a day written "0:0-0:0" (opens when it closes) is read."""
_ZERO_LENGTH: Final = "zero-length"


@dataclass(frozen=True, slots=True)
class _Leaf:
    """A record value with its path as written and its path as lower-case words."""

    name: str
    words: str
    value: Any
    in_list: bool


def _leaf(leaf: FieldLeaf) -> _Leaf:
    words = " ".join(readable_field(part).lower() for part in leaf.path if isinstance(part, str))
    return _Leaf(leaf.name, words, leaf.value, any(isinstance(p, int) for p in leaf.path))


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return Decimal(str(value))


def _parse_hours(value: Any) -> HoursValue:
    """ "11:0-17:0" -> (660, 1020); "11:30-1:0" closes at 1 am the next day -> (690, 1500);
    "0:0-0:0" opens when it closes: zero-length, read per record (``_read_hours``)."""
    match = _HOURS_VALUE.match(value) if isinstance(value, str) else None
    if match is None:
        return "closed" if isinstance(value, str) and "closed" in value.lower() else "unknown"
    h1, m1, h2, m2 = (int(g) for g in match.groups())
    opens, closes = h1 * 60 + m1, h2 * 60 + m2
    if opens == closes:
        return _ZERO_LENGTH
    return opens, closes + 1440 if closes < opens else closes


@dataclass(slots=True)
class RecordValues:
    """One structured item's typed values, read once per answer."""

    evidence_id: str
    leaves: tuple[_Leaf, ...]
    blob: str
    hours: dict[int, HoursValue] | None = None
    hours_path: str = "hours"
    attribute_like: bool = False
    rating: tuple[str, Decimal] | None = None
    review_stars: tuple[tuple[str, Decimal], ...] = ()
    lists: dict[str, tuple[str, int]] = field(default_factory=dict)
    _concepts: dict[str, list[_Leaf]] = field(default_factory=dict)
    _mentions: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def parse(
        cls, item: EvidenceItem, zero_length_hours: ZeroLengthHours = "closed"
    ) -> RecordValues | None:
        """``zero_length_hours``: how a day written "0:0-0:0" is read (``_read_hours``)."""
        raw = record_leaves(item)
        if not raw:
            return None
        leaves = tuple(_leaf(leaf) for leaf in raw)
        blob = "\n".join(str(lf.value).lower() for lf in leaves if isinstance(lf.value, str))
        record = cls(item.id, leaves, blob)
        record._read_hours(raw, zero_length_hours)
        flags = sum(1 for lf in leaves if lf.value is None or isinstance(lf.value, bool))
        record.attribute_like = flags >= 3 or any(_ATTRIBUTE_KEY.search(lf.words) for lf in leaves)
        stars = [
            (lf, n)
            for lf in leaves
            if (n := _number(lf.value)) is not None
            and _RATING_KEY.search(lf.words)
            and not _COUNT_KEY.search(lf.words)
        ]
        record.rating = next(((lf.name, n) for lf, n in stars if not lf.in_list), None)
        record.review_stars = tuple((lf.name, n) for lf, n in stars if lf.in_list)
        for leaf in raw:
            for i, part in enumerate(leaf.path):
                if isinstance(part, int):
                    name = FieldLeaf(leaf.path[:i], None).name
                    length = max(record.lists.get(name, ("", 0))[1], part + 1)
                    record.lists[name] = (name, length)
        record._concepts = {
            c.name: [lf for lf in leaves if c.key.search(lf.words)] for c in CONCEPTS
        }
        return record

    def _read_hours(self, raw: Sequence[FieldLeaf], zero_length: ZeroLengthHours) -> None:
        """Days the record leaves out are closed. A "0:0-0:0" day is closed too when
        ``zero_length`` says so and some other day has real hours (Yelp writes a closed
        Monday so: 24 of the 25 RAGTruth records with one, Monday only, and the answers
        and annotators read it as closed, EVALUATION.md); when every day reads so, or
        ``zero_length`` is "unknown", those days are never judged."""
        days: dict[int, HoursValue] = {}
        for leaf in raw:
            last = leaf.path[-1] if leaf.path else None
            if isinstance(last, str) and last.lower() in _DAY_KEYS:
                self.hours_path = FieldLeaf(leaf.path[:-1], None).name
                days[_DAY_KEYS[last.lower()]] = _parse_hours(leaf.value)
        if not days:
            return
        some_open = any(isinstance(v, tuple) for v in days.values())
        zero = "closed" if zero_length == "closed" and some_open else "unknown"
        self.hours = {
            d: zero if (v := days.get(d, "closed")) == _ZERO_LENGTH else v for d in range(7)
        }

    def concept_leaves(self, concept: Concept) -> list[_Leaf]:
        return self._concepts.get(concept.name, [])

    def has_key(self, pattern: str) -> bool:
        """Does some field's path match the pattern (an "Ambience", even a null one)?"""
        return any(re.search(pattern, leaf.words) for leaf in self.leaves)

    def mentions(self, pattern: str) -> bool:
        """Does any text value of the record (a review, the categories) say this?"""
        if pattern not in self._mentions:
            self._mentions[pattern] = re.search(pattern, self.blob, re.IGNORECASE) is not None
        return self._mentions[pattern]

    def count_of(self, noun: str) -> tuple[str, Decimal] | None:
        """A count field ("review_count") for the noun, else the length of its list."""
        stem = noun[:-1] if noun.endswith("s") else noun
        if len(stem) < 3:
            return None
        for leaf in self.leaves:
            value = _number(leaf.value)
            if value is not None and stem in leaf.words and _COUNT_KEY.search(leaf.words):
                return leaf.name, value
        for name, length in self.lists.values():
            last = re.sub(r"\[\d+\]", "", name).split(".")[-1]
            if stem in readable_field(last).lower().split():
                return name, Decimal(length)
        return None

    def measure_for(self, unit: str, prefixes: set[str]) -> tuple[str, Decimal, str] | None:
        """The one field measured in the unit's dimension whose name the claim uses;
        ``prefixes``: the first four letters of each word of the claim (:data:`WORD`)."""
        dimension = vp.UNITS[unit][0]
        found = []
        for leaf in self.leaves:
            measured = _measure(leaf)
            if measured is None or vp.UNITS[measured[1]][0] != dimension:
                continue
            names = {w[:4] for w in WORD.findall(leaf.words) if w not in vp.UNITS}
            if names & prefixes:
                value, leaf_unit = measured
                found.append((leaf.name, value * vp.UNITS[leaf_unit][1], f"{value} {leaf_unit}"))
        return found[0] if len(found) == 1 else None

    @property
    def prices(self) -> list[tuple[_Leaf, Decimal, str | None]]:
        out = []
        for leaf in self.leaves:
            if not _PRICE_KEY.search(leaf.words) or _ORDER_MONEY.search(leaf.words):
                continue
            number = _number(leaf.value)
            if number is not None:
                out.append((leaf, number, self.currency))
            elif isinstance(leaf.value, str) and (parsed := parse_amount(leaf.value)):
                out.append((leaf, parsed[0], parsed[1] or self.currency))
        return out

    @property
    def currency(self) -> str | None:
        for leaf in self.leaves:
            if leaf.words.endswith("currency") and isinstance(leaf.value, str):
                return leaf.value.strip().upper() or None
        return None

    def price_for(self, claim: str) -> tuple[str, Decimal, str | None, str] | None:
        """The price field the claim is about: the only one, or the only one named."""
        prices = self.prices
        words = {w[:4] for w in WORD.findall(claim.lower())}
        if len(prices) > 1:
            prices = [
                p
                for p in prices
                if {w[:4] for w in WORD.findall(p[0].words) if not _PRICE_KEY.match(w)} & words
            ]
        if len(prices) != 1:
            return None
        leaf, value, currency = prices[0]
        return leaf.name, value, currency, str(leaf.value)

    def scalar(self, key: str) -> tuple[str, str] | None:
        """A text field by its last key ("city"), the shallowest first."""
        for leaf in sorted(self.leaves, key=lambda lf: lf.name.count(".")):
            if leaf.words.split()[-1:] == [key] and isinstance(leaf.value, str) and leaf.value:
                return leaf.name, leaf.value.strip()
        return None


def _measure(leaf: _Leaf) -> tuple[Decimal, str] | None:
    """ "distance_km": 2.5 -> (2.5, "km"); "weight": "3 kg" -> (3, "kg")."""
    number = _number(leaf.value)
    last = leaf.words.split()[-1:] or [""]
    if number is not None and last[0] in vp.UNITS:
        return number, last[0]
    if isinstance(leaf.value, str):
        parsed = list(vp.unit_claims(leaf.value))
        if len(parsed) == 1 and parsed[0].written.strip() == leaf.value.strip():
            return parsed[0].value, parsed[0].noun
    return None
