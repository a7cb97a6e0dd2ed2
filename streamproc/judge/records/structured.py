"""Structured evidence compared as values: VALUE_MISMATCH, FIELD_NOT_IN_RECORD.

An NLI model reads "open 11:00 am to 7:00 pm" against "hours Monday: 11:00-17:00" as
near-paraphrase, and "parking on the street or lot" against "lot: no" as entailed by the
street half. A record settles such claims exactly, so the values a claim asserts - hours
and day ranges, yes/no attributes, star ratings, counts, prices and measures, city and
address - are read from it (:mod:`streamproc.judge.records.value_parse`) and compared with the
record's typed fields. Records are parsed once per answer in :meth:`StructuredEvidence.
from_items`; :meth:`StructuredEvidence.compare` runs per claim and returns at once when
the evidence holds no record.

Precision first: an ambiguous claim (hedged, about a review, about the record itself)
yields no finding, since a false VALUE_MISMATCH flags a correct sentence. Ids, order
amounts and order states of "this case" claims are the job of
:mod:`streamproc.judge.records.case_check`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Final

from streamproc.contracts.events import EvidenceItem
from streamproc.contracts.reasons import Reason
from streamproc.judge.records import value_parse as vp
from streamproc.judge.records.record_values import (
    WORD,
    HoursValue,
    RecordValues,
    ZeroLengthHours,
    _Leaf,
)
from streamproc.judge.records.value_parse import CONCEPTS, Concept, bool_value, money_claims

__all__ = ["StructuredEvidence", "ValueFinding", "ValueReason"]


class ValueReason(StrEnum):
    VALUE_MISMATCH = "VALUE_MISMATCH"
    FIELD_NOT_IN_RECORD = "FIELD_NOT_IN_RECORD"
    VALUE_CONFIRMED = "VALUE_CONFIRMED"


@dataclass(frozen=True, slots=True)
class ValueFinding:
    """One value of a claim held against a record field.

    ``field`` is the field path as written ("hours.Monday"), or for FIELD_NOT_IN_RECORD
    the concept ("delivery"); ``claimed``/``recorded`` are normalised for reading
    ("Monday-Sunday 11:00-19:00" / "11:00-17:00"); ``recorded`` is None when the record
    has no such field.
    """

    reason: ValueReason
    field: str
    claimed: str
    recorded: str | None
    evidence_id: str

    @property
    def reason_text(self) -> Reason:
        """The check as a reason (``CODE: field claimed X, record Y (id)``)."""
        record = "no such field" if self.recorded is None else f"record {self.recorded}"
        return Reason(
            self.reason.value, f"{self.field} claimed {self.claimed}, {record} ({self.evidence_id})"
        )


_PARKING = re.compile(r"\bpark(?:ing|ed|s)?\b", re.IGNORECASE)
_AMBIENCE_CONTEXT = re.compile(
    r"\b(?:atmosphere|ambiance|ambience|vibes?|setting|environment|spot|place|feel|decor|"
    r"dining|establishment|restaurant|bar|cafe|eatery|joint|described as)\b",
    re.IGNORECASE,
)
_FREE = re.compile(r"\bfree\b", re.IGNORECASE)


class StructuredEvidence:
    """Typed fields of every structured item of one answer's evidence, parsed once."""

    __slots__ = ("_records",)

    def __init__(self, records: Sequence[RecordValues]) -> None:
        self._records = tuple(records)

    @classmethod
    def from_items(
        cls, evidence: Sequence[EvidenceItem], zero_length_hours: ZeroLengthHours = "closed"
    ) -> StructuredEvidence:
        """Every item with fields, or whose text is a JSON object, of any kind."""
        records = (RecordValues.parse(item, zero_length_hours) for item in evidence)
        return cls([r for r in records if r is not None])

    @property
    def empty(self) -> bool:
        return not self._records

    def compare(self, claim: str) -> list[ValueFinding]:
        """Findings for every value the claim asserts that a record settles, each
        (reason, field, evidence) once; [] when the claim is ambiguous or no record."""
        if not self._records or vp.is_meta(claim):
            return []
        reviewer = vp.reported_by_reviewer(claim)
        found: dict[tuple[ValueReason, str, str], ValueFinding] = {}
        for record in self._records:
            checks: list[Iterator[ValueFinding]] = [
                _ratings(record, claim),
                _counts(record, claim),
                _measures(record, claim),
            ]
            if not reviewer:
                checks += [
                    _hours(record, claim),
                    _attributes(record, claim),
                    _money(record, claim),
                    _location(record, claim),
                ]
            for check in checks:
                for finding in check:
                    found.setdefault((finding.reason, finding.field, finding.claimed), finding)
        return list(found.values())


