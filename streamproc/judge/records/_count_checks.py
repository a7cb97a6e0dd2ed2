"""A claim's counts against the records' quantities: the fields named like the thing
counted, the record's totals, remainders and differences of its numbers
(COUNT_MISMATCH)."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Final

from streamproc.judge.records._value_findings import ValueFindings, mismatch
from streamproc.judge.records.case_facts import CaseFacts, Typed
from streamproc.judge.records.claim_values import CountValue
from streamproc.judge.records.findings import RecordReason
from streamproc.judge.records.value_parse import number_word
from streamproc.judge.text.features import word_set
from streamproc.judge.text.stems import stem, words

__all__ = ["check_counts"]

# Keys of a record's totals: "3,410 points" may be its balance, not one transaction's.
_TOTAL_KEYS: Final = frozenset(
    stem(w) for w in word_set("balance available total remaining left count number quantity sum")
)


def check_counts(
    counts: Sequence[CountValue], facts: CaseFacts, deeds: frozenset[str], result: ValueFindings
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
                    mismatch(RecordReason.COUNT_MISMATCH, count.written, "count", left[0].ref)
                )
                continue
            if count.remainder and _derivable(count, facts):  # 27 seats, 22 names: 5 more
                result.unconfirmed += 1
                continue
            if _count_in_texts(count, facts) or _difference(count, named, facts):
                result.unconfirmed += 1
                continue
            result.fail(mismatch(RecordReason.COUNT_MISMATCH, count.written, "count", named[0].ref))
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
            result.fail(mismatch(RecordReason.COUNT_MISMATCH, count.written, "count", nearest.ref))
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
            result.fail(mismatch(RecordReason.COUNT_MISMATCH, count.written, "count", nearest.ref))


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
    """A text writes the number of the same things ("up to 3 bags", "three bags"): a
    policy's "within 5 working days" excuses no "five items"."""
    for text in facts.texts:
        pieces = list(words(text))
        for index, piece in enumerate(pieces):
            said = piece.lower
            number = Decimal(said) if said.isdecimal() else number_word(said)
            if number is None or number != count.value:
                continue
            after = {stem(p.lower) for p in pieces[index + 1 : index + 4]}
            if not count.nouns or after & count.nouns:
                return True
    return False
