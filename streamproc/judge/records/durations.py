"""Spans of time written in words ("14 days", "48-hour", "1-2 business days", "an hour
before"): a claim may count from a recorded date or time by one of them."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Final

from streamproc.judge.records.claim_values import tokens
from streamproc.judge.records.value_parse import number_word

__all__ = ["durations"]

_DURATION_UNITS: Final = {
    "minute": timedelta(minutes=1), "min": timedelta(minutes=1), "hour": timedelta(hours=1),
    "hr": timedelta(hours=1), "day": timedelta(days=1), "night": timedelta(days=1),
    "week": timedelta(weeks=1), "fortnight": timedelta(weeks=2),
}  # fmt: skip


def durations(text: str, *, offsets: bool = False) -> frozenset[timedelta]:
    """Spans of time the evidence writes ("14 days", "48-hour", "3 hours", "5 business
    days"): a claim may count from a recorded date or time by one of them. With
    ``offsets`` only spans written as a shift ("in 30 minutes", "three hours after
    pick-up") count, not how long something lasts ("the visit lasts two hours")."""
    out = set()
    pieces = tokens(text)
    for index, token in enumerate(pieces):
        number, _, unit = token.lower.partition("-")
        last = index
        if not unit and index + 1 < len(pieces):
            unit, last = pieces[index + 1].lower, index + 1
            if unit in {"business", "working", "calendar"} and index + 2 < len(pieces):
                unit, last = pieces[index + 2].lower, index + 2
        counts = [int(number)] if number.isdecimal() and len(number) <= 4 else []
        if counts and unit.isdecimal() and len(unit) <= 4 and last + 1 < len(pieces):
            counts.append(int(unit))  # "1-2 business days": either end of the range
            last += 1
            unit = pieces[last].lower
            if unit in {"business", "working", "calendar"} and last + 1 < len(pieces):
                last += 1
                unit = pieces[last].lower
        article = _ARTICLES.get(number) if offsets else None  # a claim's "an hour before"
        count = counts[0] if counts else article or number_word(number)
        if count is None:
            continue
        base = _DURATION_UNITS.get(unit.rstrip("s")) or _DURATION_UNITS.get(unit)
        if base is None:
            continue
        if offsets:
            before = {p.lower for p in pieces[max(0, index - 2) : index]}
            after = {p.lower for p in pieces[last + 1 : last + 3]}
            if not (before & _SHIFT_BEFORE or after & _SHIFT_AFTER):
                continue
        out |= {n * base for n in counts or [int(count)]}
    return frozenset(out)


_ARTICLES: Final = {"a": Decimal(1), "an": Decimal(1)}  # "an hour before it's sent"
_SHIFT_BEFORE: Final = frozenset({"in", "within"})
_SHIFT_AFTER: Final = frozenset(
    {"after", "before", "later", "earlier", "ago", "prior", "from", "beforehand", "afterwards"}
)