def _finding(
    record: RecordValues, ok: bool, field: str, claimed: str, recorded: str
) -> ValueFinding:
    reason = ValueReason.VALUE_CONFIRMED if ok else ValueReason.VALUE_MISMATCH
    return ValueFinding(reason, field, claimed, recorded, record.evidence_id)


def _missing(record: RecordValues, concept: str, claimed: str) -> ValueFinding:
    return ValueFinding(ValueReason.FIELD_NOT_IN_RECORD, concept, claimed, None, record.evidence_id)


# --------------------------------------------------------------------------------- hours


def _hours(record: RecordValues, claim: str) -> Iterator[ValueFinding]:
    statements = vp.hours_claims(claim)
    if not statements:
        return
    if record.hours is None:
        if record.attribute_like and not record.mentions(r"\bhours\b|\bopen(?:s|ing)? (?:at|from)"):
            yield _missing(record, "hours", _hours_label(statements[0]))
        return
    for statement in statements:
        days = statement.days if statement.days is not None else vp.ALL_DAYS
        judged = {d: record.hours[d] for d in sorted(days) if record.hours[d] != "unknown"}
        if not judged:
            continue
        if statement.days is None:  # no day named: right if some open day has these hours
            open_days = {d: v for d, v in judged.items() if isinstance(v, tuple)}
            if not open_days or statement.closed:
                continue
            matching = [d for d, v in open_days.items() if _same_hours(statement, v)]
            shown = matching or list(open_days)
            yield _finding(
                record,
                bool(matching),
                f"{record.hours_path}.{vp.DAYS[shown[0]]}",
                _hours_label(statement),
                _recorded_hours({d: open_days[d] for d in shown}),
            )
            continue
        wrong = [d for d, v in judged.items() if not _day_agrees(statement, v)]
        if not wrong and len(judged) < len(days):
            continue  # right where known, but a day the record leaves open is claimed too
        field = f"{record.hours_path}.{vp.DAYS[(wrong or list(judged))[0]]}"
        yield _finding(record, not wrong, field, _hours_label(statement), _recorded_hours(judged))


def _same_hours(statement: vp.HoursClaim, value: tuple[int, int]) -> bool:
    opens, closes = value
    return (statement.opens is None or opens % 1440 in {m % 1440 for m in statement.opens}) and (
        statement.closes is None or closes % 1440 in {m % 1440 for m in statement.closes}
    )


def _day_agrees(statement: vp.HoursClaim, value: HoursValue) -> bool:
    if statement.closed or value == "closed":
        return statement.closed and value == "closed"
    return isinstance(value, tuple) and _same_hours(statement, value)


def _pick(candidates: frozenset[int] | None, after: int | None = None) -> int | None:
    """The reading to print of a 12 h time without am/pm: the one after opening."""
    if candidates is None:
        return None
    if after is not None:
        later = [c for c in candidates if c > after]
        if later:
            return min(later)
    return min(candidates)


def _hours_label(statement: vp.HoursClaim) -> str:
    days = vp.day_label(statement.days) + " " if statement.days is not None else ""
    if statement.closed:
        return f"{days}closed"
    opens = _pick(statement.opens)
    closes = _pick(statement.closes, opens)
    if opens is None and closes is None:
        return f"{days}open"
    left = vp.minutes_label(opens) if opens is not None else ""
    right = vp.minutes_label(closes) if closes is not None else ""
    return f"{days}{left}-{right}"


