"""A claim's typed values against the records' typed fields, one value type at a time.

Each value the claim states (:mod:`.claim_values`) is looked up among the fields of its
type (:mod:`.case_facts`): a field that holds it confirms it; a value the evidence writes
elsewhere (a policy's "EUR 500", the question), or works out from the records (a sum of
two amounts, a recorded date plus a period the evidence names) is no finding; a value
nothing holds, where the records do hold values of its type, is a mismatch with its
reason code: AMOUNT_MISMATCH, IDENTIFIER_MISMATCH, DATE_MISMATCH, TIME_MISMATCH,
COUNT_MISMATCH, NAME_MISMATCH. Comparisons are by type: amounts at the claim's
precision and in its currency, dates by the parts written, times as 12- or 24-hour
readings, identifiers exactly (one transposed digit is another id), names word by word.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Final, TypeVar

from streamproc.contracts.events import VerdictLabel
from streamproc.judge.records.calendar import DateMention
from streamproc.judge.records.case_facts import (
    CaseFacts,
    FieldRef,
    Typed,
    durations,
    name_words,
)
from streamproc.judge.records.claim_values import ClaimValues, CountValue, IdValue, NameValue
from streamproc.judge.records.findings import RecordFinding, RecordReason
from streamproc.judge.records.money import Money
from streamproc.judge.text.features import STOP_WORDS, word_set
from streamproc.judge.text.stems import stem, words

__all__ = ["ValueCheck", "check_values"]

_MAX_DAY_CANDIDATES: Final = 4_000


@dataclass(frozen=True, slots=True)
class ValueCheck:
    mismatch: RecordFinding | None = None
    confirmations: tuple[RecordFinding, ...] = ()
    unconfirmed: int = 0  # values nothing confirmed (found in a text at most)


def _mismatch(
    reason: RecordReason, written: str, kind: str, ref: FieldRef | None, *, held: bool = False
) -> RecordFinding:
    where = f" ({ref.shown})" if ref is not None else ""
    said = (
        f"the records hold {written} in another role or object than the claim gives it"
        if held
        else f"no {kind} of the records holds it"
    )
    return RecordFinding(
        reason,
        VerdictLabel.CONTRADICTED,
        f"claim says {written}, {said}{where}",
        evidence_id=ref.evidence_id if ref else None,
        field=ref.name if ref else None,
        claim_value=written,
        record_value=None if ref is None else str(ref.leaf.value),
    )


def _confirm(ref: FieldRef, written: str) -> RecordFinding:
    return RecordFinding(
        RecordReason.RECORD_CONFIRMED,
        None,
        f"record {ref.evidence_id} {ref.name} confirms {written}",
        evidence_id=ref.evidence_id,
        field=ref.name,
        claim_value=written,
        record_value=str(ref.leaf.value),
    )


def _nearest(candidates: Sequence[Typed], stems: frozenset[str]) -> FieldRef | None:
    """The field to show beside a mismatch: the one whose key shares most with the claim."""
    if not candidates:
        return None
    return max(candidates, key=lambda t: len(t.keys & stems)).ref


_Scope = tuple[str, tuple[str | int, ...]]


def _scope(ref: FieldRef) -> _Scope:
    """The object a field sits in: one record, or one element of a record's list."""
    return ref.evidence_id, tuple(ref.leaf.path[:-1])


class _Result:
    def __init__(self, facts: CaseFacts) -> None:
        self.facts = facts
        self.mismatch: RecordFinding | None = None
        self.confirmations: list[RecordFinding] = []
        # the objects each value of the claim was found in (several where a list's
        # elements share it), and the records its ids name
        self.anchors: list[set[_Scope]] = []
        self.named: set[_Scope] = set()
        self.unconfirmed = 0

    def confirm(self, ref: FieldRef, written: str, *, anchors: bool = True) -> None:
        self.confirmations.append(_confirm(ref, written))
        if anchors:  # a name does not anchor the next: "Mila Novak and Hannah Lind paid"
            self.anchors.append(self.facts.objects_holding(ref.leaf))

    def fail(self, finding: RecordFinding) -> None:
        self.mismatch = self.mismatch or finding


