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

What is read comes back as a :mod:`.dates` value. The words of a language are read by
:mod:`._date_words`, dates and times in digits by :mod:`._numeric_forms`, and a record's
value by :mod:`._recorded_times`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any, Final

from babel import Locale
from dateparser.search import search_dates

from streamproc.judge.records._date_words import (
    in_day_range,
    language_vocabulary,
    locale_date_order,
    next_to_number,
    written_year,
)
from streamproc.judge.records._numeric_forms import (
    clock_readings,
    clock_token,
    meridiem_hours,
    numeric_date,
    numeric_readings,
    split_hour_ranges,
)
from streamproc.judge.records._recorded_times import date_parser, read_recorded
from streamproc.judge.records.dates import DateMention, RecordedTime
from streamproc.judge.text.stems import Word, words

__all__ = ["MAX_DATE_WORDS", "DateReader"]

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


class DateReader:
    """Reads dates and times in one locale's language and conventions."""

    def __init__(self, locale: str = "en_US") -> None:
        language = Locale.parse(locale).language
        try:
            self._vocabulary = language_vocabulary(language)
        except (KeyError, ValueError):
            language = "en"
            self._vocabulary = language_vocabulary(language)
        self.languages = [language]
        self.date_order = locale_date_order(locale)

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
            # dateparser finds nothing in "paid last Friday: GBP 300"; a colon before a
            # space (never a clock's) reads as the semicolon it stands for, same length
            searched = searched.replace(": ", "; ")
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
        pieces = split_hour_ranges(text.split())
        at = 0
        for index, piece in enumerate(pieces):
            start = text.find(piece, at)
            at = start + len(piece)
            core = piece.strip(".,;:()[]")
            begin = start + piece.find(core)
            hours = meridiem_hours(pieces, index)
            if hours and not any(m.start <= begin < m.end and m.clocks for m in found):
                out.append(DateMention(begin, begin + len(core), core, clocks=hours))
                continue
            if any(m.start <= begin < m.end for m in found):
                continue
            numeric = numeric_date(core)
            if numeric is not None:
                days = numeric_readings(numeric, self.date_order)
                if days:
                    out.append(DateMention(begin, begin + len(core), core, days=days))
                continue
            clock = clock_token(core)
            if clock is not None:
                following = (
                    pieces[index + 1].lower().strip(".,;") if index + 1 < len(pieces) else ""
                )
                meridiem = (
                    following.replace(".", "")
                    if following.replace(".", "") in {"am", "pm"}
                    else None
                )
                readings = clock_readings([clock], meridiem)
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
            if token.lower not in vocabulary.months or not next_to_number(tokens, index):
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
            data = date_parser(self.languages[0], self.date_order, base).get_date_data(
                text[start:end]
            )
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
                    and (lower not in vocabulary.ambiguous_months or next_to_number(tokens, index))
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
        numeric = [n for piece in raw if (n := numeric_date(piece.strip(".,;:()"))) is not None]
        clocks = [c for piece in raw if (c := clock_token(piece.strip(".,;()"))) is not None]
        months = [
            i
            for i, w in enumerate(lowers)
            if w in vocabulary.months
            and (w not in vocabulary.ambiguous_months or next_to_number(tokens, i))
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
            and in_day_range(text, start, self._vocabulary)
        ):
            return None  # "Monday to Friday from 8am": opening hours, no date
        if meridiem is not None and not clocks:
            at = lowers.index(meridiem)  # "3 November, from 2 pm": the number before "pm"
            before = lowers[at - 1] if at else ""
            if before.isdecimal() and 1 <= int(before) <= 12:
                clocks = [(int(before), 0)]
        readings = clock_readings(clocks, meridiem)
        days: tuple[date, ...] = ()
        month_days: tuple[tuple[int, int], ...] = ()
        month_year = None
        if numeric:
            days = numeric_readings(numeric[0], self.date_order)
        elif relative:
            days = (self._relative_day(lowers, base) or parsed.date(),)
            weekday = None
        elif months:
            year = written_year(lowers, parsed.year)
            day_written = any(
                w.rstrip("stndrh").isdecimal() and 1 <= int(w.rstrip("stndrh")) <= 31
                for w in lowers
                if w[:1].isdigit() and len(w) <= 4 and not (len(w) == 4 and w.isdecimal())
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
        if text.replace(" ", "").isdecimal():
            return None  # "4500017311": an id or a count, never a timestamp
        if not (any(c in text for c in ":/-.") or self._names_a_month(text)):
            return None  # "731 De La Guerra Plz": no date written
        return read_recorded(text, self.languages[0], self.date_order)

    def _names_a_month(self, text: str) -> bool:
        return any(w.lower in self._vocabulary.months for w in words(text))
