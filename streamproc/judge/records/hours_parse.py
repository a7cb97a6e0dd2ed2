"""Opening hours a claim asserts: day sets ("Monday to Friday", "weekdays", "daily"),
times in 12 h and 24 h clocks, and which days each time range belongs to.

Split from :mod:`streamproc.judge.records.value_parse`; like it, it works on one claim string
and returns nothing when the wording is ambiguous.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["ALL_DAYS", "DAYS", "HoursClaim", "day_label", "hours_claims", "minutes_label"]

DAYS: Final = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
ALL_DAYS: Final = frozenset(range(7))


_DAY_NAME = r"(?:mon|tues?|wednes|thurs?|fri|satur|sun)days?"
_DAY_ABBR = r"(?-i:Mon|Tue|Tues|Wed|Thu|Thur|Thurs|Fri|Sat|Sun)\.?"
_DAY = rf"(?:{_DAY_NAME}|{_DAY_ABBR})"
_RANGE_SEP = r"\s*(?:-|\u2013|to|through|thru|until|till)\s*"
_DAYSET = re.compile(
    rf"\b(?P<from>{_DAY_NAME}){_RANGE_SEP}(?P<to>{_DAY_NAME})\b"
    rf"|\b(?P<afrom>{_DAY_ABBR})\s*(?:-|\u2013|to)\s*(?P<ato>{_DAY_ABBR})(?!\w)"
    r"|\b(?P<all>daily|every ?day(?: of the week)?|(?:seven|7) days(?: a| per| of the) week"
    r"|all week(?: long)?|all days of the week)\b"
    r"|\b(?P<weekdays>weekdays|week ?days)\b"
    r"|\b(?P<weekends>weekends?)\b"
    rf"|\b(?P<one>{_DAY_NAME})\b",
    re.IGNORECASE,
)
# The gap patterns below are used with ``match(claim, pos, endpos)``, so they are anchored
# at ``pos`` without a "^". Each optional word carries its own trailing spaces: written
# as ``\s*(?:word)?\s*``, two adjacent ``\s*`` split a long run of spaces in every way
# before failing (quadratic; cubic with three), and the run is the same either way.
_DAY_JOIN = re.compile(r"\s*(?:(?:,|and|&|or|, and)\s*)?$", re.IGNORECASE)
_EXCEPT = re.compile(r"\s*(?:,\s*)?(?:except|but)(?: for)?(?: on)?\s*$", re.IGNORECASE)
_CLOSED_BEFORE = re.compile(r"\bclosed\s+(?:on\s+|every\s+|all\s+)?$", re.IGNORECASE)
_CLOSED_AFTER = re.compile(
    r"\s*(?:,\s*)?(?:(?:it|they|the \w+)\s*)?(?:(?:is|are|remains?)\s*)?closed\b"
)

_CLOCK = (
    r"(?:(?P<{p}h>\d{{1,2}})(?::(?P<{p}m>\d{{2}}))?\s*(?P<{p}ap>[ap])\.?\s?m\b\.?"
    r"|(?P<{p}hh>\d{{1,2}}):(?P<{p}mm>\d{{2}})(?!\d)|(?P<{p}word>noon|midnight)"
    r"|(?P<{p}bare>\d{{1,2}})(?=\s*(?:-|\u2013|to|until|till|and)\s*\d{{1,2}}\s*(?::\d\d\s*)?[ap]\.?m))"
)
_TIME_RANGE = re.compile(
    r"(?:\b(?:from|between)\s+)?(?<![\d.:$])"
    + _CLOCK.format(p="o")
    + r"\s*(?:-|\u2013|to|until|till|and)\s*"
    + _CLOCK.format(p="c"),
    re.IGNORECASE,
)
_OPEN_AT = re.compile(
    r"\b(?:opens?|opening|starts?|starting)\s+(?:at|from)\s+" + _CLOCK.format(p="o"),
    re.IGNORECASE,
)
_CLOSE_AT = re.compile(
    r"\b(?:until|till|closes?\s+at|closing(?:\s+time)?\s+(?:at|to|of|is)|close\s+at)\s+"
    + _CLOCK.format(p="c"),
    re.IGNORECASE,
)
_HOURS_CONTEXT = re.compile(
    r"\b(?:open\w*|hours|operat\w*|closed?|closes|closing|business days|schedule)\b",
    re.IGNORECASE,
)
_OTHER_TIMES = re.compile(
    r"\b(?:happy hours?|breakfast|lunch|dinner|brunch|deliver\w*|kitchen|specials?|"
    r"shows?|events?|wait\w*|took|minutes)\b",
    re.IGNORECASE,
)
_TRAILING_LINK = re.compile(r"\s*(?:,\s*)?(?:(?:on|every|each|from|for|during)\s*)?(?:the\s+)?$")


def _day_index(name: str) -> int:
    key = name.strip(".").lower()[:3]
    return ["mon", "tue", "wed", "thu", "fri", "sat", "sun"].index(key)


def _span_days(first: int, last: int) -> frozenset[int]:
    """Inclusive, wrapping: Friday to Monday is Fri, Sat, Sun, Mon."""
    return frozenset((first + i) % 7 for i in range((last - first) % 7 + 1))


def _match_days(match: re.Match[str]) -> frozenset[int]:
    if match["from"]:
        return _span_days(_day_index(match["from"]), _day_index(match["to"]))
    if match["afrom"]:
        return _span_days(_day_index(match["afrom"]), _day_index(match["ato"]))
    if match["all"]:
        return ALL_DAYS
    if match["weekdays"]:
        return frozenset(range(5))
    if match["weekends"]:
        return frozenset({5, 6})
    return frozenset({_day_index(match["one"])})


def _clock(match: re.Match[str], p: str) -> frozenset[int] | None:
    """Minutes after midnight; several candidates when the clock is 12 h without am/pm."""
    if match[f"{p}word"]:
        return frozenset({720 if match[f"{p}word"].lower() == "noon" else 0})
    if match[f"{p}h"]:
        hour, minute = int(match[f"{p}h"]), int(match[f"{p}m"] or 0)
        if not 1 <= hour <= 12 or minute > 59:
            return None
        pm = match[f"{p}ap"].lower() == "p"
        return frozenset({(hour % 12 + (12 if pm else 0)) * 60 + minute})
    hour_text = match[f"{p}hh"] or match[f"{p}bare"]
    hour, minute = int(hour_text), int(match[f"{p}mm"] or 0)
    if hour > 24 or minute > 59:
        return None
    if hour == 0 or hour > 12 or (hour_text.startswith("0") and len(hour_text) == 2):
        return frozenset({hour % 24 * 60 + minute})
    return frozenset({hour % 12 * 60 + minute, (hour % 12 + 12) * 60 + minute})


def _clock_24h(match: re.Match[str], p: str, parsed: frozenset[int]) -> frozenset[int]:
    hour = match[f"{p}hh"]
    if hour is None:
        return parsed
    return frozenset({int(hour) % 24 * 60 + int(match[f"{p}mm"])})


def _is_24h(match: re.Match[str]) -> bool:
    return any(
        (hh := match[f"{p}hh"]) is not None and (int(hh) > 12 or hh.startswith("0"))
        for p in ("o", "c")
    )


@dataclass(frozen=True, slots=True)
class HoursClaim:
    """One "days + hours" statement: ``days`` None when the claim names no day;
    ``opens``/``closes`` the candidate minutes (None when that end is not stated);
    ``closed`` for "closed on Mondays"; neither times nor closed: "open Tuesday to Sunday"."""

    days: frozenset[int] | None
    opens: frozenset[int] | None
    closes: frozenset[int] | None
    closed: bool = False


@dataclass(frozen=True, slots=True)
class _Mention:
    start: int
    end: int
    days: frozenset[int] | None = None
    opens: frozenset[int] | None = None
    closes: frozenset[int] | None = None
    closed: bool = False
    opening: bool = False  # an "open ..." phrase stands right before these days


def _day_mentions(claim: str) -> list[_Mention]:
    """Day sets, merging lists ("Mondays, Tuesdays, and Wednesdays") and exceptions."""
    found: list[_Mention] = []
    for match in _DAYSET.finditer(claim):
        days = _match_days(match)
        last = found[-1] if found else None
        if last is not None and last.days is not None and not last.closed:
            gap = (claim, last.end, match.start())
            merged = last.days | days if _DAY_JOIN.match(*gap) else None
            if merged is None and _EXCEPT.match(*gap):
                merged = last.days - days
            if merged is not None:
                found[-1] = _Mention(last.start, match.end(), merged, opening=last.opening)
                continue
        before = claim[max(0, match.start() - 40) : match.start()]
        closed = bool(_CLOSED_BEFORE.search(before) or _CLOSED_AFTER.match(claim, match.end()))
        opening = _HOURS_CONTEXT.search(before.split(",")[-1]) is not None
        found.append(_Mention(match.start(), match.end(), days, closed=closed, opening=opening))
    return found


def _time_mentions(claim: str) -> list[_Mention]:
    found: list[_Mention] = []
    taken_starts: list[int] = []  # in order and disjoint: finditer's matches
    taken_ends: list[int] = []
    for match in _TIME_RANGE.finditer(claim):
        opens, closes = _clock(match, "o"), _clock(match, "c")
        if opens is None or closes is None:
            continue
        if _is_24h(match):  # "12:00 to 20:00": both ends are 24 h, 12:00 is noon
            opens, closes = _clock_24h(match, "o", opens), _clock_24h(match, "c", closes)
        found.append(_Mention(match.start(), match.end(), opens=opens, closes=closes))
        taken_starts.append(match.start())
        taken_ends.append(match.end())
    for pattern, side in ((_OPEN_AT, "o"), (_CLOSE_AT, "c")):
        for match in pattern.finditer(claim):
            if _overlaps(taken_starts, taken_ends, match.start(), match.end()):
                continue
            value = _clock(match, side)
            if value is not None:
                kind = {"opens": value} if side == "o" else {"closes": value}
                found.append(_Mention(match.start(), match.end(), **kind))  # type: ignore[arg-type]
    return sorted(found, key=lambda m: m.start)


def hours_claims(claim: str) -> list[HoursClaim]:
    """Opening-hours statements of the claim, each time range paired with its days: the
    days right after it ("11 am to 9 pm on weekdays"), else the nearest days before it
    ("Monday through Friday from 6 am to 5:30 pm"). Day sets without a time count only
    when an "open"/"closed" phrase governs them."""
    if not _HOURS_CONTEXT.search(claim):
        return []
    days = _day_mentions(claim)
    times = [  # times of a meal, a show or a wait are not the opening hours
        t
        for t in _time_mentions(claim)
        if not _OTHER_TIMES.search(claim, max(0, t.start - 40), min(len(claim), t.end + 15))
    ]
    used: set[int] = set()
    out: list[HoursClaim] = []
    starts = [d.start for d in days]  # in order and disjoint, as the matches they are
    open_ends = [d.end for d in days if not d.closed]
    open_index = [i for i, d in enumerate(days) if not d.closed]
    for time in times:
        chosen: int | None = None
        following = bisect_left(starts, time.end)  # the first day set at or after the time
        if following < len(days) and _TRAILING_LINK.match(claim, time.end, days[following].start):
            chosen = following
        else:
            preceding = bisect_right(open_ends, time.start)  # open day sets ending before
            if preceding:
                chosen = open_index[preceding - 1]
        if chosen is not None and days[chosen].closed:
            chosen = None
        if chosen is not None:
            used.add(chosen)
        out.append(
            HoursClaim(days[chosen].days if chosen is not None else None, time.opens, time.closes)
        )
    for index, day in enumerate(days):
        if index in used:
            continue
        if day.closed:
            out.append(HoursClaim(day.days, None, None, closed=True))
        elif day.opening:
            out.append(HoursClaim(day.days, None, None))
    return out


def _overlaps(starts: Sequence[int], ends: Sequence[int], start: int, end: int) -> bool:
    """Does ``[start, end)`` overlap one of the spans ``zip(starts, ends)`` (in order and
    disjoint)? A bisection, not a scan: a claim can hold thousands of time ranges."""
    after = bisect_right(starts, start)  # the first span starting after ``start``
    return (after > 0 and ends[after - 1] > start) or (after < len(starts) and starts[after] < end)


def minutes_label(minutes: int) -> str:
    """600 -> "10:00"; 1500 (1 am the next day) -> "01:00"."""
    minutes %= 1440
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def day_label(days: frozenset[int]) -> str:
    """Runs of days: {0..6} -> "Monday-Sunday", {0, 1, 2, 5} -> "Monday-Wednesday, Saturday"."""
    runs: list[list[int]] = []
    for day in sorted(days):
        if runs and runs[-1][-1] == day - 1:
            runs[-1].append(day)
        else:
            runs.append([day])
    return ", ".join(DAYS[r[0]] if len(r) == 1 else f"{DAYS[r[0]]}-{DAYS[r[-1]]}" for r in runs)
