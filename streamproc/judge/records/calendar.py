"""Dates and times as claims write them, and as records store them.

"10 February 2026", "Feb 10th", "Tuesday" and "yesterday" can all name ``2026-02-10``;
"7:45 am" is ``07:45``. Claims are read with ``dateparser`` (its search over a sentence,
in the locale's language, relative words settled against the answer's own time: the
event's ``occurred_at``); records with the standard library's ISO reader first and
``dateparser`` for the rest. Day-month order for numeric dates comes from Babel's short
date pattern of the configured locale, and a numeric date both orders can read
("03/04/2026") matches either.

A mention keeps only what was written: "12 March" says nothing of the year, "on Friday"
only the weekday, "at 9:45" only the time (9:45 or 21:45 when no am/pm is written). A
claim's text is searched only when it carries a date or time word or shape, so sentences
with none cost a scan of their words.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache
from typing import Any, Final

from babel import Locale
from dateparser.date import DateDataParser
from dateparser.languages import default_loader
from dateparser.search import search_dates

from streamproc.judge.text.stems import Word, words

__all__ = ["MAX_DATE_WORDS", "DateMention", "DateReader", "RecordedTime"]

_MAX_FIELD_CHARS: Final = 64
MAX_DATE_WORDS: Final = 12
"""Date and time words read per text: dateparser costs milliseconds a date, and a claim
or a passage naming more dates than this is read up to its twelfth."""
_AFTER_LAST_CUE: Final = 24  # "March" + " 12, 2026 at 9:45 pm"
_PARTS_OF_DAY: Final = {
    "morning": (5, 12), "afternoon": (12, 18), "evening": (17, 23), "night": (18, 30),
    "tonight": (18, 30), "noon": (12, 13), "midday": (12, 13), "midnight": (0, 1),
}  # fmt: skip
_RELATIVE_MARKERS: Final = frozenset({"last", "next", "ago", "coming", "past"})
# Weekday abbreviations no English word shares ("we", "sat", "sun", "wed" are words).
_DAY_ABBREVIATIONS: Final = frozenset({"mon", "tue", "tues", "thu", "thur", "thurs", "fri"})


@dataclass(frozen=True, slots=True)
class RecordedTime:
    """A record's date and/or time: ``day`` when the value has a date, ``clock`` when it
    has a time of day (a bare ``2026-02-10`` has none; nor has midnight written as a
    date-only ISO string)."""

    day: date | None
    clock: tuple[time, ...] = ()


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
        if self.clocks:
            return (clock.hour, clock.minute) in self.clocks
        if self.part_of_day is not None:
            low, high = self.part_of_day
            return low <= clock.hour < high or low <= clock.hour + 24 < high
        return False

    @property
    def shown(self) -> str:
        return self.written.strip()


@dataclass(frozen=True, slots=True)
class _Vocabulary:
    day_phrases: dict[tuple[str, ...], int]  # "day after tomorrow" -> +2
    months: frozenset[str]
    ambiguous_months: frozenset[str]  # "may", "mar": a month only next to a number
    weekdays: dict[str, int]
    relative: frozenset[str]  # single words: today, tomorrow, yesterday, tonight
    day_parts: frozenset[str]
    meridiem: frozenset[str]


_MONTH_KEYS: Final = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
_DAY_KEYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def _vocabulary(language: str) -> _Vocabulary:
    info = default_loader.get_locale(language).info
    month_keys = _MONTH_KEYS
    day_keys = _DAY_KEYS  # in order: the index is the weekday
    months = {m.lower() for key in month_keys for m in info.get(key, [])}
    weekdays = {d.lower(): i for i, key in enumerate(day_keys) for d in info.get(key, [])}
    relative = {
        phrase.lower()
        for phrases in info.get("relative-type", {}).values()
        for phrase in phrases
        if " " not in phrase
    }
    parts = {p.lower() for key in ("morning", "afternoon", "evening", "night") for p in info[key]}
    day_phrases = {}
    for key, phrases in info.get("relative-type", {}).items():
        offset = _day_offset(key)  # "in 2 day" -> 2, "2 day ago" -> -2
        for phrase in phrases:
            if offset is not None and " " in phrase:
                day_phrases[tuple(phrase.lower().split())] = offset
    meridiem = {m.lower().replace(".", "") for key in ("am", "pm") for m in info.get(key, [])}
    common_words = {"may", "mar", "sat", "sun", "wed", "mo", "jun", "jan", "dec", "aug"}
    return _Vocabulary(
        day_phrases,
        frozenset(months),
        frozenset(m for m in months if m in common_words or len(m) <= 3),
        {d: i for d, i in weekdays.items() if len(d) > 3 or d in _DAY_ABBREVIATIONS},
        frozenset(relative - {"now"}) | {"tonight"},
        frozenset(parts) | {"noon", "midnight", "midday"},
        frozenset(meridiem),
    )


def _day_offset(key: str) -> int | None:
    """The offset in days of a dateparser relative-type key ("in 2 day", "2 day ago")."""
    parts = key.split()
    if len(parts) == 3 and parts[0] == "in" and parts[1].isdigit() and parts[2] == "day":
        return int(parts[1])
    if len(parts) == 3 and parts[0].isdigit() and parts[1] == "day" and parts[2] == "ago":
        return -int(parts[0])
    return None


def _date_order(locale: str) -> str:
    """DMY, MDY or YMD from the locale's short date pattern ("dd/MM/y" -> DMY)."""
    pattern = Locale.parse(locale).date_formats["short"].pattern
    order = sorted((pattern.find(c), c) for c in "dMy" if pattern.find(c) >= 0)
    return "".join({"d": "D", "M": "M", "y": "Y"}[c] for _, c in order) or "MDY"