_BARE_DAYS: Final = frozenset(
    {"today", "tomorrow", "yesterday", "tonight", "this morning", "this afternoon",
     "this evening", "later today", "today or tomorrow"}
)  # fmt: skip


def _bare_day(mention: DateMention) -> bool:
    """ "today", "from tomorrow": a relative day with no date or time written."""
    words_ = [w for w in mention.written.lower().split() if w not in {"from", "by", "on", "until"}]
    return " ".join(words_) in _BARE_DAYS or (not mention.clocks and not mention.month_days)


_ROUNDING: Final = word_set("about around approximately roughly approx circa")
# Keys of a record's totals: "3,410 points" may be its balance, not one transaction's.
_TOTAL_KEYS: Final = frozenset(
    stem(w) for w in word_set("balance available total remaining left count number quantity sum")
)


def check_values(
    values: ClaimValues,
    facts: CaseFacts,
    stems: frozenset[str],
    claim: str = "",
    *,
    reports_fact: bool = True,
    promised: Callable[[DateMention], bool] | None = None,
    deeds: frozenset[str] = frozenset(),
) -> ValueCheck:
    """Every typed value of one claim against the records; the first mismatch wins.

    A time may be a recorded one moved by a period the claim writes ("in 30 minutes"),
    or - when the claim rounds ("should open again at about 16:01") - by one the evidence
    writes (a 30-minute lock). A bare relative day ("today") is read only in a claim that
    reports something done or a state ("it was delivered today"), not in advice ("it's
    worth calling them today"). ``deeds`` are the stems of the verbs the claim reports
    done: a count is read against the fields named for them."""
    result = _Result(facts)
    periods = set(durations(claim, offsets=True))
    _ids(values.ids, facts, result)
    _money(values.money, facts, stems, result)
    _counts(values.counts, facts, deeds, result)
    mentions = [
        m
        for m in values.dates
        if not _recurring(claim, m)
        and not (
            m.relative
            and _bare_day(m)
            and (not reports_fact or (promised is not None and promised(m)))
        )
    ]
    _dates(mentions, facts, stems, result, periods, claim, _lead_ins(claim, values.dates))
    _names(values.names, facts, result, claim)
    return ValueCheck(result.mismatch, tuple(result.confirmations), result.unconfirmed)


# -------------------------------------------------------------------------------- ids


def _ids(ids: Sequence[IdValue], facts: CaseFacts, result: _Result) -> None:
    for ident in ids:
        normal = ident.normal
        held = [t for value, t in facts.ids if value == normal]
        if held:
            result.confirm(held[0].ref, ident.written)
            result.anchors[-1].update((t.ref.evidence_id, ()) for t in held)  # the whole call
            result.named.update((record, ()) for record in facts.records_named(normal))
            continue
        if facts.in_text(ident.written) or (len(normal) >= 4 and facts.in_normal_text(normal)):
            result.unconfirmed += 1
            continue
        if normal in facts.refused_values:
            continue  # what a refused call asked for: the refused-call check's to judge
        same_kind = [t for value, t in facts.ids if _same_kind(ident, value, t)]
        if same_kind:
            result.fail(
                _mismatch(RecordReason.IDENTIFIER_MISMATCH, ident.written, "id", same_kind[0].ref)
            )


def _shape(value: str) -> tuple[str, int]:
    letters = ""
    for char in value:
        if not char.isalpha():
            break
        letters += char
    return letters, len(value) - len(letters)


def _same_kind(ident: IdValue, value: str, typed: Typed) -> bool:
    """A field that holds ids of the claim's kind: its key names the kind ("order_id"
    for "order 10442"), or its value has the same shape (letters, then as many digits:
    "RF-2219" beside "RF-2291")."""
    if ident.kind & typed.keys:
        return True
    mine, theirs = _shape(ident.normal), _shape(value)
    return bool(mine[0]) and mine == theirs


# ------------------------------------------------------------------------------ money


def _money(
    amounts: Sequence[tuple[Money, int, int]],
    facts: CaseFacts,
    stems: frozenset[str],
    result: _Result,
) -> None:
    for money, _, _ in amounts:
        known = facts.money_known(money)
        if isinstance(known, FieldRef):
            result.confirm(known, money.written)
        elif known:
            result.unconfirmed += 1
        elif facts.carries_money:
            candidates = [t for _, _, t in facts.money]
            result.fail(
                _mismatch(
                    RecordReason.AMOUNT_MISMATCH, money.written, "amount",
                    _nearest(candidates, stems),
                )
            )  # fmt: skip


