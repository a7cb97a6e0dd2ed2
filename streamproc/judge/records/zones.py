"""Recorded moments read in the time zones a claim or the records name: "9:30 Berlin
time, which is 3:30 pm in Singapore" against ``2026-04-15T09:30:00+02:00``.

Zone names come from the IANA database (:mod:`zoneinfo`, with the ``tzdata`` package
where the system has none): a claim's word or pair of words that is a zone's city
("Tokyo", "New York", "Singapore"), and a record's value that is a whole zone key
("Europe/London"). A moment recorded with its offset is read in each of them; one
recorded without is read as the records' own zone's local time first."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from streamproc.judge.text.name_forms import fold
from streamproc.judge.text.stems import words

__all__ = ["zone_of", "zoned_moments", "zones_named"]

_MAX_ZONES: Final = 4  # zones a claim and its records name that are tried


@lru_cache(maxsize=1)
def _zone_keys() -> frozenset[str]:
    """The IANA database's keys, listed once: asking :class:`ZoneInfo` for a key it does
    not hold searches the disk, and most record values are no zone."""
    return frozenset(available_timezones())


@lru_cache(maxsize=1)
def _cities() -> dict[str, str]:
    """The last part of each zone key, as a claim writes it: "new york" -> America/New_York."""
    out: dict[str, str] = {}
    for key in sorted(_zone_keys()):
        city = fold(key.rsplit("/", 1)[-1].replace("_", " "))
        out.setdefault(city, key)
    out["utc"] = out["gmt"] = "UTC"
    return out


def zones_named(text: str) -> list[ZoneInfo]:
    """The zones whose city (or UTC) a claim writes, in order."""
    pieces = [fold(w.text) for w in words(text)]
    cities = _cities()
    found: list[str] = []
    for index, piece in enumerate(pieces):
        pair = " ".join(pieces[index : index + 2])
        for name in (pair, piece):
            if name in cities and name[:1].isalpha() and len(name) > 2:
                found.append(cities[name])
                break
    return [ZoneInfo(key) for key in dict.fromkeys(found)][:_MAX_ZONES]


def zone_of(value: object) -> ZoneInfo | None:
    """A record value that is a whole zone key ("Europe/London", "UTC")."""
    if not isinstance(value, str) or value not in _zone_keys():
        return None
    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):  # a key listed but its file unreadable
        return None


def zoned_moments(
    moments: Iterable[datetime], held: Sequence[ZoneInfo], named: Sequence[ZoneInfo]
) -> list[datetime]:
    """Each recorded moment as the clock reads in the named zones and the records' own;
    one written without an offset is taken to be in the records' zone, if they name one."""
    zones = list(dict.fromkeys([*named, *held]))[:_MAX_ZONES]
    if not zones:
        return []
    out = []
    for moment in moments:
        if moment.tzinfo is None and not held:
            continue  # a local time of no known zone: nothing to convert from
        aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=held[0])
        out += [aware.astimezone(zone).replace(tzinfo=None) for zone in zones]
    return out