def _numeric_date(text: str) -> list[int] | None:
    """The three numbers of "2026-02-10", "10/02/2026", "10.02.26"; None otherwise."""
    for separator in "-/.":
        parts = text.split(separator)
        if len(parts) == 3 and all(p.isdigit() and 1 <= len(p) <= 4 for p in parts):
            return [int(p) for p in parts]
    return None


def _clock_token(text: str) -> tuple[int, int] | None:
    """(hour, minute) of "07:45", "9:45" ("7.45" is not one: a decimal). An hour written
    with a leading zero is a 24-hour time: it comes back marked (plus ``_TWENTY_FOUR``),
    so that :func:`_clock_readings` never reads it as 7:45 pm too."""
    hour, sep, minute = text.partition(":")
    if not sep or not hour.isdigit() or not minute[:2].isdigit() or len(hour) > 2:
        return None
    h, m = int(hour), int(minute[:2])
    if h >= 24 or m >= 60:
        return None
    return (h + _TWENTY_FOUR, m) if len(hour) == 2 and hour[0] == "0" else (h, m)


class DateReader:
    """Reads dates and times in one locale's language and conventions."""

    def __init__(self, locale: str = "en_US") -> None:
        language = Locale.parse(locale).language
        try:
            self._vocabulary = _vocabulary(language)
        except (KeyError, ValueError):
            language = "en"
            self._vocabulary = _vocabulary(language)
        self.languages = [language]
        self.date_order = _date_order(locale)

    # -- claims -------------------------------------------------------------------------

    def mentions(self, text: str, now: datetime) -> list[DateMention]:
        """The dates and times ``text`` writes, relative words read against ``now``."""
        tokens = list(words(text))
        cues = self._cues(tokens)
        base = now.replace(tzinfo=None)
        settings = {
            "RELATIVE_BASE": base,
            "RETURN_AS_TIMEZONE_AWARE": False,
            "DATE_ORDER": self.date_order,
            "PREFER_DATES_FROM": "current_period",
        }
        found: list[tuple[str, datetime]] = []
        if cues:  # words dateparser must read; numeric forms are read below without it
            searched = text[: cues[min(len(cues), MAX_DATE_WORDS) - 1] + _AFTER_LAST_CUE]
            try:
                found = search_dates(searched, languages=self.languages, settings=settings) or []
            except (ValueError, OverflowError, TypeError, KeyError, IndexError):
                found = []  # a text dateparser cannot search: its numeric forms still count
        out = []
        at = 0
        for written, parsed in found:
            start = text.find(written, at)
            if start < 0:
                continue
            at = start + len(written)
            mention = self._mention(text, start, at, parsed, base)
            if mention is not None:
                out.append(mention)
        out += self._missed_days(text, tokens, out, settings, base)
        out += self._numeric_forms(text, out)
        return sorted(out, key=lambda m: m.start)

    def _numeric_forms(self, text: str, found: Sequence[DateMention]) -> list[DateMention]:
        """Numeric dates and clock times the search passed over (it gives up on a text
        with codes such as "AX-27-QP" in it): "2026-04-29", "29/04/2026", "08:00"."""
        out: list[DateMention] = []
        pieces = _split_hour_ranges(text.split())
        at = 0
        for index, piece in enumerate(pieces):
            start = text.find(piece, at)
            at = start + len(piece)
            core = piece.strip(".,;:()[]")
            begin = start + piece.find(core)
            hours = _meridiem_hours(pieces, index)
            if hours and not any(m.start <= begin < m.end and m.clocks for m in found):
                out.append(DateMention(begin, begin + len(core), core, clocks=hours))
                continue
            if any(m.start <= begin < m.end for m in found):
                continue
            numeric = _numeric_date(core)
            if numeric is not None:
                days = _numeric_readings(numeric, self.date_order)
                if days:
                    out.append(DateMention(begin, begin + len(core), core, days=days))
                continue
            clock = _clock_token(core)
            if clock is not None:
                following = (
                    pieces[index + 1].lower().strip(".,;") if index + 1 < len(pieces) else ""
                )
                meridiem = (
                    following.replace(".", "")
                    if following.replace(".", "") in {"am", "pm"}
                    else None
                )
                readings = _clock_readings([clock], meridiem)
                out.append(DateMention(begin, begin + len(core), core, clocks=readings))
        return out

    def _missed_days(
        self,
        text: str,
        tokens: Sequence[Word],
        found: Sequence[DateMention],
        settings: dict[str, Any],
        base: datetime,
    ) -> list[DateMention]:
        """Day-and-month pairs the search passed over ("Tuesday, 2 June" gives it only
        "Tuesday"): the month word with its neighbours, parsed on their own."""
        vocabulary = self._vocabulary
        out: list[DateMention] = []
        tried = 0
        for index, token in enumerate(tokens):
            if token.lower not in vocabulary.months or not _next_to_number(tokens, index):
                continue
            if len(found) + tried >= MAX_DATE_WORDS:
                break  # as many dates as a text is read for
            tried += 1
            if any(m.start <= token.start < m.end for m in (*found, *out)):
                continue
            first = max(0, index - 1)
            last = min(len(tokens) - 1, index + 2)
            while last > index and not tokens[last].text[:1].isdigit():
                last -= 1
            start, end = tokens[first].start, tokens[last].end
            data = _parser(self.languages[0], self.date_order, base).get_date_data(text[start:end])
            if data.date_obj is not None:
                mention = self._mention(text, start, end, data.date_obj, base)
                if mention is not None:
                    out.append(mention)
        return out

    def _cues(self, tokens: Sequence[Word]) -> list[int]:
        """Where the date and time words end (month and day names, "yesterday", "pm"):
        only a text with one is searched, and at most ``MAX_DATE_WORDS`` of them."""
        vocabulary = self._vocabulary
        out = []
        for index, token in enumerate(tokens):
            lower = token.lower
            if (
                lower in vocabulary.weekdays
                or lower in vocabulary.relative
                or lower in vocabulary.day_parts
                or lower in vocabulary.meridiem
                or (
                    lower in vocabulary.months
                    and (lower not in vocabulary.ambiguous_months or _next_to_number(tokens, index))
                )
            ):
                out.append(token.end)
        return out

    def _mention(
        self, text: str, start: int, end: int, parsed: datetime, base: datetime
    ) -> DateMention | None:
        span = text[start:end]
        first = span.split(maxsplit=1)
        if (  # "DY 1062 on 22 July": an id before the date
            len(first) == 2
            and first[0].isdigit()
            and len(first[0]) > 2
            and not 1900 <= int(first[0]) <= 2200
        ):
            start = end - len(first[1])
            span = text[start:end]
        tokens = list(words(span))
        vocabulary = self._vocabulary
        lowers = [t.lower for t in tokens]
        raw = span.split()
        numeric = [n for piece in raw if (n := _numeric_date(piece.strip(".,;:()"))) is not None]
        clocks = [c for piece in raw if (c := _clock_token(piece.strip(".,;()"))) is not None]
        months = [
            i
            for i, w in enumerate(lowers)
            if w in vocabulary.months
            and (w not in vocabulary.ambiguous_months or _next_to_number(tokens, i))
        ]
        weekday = next((vocabulary.weekdays[w] for w in lowers if w in vocabulary.weekdays), None)
        meridiem = next((w for w in lowers if w in vocabulary.meridiem), None)
        part = next((_PARTS_OF_DAY[w] for w in lowers if w in _PARTS_OF_DAY), None)
        relative = (
            any(w in vocabulary.relative for w in lowers)
            or (
                any(w in _RELATIVE_MARKERS for w in lowers)
                and (weekday is not None or "ago" in lowers or "week" in lowers)
            )
            or (part is not None and "this" in lowers)  # "this morning"
        )
        if not (numeric or clocks or months or weekday is not None or relative or part):
            return None  # "8 and 12", "4500017311": dateparser's reading, no date written
        if (
            weekday is not None
            and not (numeric or months or relative)
            and _in_day_range(text, start, self._vocabulary)
        ):
            return None  # "Monday to Friday from 8am": opening hours, no date
        if meridiem is not None and not clocks:
            hour = next((int(w) for w in lowers if w.isdigit() and 1 <= int(w) <= 12), None)
            if hour is not None:
                clocks = [(hour, 0)]
        readings = _clock_readings(clocks, meridiem)
        days: tuple[date, ...] = ()
        month_days: tuple[tuple[int, int], ...] = ()
        month_year = None
        if numeric:
            days = _numeric_readings(numeric[0], self.date_order)
        elif relative:
            days = (self._relative_day(lowers, base) or parsed.date(),)
            weekday = None
        elif months:
            year = _written_year(lowers, parsed.year)
            day_written = any(
                w.rstrip("stndrh").isdigit() and 1 <= int(w.rstrip("stndrh")) <= 31
                for w in lowers
                if w[:1].isdigit() and len(w) <= 4 and not (len(w) == 4 and w.isdigit())
            )
            if day_written:
                if year is not None:
                    days = (parsed.date(),)
                else:
                    month_days = ((parsed.month, parsed.day),)
            elif year is not None:
                month_year = (parsed.month, year)
        if relative and part is not None and not readings:
            pass  # "this morning": the day and a part of it
        elif part is not None and readings:
            part = None  # a written time says more than "in the morning"
        return DateMention(
            start=start,
            end=end,
            written=span,
            days=days,
            month_days=month_days,
            month_year=month_year,
            weekday=weekday,
            clocks=readings,
            part_of_day=part,
            relative=relative,
        )

    def _relative_day(self, lowers: Sequence[str], base: datetime) -> date | None:
        """ "the day after tomorrow": read from the language's own phrases, which the
        search reads as "tomorrow" when it splits the phrase."""
        for phrase, offset in self._vocabulary.day_phrases.items():
            width = len(phrase)
            if any(tuple(lowers[i : i + width]) == phrase for i in range(len(lowers) - width + 1)):
                return (base + timedelta(days=offset)).date()
        return None

    # -- records ------------------------------------------------------------------------

    def recorded(self, value: Any) -> RecordedTime | None:
        """A record value as a date and/or time of day; None when it is neither."""
        if not isinstance(value, str):
            return None
        text = value.strip()
        if not text or len(text) > _MAX_FIELD_CHARS or not any(c.isdigit() for c in text):
            return None
        if text.replace(" ", "").isdigit():
            return None  # "4500017311": an id or a count, never a timestamp
        if not (any(c in text for c in ":/-.") or self._names_a_month(text)):
            return None  # "731 De La Guerra Plz": no date written
        return _recorded(text, self.languages[0], self.date_order)

    def _names_a_month(self, text: str) -> bool:
        return any(w.lower in self._vocabulary.months for w in words(text))