# ----------------------------------------------------------------------------- counts


def _counts(
    counts: Sequence[CountValue], facts: CaseFacts, deeds: frozenset[str], result: _Result
) -> None:
    """A count against the fields named like its thing ("2 checked bags" against
    ``checked_bags``; "we've received all eight books" against ``items_received`` where
    the record also has ``items_ordered``); counts of one thing whose siblings a record
    holds ("80 of 100 pieces" beside ``ordered: 100``) against that record's other
    numbers."""
    matched_records = set()
    pending: list[CountValue] = []
    number_of = {id(t): value for value, t in facts.quantities}  # "1,500" read as 1500
    for count in counts:
        named = [t for value, t in facts.quantities if count.nouns & t.keys]
        most = max((len(count.nouns & t.keys) for t in named), default=0)
        named = [t for t in named if len(count.nouns & t.keys) == most]  # "qualifying nights"
        done = [t for t in named if t.keys & deeds] or [  # "all eight books received"
            t for _, t in facts.quantities if t.keys & deeds and not named
        ]
        named = done or named
        hit = next((t for t in named if number_of[id(t)] == count.value), None)
        if hit is not None:
            result.confirm(hit.ref, count.written)
            matched_records.add(hit.ref.record.item.id)
            continue
        if named:
            records = {t.ref.record.item.id for t in named}
            beside = next(
                (t for value, t in facts.quantities
                 if value == count.value and t.ref.record.item.id in records
                 and t.keys & _TOTAL_KEYS),
                None,
            )  # fmt: skip
            if beside is not None:  # "3,410 points" is the record's balance_available
                result.confirm(beside.ref, count.written)
                continue
            left = [t for t in named if t.keys & _REMAINDER_KEYS]
            if count.remainder and left:  # "nine rooms still open" beside roomsRemaining: 8
                result.fail(
                    _mismatch(RecordReason.COUNT_MISMATCH, count.written, "count", left[0].ref)
                )
                continue
            if count.remainder and _derivable(count, facts):  # 27 seats, 22 names: 5 more
                result.unconfirmed += 1
                continue
            if _count_in_texts(count, facts) or _difference(count, named, facts):
                result.unconfirmed += 1
                continue
            result.fail(
                _mismatch(RecordReason.COUNT_MISMATCH, count.written, "count", named[0].ref)
            )
            continue
        pending.append(count)
    for count in pending:  # nothing is named like the thing: read it beside its siblings
        whole = [t for value, t in facts.quantities if value == count.value]
        if whole:
            result.confirm(whole[0].ref, count.written)
            matched_records.add(whole[0].ref.record.item.id)
    for count in pending:
        if count.remainder and not _derivable(count, facts):
            nearest = min(
                (t for _, t in facts.quantities[:_MAX_TERMS]),
                key=lambda t: abs(_number(t.ref.leaf.value) - count.value),
            )
            result.fail(_mismatch(RecordReason.COUNT_MISMATCH, count.written, "count", nearest.ref))
            continue
        siblings = [c for c in pending if c is not count and c.nouns == count.nouns]
        if not siblings or any(value == count.value for value, _ in facts.quantities):
            continue
        if _count_in_texts(count, facts):
            continue
        others = [
            t
            for value, t in facts.quantities
            if t.ref.record.item.id in matched_records
            and value == value.to_integral_value()
            and all(value != s.value for s in siblings)
        ]
        if others:  # shown: the record's number nearest the claim's ("80" beside 90)
            nearest = min(others, key=lambda t: abs(_number(t.ref.leaf.value) - count.value))
            result.fail(_mismatch(RecordReason.COUNT_MISMATCH, count.written, "count", nearest.ref))


_MAX_TERMS: Final = 30  # pairs of a record's numbers tried for a remainder: 435 at most


