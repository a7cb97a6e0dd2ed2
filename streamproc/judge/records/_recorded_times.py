"""A record's value as a date and/or time: the standard library's ISO reader first, a bare
time of day or range of them next, then a strict dateparser parser (cached per
language, day order and base)."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateparser.date import DateDataParser

from streamproc.judge.records._numeric_forms import time_range
from streamproc.judge.records.dates import RecordedTime

__all__ = ["date_parser", "read_recorded"]


@lru_cache(maxsize=8_192)
def read_recorded(text: str, language: str, order: str) -> RecordedTime | None:
    text, zone = _split_zone_name(text)
    iso = text.replace("Z", "+00:00") if text.endswith("Z") else text
    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        moment = None
    if moment is not None:
        has_clock = len(text) > 10 and any(c in text[10:] for c in ":T")
        if zone is not None and moment.tzinfo is None:
            moment = moment.replace(tzinfo=zone)
        return RecordedTime(
            moment.date(),
            (moment.time().replace(tzinfo=None),) if has_clock else (),
            moment if has_clock else None,
        )
    clocks = time_range(text)
    if clocks:
        return RecordedTime(None, clocks)
    if _dotted(text):
        order = "DMY"  # "05.06.2026": dots are written day first wherever they are used
    data = date_parser(language, order, None).get_date_data(text)
    if data.date_obj is None:
        return None
    moment = data.date_obj
    has_clock = any(c in text for c in ":") or data.period == "time"
    return RecordedTime(
        moment.date(), (moment.time(),) if has_clock else (), moment if has_clock else None
    )


def _split_zone_name(text: str) -> tuple[str, ZoneInfo | None]:
    """ "2026-05-19 23:47 Europe/London": the local time written, and its zone."""
    head, _, last = text.rpartition(" ")
    if not head or "/" not in last:
        return text, None
    try:
        return head, ZoneInfo(last)
    except (ZoneInfoNotFoundError, ValueError):
        return text, None


def _dotted(text: str) -> bool:
    parts = text.split(".")
    return len(parts) == 3 and all(p.isdecimal() for p in parts) and len(parts[2]) == 4


@lru_cache(maxsize=64)
def date_parser(language: str, order: str, base: datetime | None) -> DateDataParser:
    """A parser for one language and day order; with ``base``, missing parts (the year)
    come from it, without, a record's value must be a whole date."""
    settings: dict[str, Any] = {"RETURN_AS_TIMEZONE_AWARE": False, "DATE_ORDER": order}
    if base is None:
        settings["STRICT_PARSING"] = True
    else:
        settings["RELATIVE_BASE"] = base
    return DateDataParser(languages=[language], settings=settings)