def _in_day_range(text: str, start: int, vocabulary: _Vocabulary) -> bool:
    """Is the weekday at ``start`` one end of a range of days ("Monday to Friday",
    "Mon-Fri", "from Tuesday through Saturday")?"""
    around = list(words(text[max(0, start - 24) : start + 28]))
    lowers = [w.lower for w in around]
    days = [i for i, w in enumerate(lowers) if w in vocabulary.weekdays]
    if len(days) < 2:
        return False
    between = lowers[days[0] + 1 : days[-1]]
    return any(w in {"to", "through", "till", "until", "thru"} for w in between) or (
        "-" in text[max(0, start - 24) : start + 28] and days[-1] - days[0] == 1
    )


def _next_to_number(tokens: Sequence[Word], index: int) -> bool:
    """A month word beside a day or year number ("May 5", "5 May"), not a code's letters
    ("APR-1220", "MAR2026")."""
    token = tokens[index]
    if token.text.isupper() and len(token.text) <= 4:
        return False
    around = [tokens[i].lower for i in (index - 1, index + 1) if 0 <= i < len(tokens)]
    return any(w[:1].isdigit() for w in around)


def _written_year(lowers: Iterable[str], parsed_year: int) -> int | None:
    """The year a mention writes (four digits in a plausible range), else None."""
    del parsed_year
    for w in lowers:
        if w.isdigit() and len(w) == 4 and 1900 <= int(w) <= 2200:
            return int(w)
    return None