def _derivable(count: CountValue, facts: CaseFacts) -> bool:
    """ "You need eleven more", "the remaining 3": a remainder is a recorded number, the
    difference of two, or a number the texts write. With fewer than two recorded numbers
    nothing says what remains, and the count passes."""
    if _count_in_texts(count, facts) or any(count.value == v for v, _ in facts.quantities):
        return True
    left = [v for v, t in facts.quantities if t.keys & _REMAINDER_KEYS]
    if left:  # the record says what remains: ``roomsRemaining``, ``backordered_qty``
        return count.value in left
    values = [v for v, t in facts.quantities[:_MAX_TERMS] if not t.keys & _ORDINAL_KEYS]
    if len(values) < 2:
        return True
    return any(count.value == abs(a - b) for i, a in enumerate(values) for b in values[i + 1 :])


_REMAINDER_KEYS: Final = frozenset(
    stem(w) for w in word_set("remaining left outstanding open available backordered pending")
)
_ORDINAL_KEYS: Final = frozenset(stem(w) for w in word_set("n no nr index seq sequence position"))


def _difference(count: CountValue, named: Sequence[Typed], facts: CaseFacts) -> bool:
    """ "3 left" of 8 authorised and 5 used: a sum or difference of the thing's counts."""
    ids = {id(t) for t in named}
    values = [v for v, t in facts.quantities if id(t) in ids][:20]
    return any(
        count.value in (a + b, abs(a - b)) for i, a in enumerate(values) for b in values[i + 1 :]
    )


def _number(value: object) -> Decimal:
    try:
        return Decimal(str(value))
    except ArithmeticError:
        return Decimal(0)


def _count_in_texts(count: CountValue, facts: CaseFacts) -> bool:
    number = str(count.value)
    return any(number in text.split() for text in facts.texts)


# ------------------------------------------------------------------------------ dates


def _add_business_days(day: date, count: int) -> date:
    step = 1 if count >= 0 else -1
    left = abs(count)
    while left:
        day += timedelta(days=step)
        if day.weekday() < 5:
            left -= 1
    return day


def _candidate_days(
    facts: CaseFacts, periods: Iterable[timedelta] = ()
) -> list[tuple[date, FieldRef | None]]:
    """Recorded days, each moved by a period the evidence names, and recorded moments
    moved by a period the claim writes ("before 3 pm tomorrow, 48 hours before pick-up")."""
    base: list[tuple[date, FieldRef | None]] = [
        (t.day, typed.ref) for t, typed in facts.date_fields() if t.day
    ]
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
    for day, ref in base:
        for period in days:  # a deadline or an arrival counted from a recorded day
            out += [(day + period, ref), (_add_business_days(day, period.days), ref)]
        if len(out) > _MAX_DAY_CANDIDATES:
            break
    return out


_MAX_SPAN_DAYS: Final = 31


def _days_between(facts: CaseFacts) -> list[tuple[date, FieldRef | None]]:
    """The days inside a span one object records (``arrival`` 16 October, ``departure``
    19 October: "no twin rooms for Friday and Saturday night"), for spans of a month at
    most. Read for a bare weekday only: a dated claim inside a stay names its own day."""
    by_scope: dict[_Scope, list[tuple[date, FieldRef]]] = {}
    for recorded, typed in facts.date_fields():
        if recorded.day is not None:
            by_scope.setdefault(_scope(typed.ref), []).append((recorded.day, typed.ref))
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
    facts: CaseFacts, periods: Iterable[timedelta]
) -> list[tuple[time, FieldRef | None]]:
    """Recorded times and the answer's own, each moved by a period the claim writes
    ("held until 10:30 pm, three hours after pick-up")."""
    base: list[tuple[time, FieldRef | None]] = [
        (clock, typed.ref) for t, typed in facts.clock_fields() for clock in t.clock
    ]
    out = list(base)
    periods = [d for d in periods if d < timedelta(days=1)]
    for clock, ref in base:
        moment = datetime.combine(date(2000, 1, 2), clock)
        for period in periods:
            out += [((moment + period).time(), ref), ((moment - period).time(), ref)]
    return out