def _recorded_hours(days: dict[int, HoursValue]) -> str:
    labels = {
        d: v if isinstance(v, str) else f"{vp.minutes_label(v[0])}-{vp.minutes_label(v[1])}"
        for d, v in days.items()
    }
    if len(set(labels.values())) == 1:
        return next(iter(labels.values()))
    groups: dict[str, set[int]] = {}
    for day, label in labels.items():
        groups.setdefault(label, set()).add(day)
    ordered = sorted(groups.items(), key=lambda item: min(item[1]))
    return "; ".join(f"{vp.day_label(frozenset(d))} {label}" for label, d in ordered)


# ---------------------------------------------------------------------------- attributes


def _attributes(record: RecordValues, claim: str) -> Iterator[ValueFinding]:
    parking = _PARKING.search(claim) is not None
    ambience = _AMBIENCE_CONTEXT.search(claim) is not None
    kinds_named = parking and any(
        c.needs_parking and c.mention.search(claim) for c in CONCEPTS
    )  # "validated parking" is about that kind, not about parking at all
    polarity: vp.ClausePolarity | None = None
    for concept in CONCEPTS:
        if (concept.needs_parking and not parking) or (concept.needs_ambience and not ambience):
            continue
        if concept.generic_parking and kinds_named:
            continue
        for match in concept.mention.finditer(claim):
            polarity = polarity or vp.ClausePolarity(claim)  # once per claim, if needed
            negated = polarity.at(match.start(), match.end())
            if negated is None:
                continue
            finding = _attribute(record, concept, claim, match, negated)
            if finding is not None:
                yield finding
                break


def _attribute(
    record: RecordValues, concept: Concept, claim: str, match: re.Match[str], negated: bool
) -> ValueFinding | None:
    leaves = [leaf for leaf in record.concept_leaves(concept) if leaf.value is not None]
    if not leaves:
        if (
            concept.lexicon
            and record.attribute_like
            and (concept.missing_key is None or record.has_key(concept.missing_key))
            and not record.mentions(concept.support)
        ):
            return _missing(record, concept.name, "no" if negated else "yes")
        return None
    if concept.generic_parking and negated:
        return _no_parking(record, leaves, claimed="no")
    free = (
        concept.name == "wifi"
        and not negated
        and _FREE.search(claim, max(0, match.start() - 20), match.end() + 25)
    )
    claimed = "free" if free else ("no" if negated else "yes")
    values = [(leaf, bool_value(leaf.value)) for leaf in leaves]
    known = [(leaf, v) for leaf, v in values if v is not None]
    if not known:
        return None
    if concept.generic_parking:  # any kind of parking makes "offers parking" true
        leaf, value = next(((lf, v) for lf, v in known if v), known[0])
    else:
        leaf, value = known[0]
    recorded_text = (
        str(leaf.value).strip().lower()
        if isinstance(leaf.value, str)
        else ("true" if value else "false")
    )
    ok = value == (not negated)
    if free and isinstance(leaf.value, str):
        ok = recorded_text.strip("u'\"") == "free"
    return _finding(record, ok, leaf.name, claimed, recorded_text.strip("u'\""))


_OWN_PARKING: Final = frozenset({"lot", "garage", "valet", "validated"})


def _no_parking(record: RecordValues, leaves: Sequence[_Leaf], claimed: str) -> ValueFinding | None:
    """ "Does not offer parking" is wrong where the business has parking of its own (a lot,
    a garage, valet): RAGTruth's annotators read it so. Otherwise silent - "no parking,
    but street parking nearby" is too loose to confirm or refute."""
    for leaf in leaves:
        kind = leaf.name.rsplit(".", 1)[-1].lower()
        if kind in _OWN_PARKING and bool_value(leaf.value):
            return _finding(record, False, leaf.name, claimed, "true")
    return None


