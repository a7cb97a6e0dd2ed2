"""A claim's dates and times against the recorded ones: by the parts written, times as
12- or 24-hour readings; a recorded day or time moved by a period the claim or the
evidence names, a day inside a recorded span, the fields the words before a date name
(DATE_MISMATCH, TIME_MISMATCH). Also which of a claim's dates are read at all: a weekly
rule ("every Tuesday") or a bare relative day ("today") may not be a date to check."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, datetime, time, timedelta
from typing import Final, TypeVar

from streamproc.judge.records._value_findings import (
    Scope,
    ValueFindings,
    mismatch,
    nearest,
    own_keys,
    scope,
)
from streamproc.judge.records.case_facts import CaseFacts, FieldRef
from streamproc.judge.records.dates import DateMention
from streamproc.judge.records.findings import RecordReason
from streamproc.judge.records.zones import zoned_moments, zones_named
from streamproc.judge.text.features import STOP_WORDS, word_set
from streamproc.judge.text.stems import stem, words

__all__ = ["bare_day", "check_dates", "lead_ins", "recurring"]

_MAX_DAY_CANDIDATES: Final = 4_000


_BARE_DAYS: Final = frozenset(
    {"today", "tomorrow", "yesterday", "tonight", "this morning", "this afternoon",
     "this evening", "later today", "today or tomorrow"}
)  # fmt: skip


def bare_day(mention: DateMention) -> bool:
    """ "today", "from tomorrow": a relative day with no date or time written."""
    words_ = [w for w in mention.written.lower().split() if w not in {"from", "by", "on", "until"}]
    return " ".join(words_) in _BARE_DAYS or (not mention.clocks and not mention.month_days)


_ROUNDING: Final = word_set("about around approximately roughly approx circa")


def _add_business_days(day: date, count: int) -> date:
    step = 1 if count >= 0 else -1
    left = abs(count)
    while left:
        day += timedelta(days=step)
        if day.weekday() < 5:
            left -= 1
    return day


def _candidate_days(
    facts: CaseFacts,
    periods: Iterable[timedelta] = (),
    zoned: Sequence[tuple[date, FieldRef | None]] = (),
    *,
    forecast: bool = True,
) -> list[tuple[date, FieldRef | None]]:
    """Recorded days (and the days of recorded moments in other zones), with ``forecast``
    each moved by a period the evidence names, and recorded moments moved by a period the
    claim writes ("before 3 pm tomorrow, 48 hours before pick-up")."""
    base: list[tuple[date, FieldRef | None]] = [
        (t.day, typed.ref) for t, typed in facts.date_fields() if t.day
    ]
    base += zoned
    out = list(base)
    for t, typed in facts.date_fields():
        for clock in t.clock[:1]:
            if t.day is None:
                continue
            moment = datetime.combine(t.day, clock)
            for period in periods:
                out += [
                    ((moment - period).date(), typed.ref),
                    ((moment + period).date(), typed.ref),
                ]
    days = [d for d in facts.durations if d >= timedelta(days=1) and d.seconds == 0]
    for day, ref in base if forecast else ():
        for period in days:  # an arrival counted from a recorded day, a deadline back
            out += [
                (day + period, ref),
                (_add_business_days(day, period.days), ref),
                (day - period, ref),
            ]
        if len(out) > _MAX_DAY_CANDIDATES:
            break
    return out


_MAX_SPAN_DAYS: Final = 31


def _days_between(facts: CaseFacts) -> list[tuple[date, FieldRef | None]]:
    """The days inside a span one object records (``arrival`` 16 October, ``departure``
    19 October: "no twin rooms for Friday and Saturday night"), for spans of a month at
    most. Read for a bare weekday only: a dated claim inside a stay names its own day."""
    by_scope: dict[Scope, list[tuple[date, FieldRef]]] = {}
    for recorded, typed in facts.date_fields():
        if recorded.day is not None:
            by_scope.setdefault(scope(typed.ref), []).append((recorded.day, typed.ref))
    out: list[tuple[date, FieldRef | None]] = []
    for days in by_scope.values():
        if len(days) < 2:
            continue
        (first, ref), (last, _) = min(days, key=lambda d: d[0]), max(days, key=lambda d: d[0])
        span = (last - first).days
        if 1 < span <= _MAX_SPAN_DAYS:
            out += [(first + timedelta(days=n), ref) for n in range(1, span)]
        if len(out) > _MAX_DAY_CANDIDATES:
            break
    return out


def _candidate_clocks(
    facts: CaseFacts,
    periods: Iterable[timedelta],
    zoned: Sequence[tuple[time, FieldRef | None]] = (),
) -> list[tuple[time, FieldRef | None]]:
    """Recorded times (and those of recorded moments in other zones), each moved by a
    period the claim writes ("held until 10:30 pm, three hours after pick-up")."""
    base: list[tuple[time, FieldRef | None]] = [
        (clock, typed.ref) for t, typed in facts.clock_fields() for clock in t.clock
    ]
    base += zoned
    out = list(base)
    periods = [d for d in periods if d < timedelta(days=1)]
    for clock, ref in base:
        moment = datetime.combine(date(2000, 1, 2), clock)
        for period in periods:
            out += [((moment + period).time(), ref), ((moment - period).time(), ref)]
    return out


def check_dates(
    mentions: Sequence[DateMention],
    facts: CaseFacts,
    stems: frozenset[str],
    result: ValueFindings,
    periods: Iterable[timedelta] = (),
    claim: str = "",
    lead_ins: dict[int, frozenset[str]] | None = None,
) -> None:
    """Each date and time against the recorded ones. Where the words leading into it
    name date fields ("arrives" names ``arrival``), only those fields can hold it."""
    cached: dict[
        tuple[bool, bool],
        tuple[list[tuple[date, FieldRef | None]], list[tuple[time, FieldRef | None]]],
    ] = {}
    lead_ins = lead_ins or {}
    zoned = _zoned(facts, claim) if mentions else []
    for mention in mentions:
        lead_in = lead_ins.get(id(mention), frozenset())
        rounds = _rounds(claim, mention)  # "at about 16:01": a time moved by a period
        # a day already past was recorded, not forecast from a policy's "within 5 days"
        past = bool(mention.days) and all(d < facts.now.date() for d in mention.days)
        if (rounds, past) not in cached:
            moved = {*periods, *facts.durations} if rounds else periods
            cached[rounds, past] = _candidates(facts, moved, zoned, forecast=not past)
        days, clocks = cached[rounds, past]
        if mention.has_date:
            named = _named_times(facts, lead_in, "date")
            day_options = _only(days, named)
            hit = next(((d, ref) for d, ref in day_options if mention.date_matches(d)), None)
            if hit is None and mention.weekday is not None and not mention.month_days:
                # "no rooms for Friday and Saturday night": a weekday inside a stay
                hit = next(
                    ((d, ref) for d, ref in _days_between(facts) if mention.date_matches(d)), None
                )
            if hit is not None:
                if hit[1] is not None:
                    result.confirm(hit[1], mention.shown)
            elif facts.in_text(mention.shown) or (not named and _date_in_texts(mention, facts)):
                result.unconfirmed += 1
            elif facts.date_fields():
                ref = named[0] if named else nearest([t for _, t in facts.date_fields()], stems)
                result.fail(mismatch(RecordReason.DATE_MISMATCH, mention.shown, "date", ref))
        if mention.has_time:
            named = _named_times(facts, lead_in, "time")
            now = (time(facts.now.hour, facts.now.minute), None)  # "a quarter of an hour ago"
            options = _only([*clocks, now] if mention.relative else clocks, named)
            hit_clock = next(((c, ref) for c, ref in options if mention.time_matches(c)), None)
            if hit_clock is not None:
                if hit_clock[1] is not None:
                    result.confirm(hit_clock[1], mention.shown)
            elif not named and _time_in_texts(mention, facts):
                result.unconfirmed += 1
            elif facts.clock_fields():
                ref = named[0] if named else nearest([t for _, t in facts.clock_fields()], stems)
                result.fail(mismatch(RecordReason.TIME_MISMATCH, mention.shown, "time", ref))


_T = TypeVar("_T")


def _only(
    options: Sequence[tuple[_T, FieldRef | None]], named: Sequence[FieldRef]
) -> Sequence[tuple[_T, FieldRef | None]]:
    """The options the named fields (or the answer's own time) give; all without names."""
    if not named:
        return options
    holders = {id(r) for r in named}
    return [(value, ref) for value, ref in options if ref is None or id(ref) in holders]


# Words of a date field's key that say nothing of whose date it is.
_TIME_WORDS: Final = frozenset(
    stem(w)
    for w in word_set(
        "date time at on day days created updated modified timestamp ts utc local when "
        "start end from until by"
    )
)


def _candidates(
    facts: CaseFacts,
    periods: Iterable[timedelta],
    zoned: Sequence[tuple[datetime, FieldRef | None]],
    *,
    forecast: bool = True,
) -> tuple[list[tuple[date, FieldRef | None]], list[tuple[time, FieldRef | None]]]:
    days = [(m.date(), ref) for m, ref in zoned]
    clocks = [(m.time(), ref) for m, ref in zoned]
    return (
        _candidate_days(facts, periods, days, forecast=forecast),
        _candidate_clocks(facts, periods, clocks),
    )


def _zoned(facts: CaseFacts, claim: str) -> list[tuple[datetime, FieldRef | None]]:
    """Recorded moments read in the zones the claim names ("3:30 pm in Singapore") and
    the records' own ("tz": "Europe/London")."""
    named = zones_named(claim) if claim else []
    if not (named or facts.zones):
        return []
    return [
        (moment, typed.ref)
        for t, typed in facts.times
        if t.moment is not None
        for moment in zoned_moments([t.moment], facts.zones, named)
    ]


def _rounds(claim: str, mention: DateMention) -> bool:
    """Is the date written as an estimate ("at about 16:01", "around 9")?"""
    near = {w.lower() for w in claim[: mention.start].split()[-2:]}
    return bool(near & _ROUNDING or {w.lower for w in words(mention.written)} & _ROUNDING)


_RECURRENCE: Final = word_set("every each")


def recurring(claim: str, mention: DateMention) -> bool:
    """ "We pay claims every Tuesday": a weekly rule, not a date."""
    before = claim[: mention.start].split()[-1:]
    return bool(before) and before[0].lower() in _RECURRENCE


_CLAUSE_BREAKS: Final = frozenset({",", ";", ":", "and", "but", "or", "while", "when", "then"})


def lead_ins(claim: str, mentions: Sequence[DateMention]) -> dict[int, frozenset[str]]:
    """Each date's lead-in; a date that follows another ("arrive tomorrow, Tuesday 23
    June, at 9:30 am") shares the first one's."""
    out: dict[int, frozenset[str]] = {}
    lead_in: frozenset[str] = frozenset()
    end = -1
    for mention in mentions:
        between = set(claim[end : mention.start].replace(",", " ").split()) if end >= 0 else None
        if not (lead_in and between is not None and between <= {"at", "on", "from"}):
            lead_in = _lead_in(claim, mention)
        out[id(mention)] = lead_in
        end = mention.end
    return out


def _lead_in(claim: str, mention: DateMention) -> frozenset[str]:
    """The stems of the words that lead into a date in its own clause: "the shuttle runs
    from" of "the shuttle runs from 6:30 am"."""
    out: list[str] = []
    for word in reversed(claim[: mention.start].replace(",", " , ").split()[-5:]):
        if word.lower() in _CLAUSE_BREAKS:
            break
        word = word.lower().strip(".;:()'\"")
        if word not in STOP_WORDS:
            out.append(stem(word))
    return frozenset(out)


# Keys every date field has: they name no particular date.
_DATE_WORDS: Final = frozenset(stem(w) for w in word_set("date time at on day ts timestamp"))
_PREFIX: Final = 5  # "deliver" and "delivery" stem apart; their first letters agree


def names_a_date_key(stems: frozenset[str], facts: CaseFacts) -> bool:
    """Does the claim name a recorded date by its key ("its due date is tomorrow")?"""
    keys = {k for _, typed in facts.times for k in own_keys(typed.ref)} - _DATE_WORDS
    return any(
        said == key or (min(len(said), len(key)) >= _PREFIX and said[:_PREFIX] == key[:_PREFIX])
        for said in stems
        for key in keys
    )


# Date keys written as the trade's abbreviations: "eta" is an arrival.
_ABBREVIATED: Final = {
    "eta": frozenset({"arriv"}), "ata": frozenset({"arriv"}),
    "etd": frozenset({"depart"}), "atd": frozenset({"depart"}),
}  # fmt: skip


def _spelled_out(keys: frozenset[str]) -> frozenset[str]:
    return keys.union(*(_ABBREVIATED.get(k, frozenset()) for k in keys))


def _named_times(facts: CaseFacts, stems: frozenset[str], kind: str) -> list[FieldRef]:
    """The date (or time) fields the words before a date name: "the shuttle runs from
    6:30" names ``shuttle.first_departure``, "completed yesterday" ``completed_at``."""
    wanted = stems - _TIME_WORDS
    return [
        typed.ref
        for recorded, typed in facts.times
        if wanted & _spelled_out(own_keys(typed.ref) - _TIME_WORDS)
        and (recorded.day is not None if kind == "date" else bool(recorded.clock))
    ]


def _date_in_texts(mention: DateMention, facts: CaseFacts) -> bool:
    """A date the evidence writes as text, or a refused call asked about."""
    if any(t.day is not None and mention.date_matches(t.day) for t in facts.refused_times):
        return True
    texts = facts.text_dates()
    if facts.text_dates_capped:
        return True  # not all of the evidence was read: unknown, never a mismatch
    return any(
        bool(other.days) and any(mention.date_matches(d) for d in other.days) for other in texts
    )


def _time_in_texts(mention: DateMention, facts: CaseFacts) -> bool:
    if any(mention.time_matches(c) for t in facts.refused_times for c in t.clock):
        return True
    texts = facts.text_dates()
    if facts.text_dates_capped:
        return True
    return any(any(mention.time_matches(time(h, m)) for h, m in other.clocks) for other in texts)