def _numeric_readings(parts: list[int], order: str) -> tuple[date, ...]:
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


_TWENTY_FOUR: Final = 100  # marks an hour written as "06": a 24-hour clock


_MERIDIEMS: Final = frozenset({"am", "pm"})
_RANGE_WORDS: Final = frozenset({"and", "to", "-", "until", "till"})


def _split_hour_ranges(pieces: list[str]) -> list[str]:
    """ "8am-6pm" -> "8am", "-", "6pm" (a date such as "2026-04-29" stays whole)."""
    out: list[str] = []
    for piece in pieces:
        parts = piece.split("-")
        if len(parts) == 2 and any(p.lower().rstrip(".,;)").endswith(("am", "pm")) for p in parts):
            out += [parts[0], "-", parts[1]]
        else:
            out.append(piece)
    return out


def _meridiem_hours(pieces: Sequence[str], index: int) -> tuple[tuple[int, int], ...]:
    """ "9 pm", "9pm", "9:30pm", and the first hour of "between 8 and 9 pm": an hour
    dateparser's search passes over, read with the am/pm written after it."""
    core = pieces[index].lower().strip(".,;:()[]")
    glued = next((m for m in _MERIDIEMS if core.endswith(m) and core[:-2]), None)
    number = core[:-2] if glued else core
    clock = _clock_token(number) if ":" in number else None
    if clock is None and not (number.isdigit() and len(number) <= 2 and 1 <= int(number) <= 12):
        return ()
    hour_minute = clock or (int(number), 0)
    if glued:
        return _clock_readings([hour_minute], glued)
    after = [p.lower().strip(".,;:()[]").replace(".", "") for p in pieces[index + 1 : index + 4]]
    if after[:1] and after[0] in _MERIDIEMS:
        return _clock_readings([hour_minute], after[0])
    if len(after) >= 3 and after[0] in _RANGE_WORDS and after[2] in _MERIDIEMS:
        return _clock_readings([hour_minute], after[2])  # "between 8 and 9 pm"
    if len(after) >= 2 and after[0] in _RANGE_WORDS:
        glued_after = next((m for m in _MERIDIEMS if after[1].endswith(m)), None)
        if glued_after and after[1][:-2].replace(":", "").isdigit():
            return _clock_readings([hour_minute], glued_after)  # "8 to 9pm"
    return ()