# ------------------------------------------------------------------- ratings and numbers


def _ratings(record: RecordValues, claim: str) -> Iterator[ValueFinding]:
    first = record.review_stars[0][0] if record.review_stars else ""
    recorded = ", ".join(str(v) for _, v in record.review_stars)
    hits: dict[Decimal, str] = {}  # stars -> the first review with them
    for name, value in record.review_stars:
        hits.setdefault(value, name)
    for rating in vp.rating_claims(claim):
        if rating.review:
            if not record.review_stars:
                continue
            hit = hits.get(rating.value)
            yield _finding(record, hit is not None, hit or first, str(rating.value), recorded)
        elif record.rating is not None:
            name, value = record.rating
            yield _finding(record, value == rating.value, name, str(rating.value), str(value))


def _counts(record: RecordValues, claim: str) -> Iterator[ValueFinding]:
    held_by_noun: dict[str, tuple[str, Decimal] | None] = {}  # a record scan per noun
    for count in vp.count_claims(claim):
        if count.noun not in held_by_noun:
            held_by_noun[count.noun] = record.count_of(count.noun)
        held = held_by_noun[count.noun]
        if held is not None:
            name, value = held
            yield _finding(
                record, value == count.value, name, f"{count.value} {count.noun}", str(value)
            )


def _measures(record: RecordValues, claim: str) -> Iterator[ValueFinding]:
    prefixes = {w[:4] for w in WORD.findall(claim.lower())}
    held_by_unit: dict[str, tuple[str, Decimal, str] | None] = {}  # a record scan per unit
    for measure in vp.unit_claims(claim):
        if measure.noun not in held_by_unit:
            held_by_unit[measure.noun] = record.measure_for(measure.noun, prefixes)
        held = held_by_unit[measure.noun]
        if held is None:
            continue
        name, base_value, written = held
        in_claim_unit = base_value / vp.UNITS[measure.noun][1]
        exponent = measure.value.as_tuple().exponent
        places = -exponent if isinstance(exponent, int) and exponent < 0 else 0
        tolerance = Decimal(5) / Decimal(10) ** (places + 1)  # the claim's own rounding
        close = abs(in_claim_unit - measure.value) < tolerance
        yield _finding(record, close, name, measure.written, written)


def _money(record: RecordValues, claim: str) -> Iterator[ValueFinding]:
    held: tuple[str, Decimal, str | None, str] | None = None
    for amount in money_claims(claim):
        held = held or record.price_for(claim)  # the same for every amount: read once
        if held is None:
            return
        name, value, currency, written = held
        same = value == amount.value and (
            currency is None or amount.currency is None or currency == amount.currency
        )
        yield _finding(record, same, name, amount.written, written)


def _location(record: RecordValues, claim: str) -> Iterator[ValueFinding]:
    """City and state as a pair ("in Goleta, CA"), street number with its street name;
    a place that only contains the other ("Downtown Santa Barbara") is no mismatch."""
    city, state = record.scalar("city"), record.scalar("state")
    for claimed_city, claimed_state in vp.city_states(claim):
        if city is None or state is None or vp.state_code(state[1]) is None:
            continue
        same_state = vp.state_code(state[1]) == claimed_state
        a, b = claimed_city.lower(), city[1].lower()
        same_city = a == b or a in b or b in a
        if same_state or same_city:
            yield _finding(record, same_city, city[0], claimed_city, city[1])
            yield _finding(record, same_state, state[0], claimed_state, state[1])
    address = record.scalar("address")
    if address is None:
        return
    number, _, rest = address[1].partition(" ")
    for claimed_number, street in vp.addresses(claim):
        if not number.isdecimal() or not rest:
            return
        same_street = rest.split()[0].lower() == street.split()[0].lower()
        if same_street or claimed_number == number:
            ok = same_street and claimed_number == number
            yield _finding(record, ok, address[0], f"{claimed_number} {street}", address[1])