def _dates(
    mentions: Sequence[DateMention],
    facts: CaseFacts,
    stems: frozenset[str],
    result: _Result,
    periods: Iterable[timedelta] = (),
    claim: str = "",
    lead_ins: dict[int, frozenset[str]] | None = None,
) -> None:
    """Each date and time against the recorded ones. Where the words leading into it
    name date fields ("arrives" names ``arrival``), only those fields can hold it."""
    exact: tuple[list[tuple[date, FieldRef | None]], list[tuple[time, FieldRef | None]]] | None
    exact = rounded = None
    lead_ins = lead_ins or {}
    for mention in mentions:
        lead_in = lead_ins.get(id(mention), frozenset())
        if _rounds(claim, mention):  # "at about 16:01": a recorded time moved by a period
            rounded = rounded or _candidates(facts, {*periods, *facts.durations})
            days, clocks = rounded
        else:
            exact = exact or _candidates(facts, periods)
            days, clocks = exact
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
                ref = named[0] if named else _nearest([t for _, t in facts.date_fields()], stems)
                result.fail(_mismatch(RecordReason.DATE_MISMATCH, mention.shown, "date", ref))
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
                ref = named[0] if named else _nearest([t for _, t in facts.clock_fields()], stems)
                result.fail(_mismatch(RecordReason.TIME_MISMATCH, mention.shown, "time", ref))


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
    facts: CaseFacts, periods: Iterable[timedelta]
) -> tuple[list[tuple[date, FieldRef | None]], list[tuple[time, FieldRef | None]]]:
    return _candidate_days(facts, periods), _candidate_clocks(facts, periods)


def _rounds(claim: str, mention: DateMention) -> bool:
    """Is the date written as an estimate ("at about 16:01", "around 9")?"""
    near = {w.lower() for w in claim[: mention.start].split()[-2:]}
    return bool(near & _ROUNDING or {w.lower for w in words(mention.written)} & _ROUNDING)


_RECURRENCE: Final = word_set("every each")


def _recurring(claim: str, mention: DateMention) -> bool:
    """ "We pay claims every Tuesday": a weekly rule, not a date."""
    before = claim[: mention.start].split()[-1:]
    return bool(before) and before[0].lower() in _RECURRENCE


_CLAUSE_BREAKS: Final = frozenset({",", ";", ":", "and", "but", "or", "while", "when", "then"})


def _lead_ins(claim: str, mentions: Sequence[DateMention]) -> dict[int, frozenset[str]]:
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