def _clock_readings(
    clocks: Sequence[tuple[int, int]], meridiem: str | None
) -> tuple[tuple[int, int], ...]:
    """The (hour, minute) each clock may be: "7:45 pm" 19:45; "7:45" 07:45 or 19:45;
    "07:45" 07:45 alone."""
    out: list[tuple[int, int]] = []
    for hour, minute in clocks:
        if hour >= _TWENTY_FOUR:
            out.append((hour - _TWENTY_FOUR, minute))
        elif meridiem is not None and 1 <= hour <= 12:
            pm = meridiem.startswith("p")
            out.append(((hour % 12) + (12 if pm else 0), minute))
        elif hour <= 12 and meridiem is None:
            out += [(hour, minute), ((hour + 12) % 24, minute)]
        else:
            out.append((hour, minute))
    return tuple(dict.fromkeys(out))


@lru_cache(maxsize=8_192)
def _recorded(text: str, language: str, order: str) -> RecordedTime | None:
    iso = text.replace("Z", "+00:00") if text.endswith("Z") else text
    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        moment = None
    if moment is not None:
        has_clock = len(text) > 10 and any(c in text[10:] for c in ":T")
        return RecordedTime(
            moment.date(), (moment.time().replace(tzinfo=None),) if has_clock else ()
        )
    clocks = _time_range(text)
    if clocks:
        return RecordedTime(None, clocks)
    data = _parser(language, order, None).get_date_data(text)
    if data.date_obj is None:
        return None
    moment = data.date_obj
    has_clock = any(c in text for c in ":") or data.period == "time"
    return RecordedTime(moment.date(), (moment.time(),) if has_clock else ())


@lru_cache(maxsize=64)
def _parser(language: str, order: str, base: datetime | None) -> DateDataParser:
    """A parser for one language and day order; with ``base``, missing parts (the year)
    come from it, without, a record's value must be a whole date."""
    settings: dict[str, Any] = {"RETURN_AS_TIMEZONE_AWARE": False, "DATE_ORDER": order}
    if base is None:
        settings["STRICT_PARSING"] = True
    else:
        settings["RELATIVE_BASE"] = base
    return DateDataParser(languages=[language], settings=settings)


def _time_range(text: str) -> tuple[time, ...]:
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
        clock = _clock_token(piece)
        if clock is None:
            if meridiem is not None and piece.isdigit() and 1 <= int(piece) <= 12:
                clock = (int(piece), 0)
            else:
                return ()
        hour, minute = clock
        hour = hour - _TWENTY_FOUR if hour >= _TWENTY_FOUR else hour
        if meridiem is not None and 1 <= hour <= 12:
            hour = hour % 12 + (12 if meridiem == "pm" else 0)
        out.append(time(hour, minute))
    return tuple(out)
