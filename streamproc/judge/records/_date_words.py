"""The date and time words of one language (month and day names, relative days, parts
of the day, am/pm) from dateparser's locale data, the day-month order of a locale from
Babel, and the readings over words: a month beside a number, a range of weekdays, a
written year."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from babel import Locale
from dateparser.languages import default_loader

from streamproc.judge.text.stems import Word, words

__all__ = [
    "Vocabulary",
    "in_day_range",
    "language_vocabulary",
    "locale_date_order",
    "next_to_number",
    "written_year",
]

# Weekday abbreviations no English word shares ("we", "sat", "sun", "wed" are words).
_DAY_ABBREVIATIONS: Final = frozenset({"mon", "tue", "tues", "thu", "thur", "thurs", "fri"})


@dataclass(frozen=True, slots=True)
class Vocabulary:
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


def language_vocabulary(language: str) -> Vocabulary:
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
    return Vocabulary(
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
    if len(parts) == 3 and parts[0] == "in" and parts[1].isdecimal() and parts[2] == "day":
        return int(parts[1])
    if len(parts) == 3 and parts[0].isdigit() and parts[1] == "day" and parts[2] == "ago":
        return -int(parts[0])
    return None


def locale_date_order(locale: str) -> str:
    """DMY, MDY or YMD from the locale's short date pattern ("dd/MM/y" -> DMY)."""
    pattern = Locale.parse(locale).date_formats["short"].pattern
    order = sorted((pattern.find(c), c) for c in "dMy" if pattern.find(c) >= 0)
    return "".join({"d": "D", "M": "M", "y": "Y"}[c] for _, c in order) or "MDY"


def in_day_range(text: str, start: int, vocabulary: Vocabulary) -> bool:
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


def next_to_number(tokens: Sequence[Word], index: int) -> bool:
    """A month word beside a day or year number ("May 5", "5 May"), not a code's letters
    ("APR-1220", "MAR2026")."""
    token = tokens[index]
    if token.text.isupper() and len(token.text) <= 4:
        return False
    around = [tokens[i].lower for i in (index - 1, index + 1) if 0 <= i < len(tokens)]
    return any(w[:1].isdigit() for w in around)


def written_year(lowers: Iterable[str], parsed_year: int) -> int | None:
    """The year a mention writes (four digits in a plausible range), else None."""
    del parsed_year
    for w in lowers:
        if w.isdecimal() and len(w) == 4 and 1900 <= int(w) <= 2200:
            return int(w)
    return None