def _named_times(facts: CaseFacts, stems: frozenset[str], kind: str) -> list[FieldRef]:
    """The date (or time) fields the words before a date name: "the shuttle runs from
    6:30" names ``shuttle.first_departure``, "completed yesterday" ``completed_at``."""
    wanted = stems - _TIME_WORDS
    return [
        typed.ref
        for recorded, typed in facts.times
        if wanted & (_own_keys(typed.ref) - _TIME_WORDS)
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


# ------------------------------------------------------------------------------ names


def _in_another_role(name: NameValue, parts: Sequence[str], facts: CaseFacts) -> Typed | None:
    """A name the records hold, but in another role than the claim gives it: "approved by
    Aoife Brennan" where ``approved_by`` holds someone else and Aoife ``logged_by`` it;
    "our Tilburg store" where Tilburg is where returns are processed and ``dropoffStore``
    names another. The field of the claimed role is returned."""
    role = name.cue - _NO_ROLE
    if not role:
        return None

    def plays(typed: Typed) -> bool:  # "assessor" plays "assessed", "approved_by" "approved"
        return any(k.startswith(r) or r.startswith(k) for k in typed.keys for r in role)

    holding = facts.holding(parts)
    if not holding or any(plays(t) for t in holding):
        return None
    named = {id(t) for _, kind, t in facts.names if kind == name.role}
    held = {id(t) for t in holding}
    claimed = [
        t
        for _, t in facts.strings
        if (id(t) in named or (name.role == "person" and "by" in t.keys))
        and plays(t)
        and id(t) not in held
        and any(c.isupper() for c in str(t.ref.leaf.value))  # a name, not "learner"
    ]
    return claimed[0] if claimed else None


# A cue that names no role: a title, or the preposition before a place ("in Leuven").
_NO_ROLE: Final = frozenset({"title", "to", "from", "at", "in", "via", "into", "near"})
_GENERIC_KEYS: Final = frozenset(stem(w) for w in word_set("name result value data item"))


def _inside(ref: FieldRef, scopes: set[_Scope]) -> bool:
    """Is the field in one of the objects (or an object inside one), or in a record an id
    of the claim names?"""
    record, path = _scope(ref)
    return any((record, path[:depth]) in scopes for depth in range(len(path) + 1))


def _own_keys(ref: FieldRef) -> frozenset[str]:
    """The stems of a field's own key and its parent's (``payees[0].name``: payee), less
    the generic ones."""
    parts = [p for p in ref.leaf.path if isinstance(p, str)][-2:]
    return frozenset(stem(w.lower) for p in parts for w in words(p)) - _GENERIC_KEYS


def _in_another_scope(parts: Sequence[str], facts: CaseFacts, result: _Result) -> Typed | None:
    """A name held elsewhere than an object another value of the claim was read from:
    "the car was checked at pick-up on 15 April by Javier Molina" where the pick-up
    sheet of 15 April names another inspector and Javier inspected the return. That
    object's field of the same kind is returned. A record the claim names by its id
    is never elsewhere."""
    holding = facts.holding(parts)
    if not holding or any(_inside(t.ref, result.named) for t in holding):
        return None
    kinds = frozenset().union(*(_own_keys(t.ref) for t in holding))
    named = {id(t) for _, _, t in facts.names}
    for scopes in result.anchors:
        if any(_inside(t.ref, scopes) for t in holding):
            continue
        same_kind = [
            typed
            for _, typed in facts.strings
            if _scope(typed.ref) in scopes and _own_keys(typed.ref) & kinds
        ]
        if same_kind:
            return min(same_kind, key=lambda t: id(t) not in named)
    return None


_DIRECTION_KEYS: Final = {
    "to": frozenset(stem(w) for w in word_set("to destination dest arrival")),
    "from": frozenset(stem(w) for w in word_set("from origin departure")),
}


def _place_keys(cue: frozenset[str]) -> frozenset[str]:
    """The key words of the field a place cue names: "store" a store's, "to" a
    destination's; "in" or "at" alone name no field ("it lands in Warsaw")."""
    out = set(cue - _NO_ROLE)
    for word in cue & _DIRECTION_KEYS.keys():
        out |= _DIRECTION_KEYS[word]
    return frozenset(out)


def _code(typed: Typed) -> bool:
    """ "WAW", "GRX": a code standing for a place, not its name."""
    value = str(typed.ref.leaf.value).strip()
    return value.isupper() and value.isalpha() and len(value) <= 4


_DENIALS: Final = word_set("not never no nor")


def _denied(name: NameValue, claim: str) -> bool:
    """ "... and not to Thomas Ekdahl": a name the claim rules out."""
    return bool({w.lower for w in list(words(claim[: name.start]))[-3:]} & _DENIALS)


def _names(names: Iterable[NameValue], facts: CaseFacts, result: _Result, claim: str) -> None:
    for name in names:
        parts = name_words(name.written)
        if parts and all(facts.has_word(p) or facts.has_word_like(p) for p in parts):
            held = [t for value, role, t in facts.names if all(p in value for p in parts)]
            wrong_role = None
            if name.role == "any" and not (held or facts.written_whole(parts)):
                continue  # "Rally Bar": capitalised, but no name the records know
            if not _denied(name, claim):
                wrong_role = _in_another_role(name, parts, facts) or _in_another_scope(
                    parts, facts, result
                )
            if wrong_role is not None:
                result.fail(
                    _mismatch(
                        RecordReason.NAME_MISMATCH, name.written, "name", wrong_role.ref, held=True
                    )
                )
            elif held:
                result.confirm(held[0].ref, name.written, anchors=False)
            continue
        if name.role == "any":
            continue
        same_role = [  # names, not addresses ("ul. Dobrego Pasterza 118") or codes ("WAW")
            t
            for value, role, t in facts.names
            if role == name.role and not any(c.isdigit() for c in value) and not _code(t)
        ]
        if name.role == "person" and name.cue - {"title"}:
            same_role = [t for t in same_role if t.keys & name.cue] or same_role
        elif name.role == "place":  # only the field of the place the claim names
            same_role = [t for t in same_role if t.keys & _place_keys(name.cue)]
        if same_role:
            result.fail(
                _mismatch(RecordReason.NAME_MISMATCH, name.written, "name", same_role[0].ref)
            )
