"""A date or time as a claim writes it (:class:`DateMention`, only the parts written) and
as a record stores it (:class:`RecordedTime`); :mod:`.calendar` reads both."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time

__all__ = ["DateMention", "RecordedTime"]


@dataclass(frozen=True, slots=True)
class RecordedTime:
    """A record's date and/or time: ``day`` when the value has a date, ``clock`` when it
    has a time of day (a bare ``2026-02-10`` has none; nor has midnight written as a
    date-only ISO string)."""

    day: date | None
    clock: tuple[time, ...] = ()
    moment: datetime | None = None  # day and clock together, with its offset if written


@dataclass(frozen=True, slots=True)
class DateMention:
    """One date or time a claim writes, with only the parts it writes."""

    start: int
    end: int
    written: str
    days: tuple[date, ...] = ()
    """Whole dates (relative words, or a full date): any of them may be meant."""
    month_days: tuple[tuple[int, int], ...] = ()
    """(month, day) without a year."""
    month_year: tuple[int, int] | None = None
    weekday: int | None = None
    clocks: tuple[tuple[int, int], ...] = ()
    """(hour, minute) readings; two for a 12-hour time without am/pm."""
    part_of_day: tuple[int, int] | None = None
    relative: bool = False

    @property
    def has_date(self) -> bool:
        return bool(self.days or self.month_days or self.month_year or self.weekday is not None)

    @property
    def has_time(self) -> bool:
        return bool(self.clocks or self.part_of_day)

    def date_matches(self, day: date) -> bool:
        """Is ``day`` this mention's date, by every part it writes ("Friday 12 March" is
        no Thursday 12 March)?"""
        if self.weekday is not None and day.weekday() != self.weekday:
            return False
        if self.days:
            return day in self.days
        if self.month_days:
            return (day.month, day.day) in self.month_days
        if self.month_year is not None:
            return (day.month, day.year) == self.month_year
        return self.weekday is not None

    def time_matches(self, clock: time) -> bool:
        if (clock.hour, clock.minute) == (23, 59) and self._matches(time(0, 0)):
            return True  # "until 23:59:59" is "until midnight"
        return self._matches(clock)

    def _matches(self, clock: time) -> bool:
        if self.clocks:
            return (clock.hour, clock.minute) in self.clocks
        if self.part_of_day is not None:
            low, high = self.part_of_day
            return low <= clock.hour < high or low <= clock.hour + 24 < high
        return False

    @property
    def shown(self) -> str:
        return self.written.strip()
