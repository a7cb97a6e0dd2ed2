"""Dates and times written in digits: "2026-02-10", "10/02/26" in either day-month order,
clock times ("07:45", "9:45", "9:45 pm", "8am-6pm") and ranges of them ("09:30-10:00")."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, time
from typing import Final

__all__ = [
    "TWENTY_FOUR",
    "clock_readings",
    "clock_token",
    "meridiem_hours",
    "numeric_date",
    "numeric_readings",
    "split_hour_ranges",
    "time_range",
]

TWENTY_FOUR: Final = 100  # marks an hour written as "06": a 24-hour clock


def numeric_date(text: str) -> list[int] | None:
    """The three numbers of "2026-02-10", "10/02/2026", "10.02.26"; None otherwise."""
    for separator in "-/.":
        parts = text.split(separator)
        if len(parts) == 3 and all(p.isdecimal() and 1 <= len(p) <= 4 for p in parts):
            return [int(p) for p in parts]
    return None


def clock_token(text: str) -> tuple[int, int] | None:
    """(hour, minute) of "07:45", "9:45" ("7.45" is not one: a decimal). An hour written
    with a leading zero is a 24-hour time: it comes back marked (plus ``TWENTY_FOUR``),
    so that :func:`clock_readings` never reads it as 7:45 pm too."""
    hour, sep, minute = text.partition(":")
    if not sep or not hour.isdecimal() or not minute[:2].isdecimal() or len(hour) > 2:
        return None
    h, m = int(hour), int(minute[:2])
    if h >= 24 or m >= 60:
        return None
    return (h + TWENTY_FOUR, m) if len(hour) == 2 and hour[0] == "0" else (h, m)


def numeric_readings(parts: list[int], order: str) -> tuple[date, ...]:
    """Every date the three numbers can be: year first when it is four digits, else the
    locale's order, and the other day/month order when both fit."""
    a, b, c = parts
    candidates: list[tuple[int, int, int]] = []
    if a > 31:
        candidates.append((a, b, c))  # YMD
    else:
        year = c + 2000 if c < 100 else c
        first = (year, a, b) if order.startswith("M") else (year, b, a)
        second = (year, b, a) if order.startswith("M") else (year, a, b)
        candidates += [first, second]
    out = []
    for year, month, day in candidates:
        try:
            out.append(date(year, month, day))
        except ValueError:
            continue
    return tuple(dict.fromkeys(out))


_MERIDIEMS: Final = frozenset({"am", "pm"})
_RANGE_WORDS: Final = frozenset({"and", "to", "-", "until", "till"})


def split_hour_ranges(pieces: list[str]) -> list[str]:
    """ "8am-6pm" -> "8am", "-", "6pm" (a date such as "2026-04-29" stays whole)."""
    out: list[str] = []
    for piece in pieces:
        parts = piece.split("-")
        if len(parts) == 2 and any(p.lower().rstrip(".,;)").endswith(("am", "pm")) for p in parts):
            out += [parts[0], "-", parts[1]]
        else:
            out.append(piece)
    return out


def meridiem_hours(pieces: Sequence[str], index: int) -> tuple[tuple[int, int], ...]:
    """ "9 pm", "9pm", "9:30pm", and the first hour of "between 8 and 9 pm": an hour
    dateparser's search passes over, read with the am/pm written after it."""
    core = pieces[index].lower().strip(".,;:()[]")
    glued = next((m for m in _MERIDIEMS if core.endswith(m) and core[:-2]), None)
    number = core[:-2] if glued else core
    clock = clock_token(number) if ":" in number else None
    if clock is None and not (number.isdecimal() and len(number) <= 2 and 1 <= int(number) <= 12):
        return ()
    hour_minute = clock or (int(number), 0)
    if glued:
        return clock_readings([hour_minute], glued)
    after = [p.lower().strip(".,;:()[]").replace(".", "") for p in pieces[index + 1 : index + 4]]
    if after[:1] and after[0] in _MERIDIEMS:
        return clock_readings([hour_minute], after[0])
    if len(after) >= 3 and after[0] in _RANGE_WORDS and after[2] in _MERIDIEMS:
        return clock_readings([hour_minute], after[2])  # "between 8 and 9 pm"
    if len(after) >= 2 and after[0] in _RANGE_WORDS:
        glued_after = next((m for m in _MERIDIEMS if after[1].endswith(m)), None)
        if glued_after and after[1][:-2].replace(":", "").isdecimal():
            return clock_readings([hour_minute], glued_after)  # "8 to 9pm"
    return ()


def clock_readings(
    clocks: Sequence[tuple[int, int]], meridiem: str | None
) -> tuple[tuple[int, int], ...]:
    """The (hour, minute) each clock may be: "7:45 pm" 19:45; "7:45" 07:45 or 19:45;
    "07:45" 07:45 alone."""
    out: list[tuple[int, int]] = []
    for hour, minute in clocks:
        if hour >= TWENTY_FOUR:
            out.append((hour - TWENTY_FOUR, minute))
        elif meridiem is not None and 1 <= hour <= 12:
            pm = meridiem.startswith("p")
            out.append(((hour % 12) + (12 if pm else 0), minute))
        elif hour <= 12 and meridiem is None:
            out += [(hour, minute), ((hour + 12) % 24, minute)]
        else:
            out.append((hour, minute))
    return tuple(dict.fromkeys(out))


def time_range(text: str) -> tuple[time, ...]:
    """ "07:45", "7:45 AM", "09:30-10:00", "9:30 to 10:00": times of day, no date."""
    pieces = text.replace("\u2013", "-").replace(" to ", "-").split("-")
    if not 1 <= len(pieces) <= 2:
        return ()
    out = []
    for piece in pieces:
        piece = piece.strip()
        meridiem = None
        lowered = piece.lower().replace(".", "")
        for mark in ("am", "pm"):
            if lowered.endswith(mark):
                meridiem, piece = mark, piece[: -len(mark)].strip()
        clock = clock_token(piece)
        if clock is None:
            if meridiem is not None and piece.isdecimal() and 1 <= int(piece) <= 12:
                clock = (int(piece), 0)
            else:
                return ()
        hour, minute = clock
        hour = hour - TWENTY_FOUR if hour >= TWENTY_FOUR else hour
        if meridiem is not None and 1 <= hour <= 12:
            hour = hour % 12 + (12 if meridiem == "pm" else 0)
        out.append(time(hour, minute))
    return tuple(out)
