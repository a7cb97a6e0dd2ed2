"""What an answer's records and tool results hold, as typed values, read once per answer.

Every field of every record and executed tool result is typed by its key and its value:
money (a number under an amount-like key, or a string such as "EUR 1.249,90", in the
currency its record names), counts (numbers of things, and the length of a list:
``"drivers": [...]``), dates and times, identifiers, names of people and places, and
states. Refused calls are kept apart: what they asked for never happened, so it confirms
nothing. A field whose key says it is a date but whose value does not read as one is
kept as *unparsed*: it is reported, never read as a match.

The work is bounded whatever a producer sends: at most ``MAX_FIELDS`` fields are typed
(the rest only searched as text) and a string longer than ``MAX_VALUE_CHARS`` is text,
not a value; :attr:`CaseFacts.capped` says when a cap was hit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from functools import cached_property
from itertools import pairwise
from typing import Final
from zoneinfo import ZoneInfo

from babel.numbers import list_currencies

from streamproc.contracts.events import EvidenceItem, EvidenceKind
from streamproc.judge.records.claim_values import ValueReaders, read_values
from streamproc.judge.records.common import Record
from streamproc.judge.records.dates import DateMention, RecordedTime
from streamproc.judge.records.derived_amounts import combined_amounts, derived_amounts
from streamproc.judge.records.durations import durations
from streamproc.judge.records.money import Money
from streamproc.judge.records.zones import zone_of
from streamproc.judge.text.evidence import FieldLeaf, Path, record_leaves
from streamproc.judge.text.name_forms import fold
from streamproc.judge.text.stems import stem, words

__all__ = [
    "MAX_FIELDS",
    "MAX_VALUE_CHARS",
    "CaseFacts",
    "FieldRef",
    "Typed",
    "durations",
    "name_words",
]

MAX_FIELDS: Final = 2_000
MAX_VALUE_CHARS: Final = 200
MAX_TEXT_CHARS: Final = 4_000  # of one evidence text searched for dates
MAX_DATE_TEXT_CHARS: Final = 20_000  # of all evidence texts searched for dates


@dataclass(frozen=True, slots=True)
class FieldRef:
    """Where a value was read: the record (or tool result) and the field."""

    record: Record
    leaf: FieldLeaf

    @property
    def evidence_id(self) -> str:
        return self.record.item.id

    @property
    def name(self) -> str:
        return self.leaf.name or "(value)"

    @property
    def shown(self) -> str:
        return f"record {self.evidence_id} {self.name} is {self.leaf.value}"


@dataclass(frozen=True, slots=True)
class Typed:
    """One typed value of a field: ``keys`` are the stems of its key path."""

    ref: FieldRef
    keys: frozenset[str]


def _stems(parts: Iterable[str | int]) -> frozenset[str]:
    return frozenset(stem(w.lower) for p in parts if isinstance(p, str) for w in words(p))


def _key_words(*names: str) -> frozenset[str]:
    return frozenset(stem(w) for name in names for w in name.split())


_MONEY_KEYS: Final = _key_words(
    "amount total subtotal price cost fee charge charges balance paid due refund refunded "
    "deposit deductible excess payout credit fare tax vat discount surcharge premium fine "
    "penalty compensation reimbursement outstanding owed payable sum value quote limit "
    "overdraft installment instalment payment waiver voucher advance"
)
# "amount_minor": 38997, "totalMinor", "price_cents": amounts in hundredths of the currency
_MINOR_UNIT_KEYS: Final = _key_words("minor cents cent")
_CURRENCY_KEYS: Final = _key_words("currency ccy currencycode")
_ID_KEYS: Final = _key_words(
    "id number no nr num ref reference code pnr locator confirmation tracking awb iban "
    "sku serial plate registration imei flight train seat room gate platform"
)
_STATE_KEYS: Final = _key_words("status state stage phase result outcome decision")
_PERSON_KEYS: Final = _key_words(
    "name doctor dentist physician surgeon nurse therapist physiotherapist optician "
    "hygienist practitioner provider consultant specialist vet technician engineer mechanic "
    "installer agent adviser advisor representative rep manager supervisor adjuster "
    "assessor inspector handler courier driver drivers stylist coordinator contact owner "
    "assignee assigned analyst officer host passenger passengers guest guests holder "
    "customer recipient escalated signed approver reviewer requester signer sender author "
    "creator verifier examiner authoriser authorizer"
)
_PLACE_KEYS: Final = _key_words(
    "city airport origin destination from to branch clinic practice location site depot "
    "hub warehouse store shop office station terminal address hotel property venue "
    "pickup dropoff return facility centre center region country locker point club gym"
)
_DATE_HINTS: Final = _key_words(
    "date time at on day deadline due expiry expires expiration start end from until "
    "departure arrival scheduled slot window created updated requested"
)
_TEXT_KINDS: Final = frozenset({EvidenceKind.PASSAGE, EvidenceKind.POLICY})


class CaseFacts:
    """One answer's case evidence, typed. Built once per answer; read per claim."""

    def __init__(
        self,
        evidence: Sequence[EvidenceItem],
        question: str | None,
        now: datetime,
        readers: ValueReaders,
    ) -> None:
        self.now = now
        self.readers = readers
        records = [
            Record(item, tuple(record_leaves(item)))
            for item in evidence
            if item.kind in (EvidenceKind.RECORD, EvidenceKind.TOOL_RESULT)
        ]
        self.executed = [r for r in records if r.executed]
        self.refused = [r for r in records if not r.executed]
        self.has_fields = any(r.item.fields for r in records) or any(
            r.item.kind is EvidenceKind.TOOL_RESULT for r in records
        )
        self.capped = False
        self.money: list[tuple[Decimal, str | None, Typed]] = []
        self.quantities: list[tuple[Decimal, Typed]] = []
        self.times: list[tuple[RecordedTime, Typed]] = []
        self.ids: list[tuple[str, Typed]] = []
        self.names: list[tuple[str, str, Typed]] = []  # (folded value, role, typed)
        self.strings: list[tuple[str, Typed]] = []  # every short text field, folded
        self.states: list[Typed] = []
        self.unparsed: list[Typed] = []
        self.vocabulary: set[str] = set()
        budget = MAX_FIELDS
        for record in self.executed:
            budget = self._read(record, budget)
        self.refused_times = [
            recorded
            for record in self.refused
            for leaf in record.leaves[:MAX_FIELDS]
            if (recorded := readers.dates.recorded(leaf.value)) is not None
        ]
        self._records = records
        self._texts = [item.text for item in evidence] + [question or ""]
        # where a date or time may be written as text: every item's text, the question,
        # and the sentences of refused calls ("allocated to another booking from ...")
        self._all_texts = self._texts + [
            str(leaf.value)
            for record in records
            for leaf in record.leaves[:MAX_FIELDS]
            if isinstance(leaf.value, str)
            and 12 < len(leaf.value) <= MAX_TEXT_CHARS
            and " " in leaf.value.strip()  # a note ("on leave 2026-05-09 to 2026-05-24")
        ]
        self._text_dates: list[DateMention] | None = None
        self.text_dates_capped = False
        self.texts = [item.text for item in evidence if item.kind in _TEXT_KINDS]
        if question:
            self.texts.append(question)
        self.refused_values = {
            _normal(str(leaf.value))
            for record in self.refused
            for leaf in record.leaves
            if leaf.value not in (None, "", ())
        }

    # -- read on first use: most claims ask none of these ---------------------------------

    @cached_property
    def _raw_text(self) -> str:
        leaves = (str(leaf.value) for r in self._records for leaf in r.leaves[:MAX_FIELDS])
        return " ".join(self._texts) + " " + " ".join(leaves)

    @cached_property
    def folded_text(self) -> str:
        return fold(self._raw_text)

    @cached_property
    def _words(self) -> frozenset[str]:
        """The folded words, and those of camel-cased names split as a claim's are
        ("SwissBag" -> swiss, bag), so that a name reads the same on both sides."""
        folded = {w.lower for w in words(self.folded_text)}
        return frozenset(folded | {fold(w.text) for w in words(self._raw_text)})

    @cached_property
    def _normal_text(self) -> str:
        return _normal(self.folded_text)

    @cached_property
    def text_money(self) -> list[Money]:
        """Amounts the texts write, and what a refused call says why ("available
        balance EUR 18.72")."""
        refusals = [
            str(leaf.value)
            for record in self.refused
            for leaf in record.leaves[:MAX_FIELDS]
            if isinstance(leaf.value, str) and " " in leaf.value.strip()
            and len(leaf.value) <= MAX_TEXT_CHARS
        ]  # fmt: skip
        out: list[Money] = []
        for text in [*self.texts, *refusals]:
            read = read_values(text, self.readers, self.now, dates=False)
            out += [money for money, _, _ in (*read.money, *read.limits)]
        return out

    @cached_property
    def durations(self) -> frozenset[timedelta]:
        return durations(" ".join(self._texts))

    @cached_property
    def derived_money(self) -> frozenset[tuple[Decimal, str | None]]:
        """Sums, differences and products of recorded amounts; amounts a refused call
        asked for (written on record, so no claim's invention)."""
        refused_money = [
            (number, None)
            for record in self.refused
            for leaf in record.leaves[:MAX_FIELDS]
            if (number := _amount_of(leaf.value, self.readers)) is not None
        ]
        return derived_amounts(self.money, self.quantities) | combined_amounts(
            refused_money, [(abs(v), c) for v, c, _ in self.money]
        )

    # -- reading ------------------------------------------------------------------------

    def _read(self, record: Record, budget: int) -> int:
        item = record.item
        self.vocabulary |= {w.stem for w in words(f"{item.id} {item.source or ''}")}
        currency = _currency(record)
        lists: dict[tuple[str | int, ...], int] = {}
        for leaf in record.leaves:
            if budget <= 0:
                self.capped = True
                break
            budget -= 1
            keys = _stems(leaf.path)
            self.vocabulary |= keys
            for position, part in enumerate(leaf.path):
                if isinstance(part, int):
                    parent = leaf.path[:position]
                    lists[parent] = max(lists.get(parent, 0), part + 1)
            self._type(Typed(FieldRef(record, leaf), keys), currency)
        for path, length in lists.items():
            keys = _stems(path)
            if keys:
                leaf = FieldLeaf(path, length)
                self.quantities.append((Decimal(length), Typed(FieldRef(record, leaf), keys)))
        self._item_counts(record, lists)
        return budget

    def _item_counts(self, record: Record, lists: dict[tuple[str | int, ...], int]) -> None:
        """How many items of a list are in each state ("three of your four requests are
        settled" counts the requests whose status is paid), and how many hold a key named
        like a thing (two ``segments`` with a ``flight`` each are two flights)."""
        by_state: list[tuple[Decimal, Typed]] = []
        by_key: list[tuple[Decimal, Typed]] = []
        for path in lists:
            keys = _stems(path)
            groups: dict[str, int] = {}
            holding: dict[str, set[int]] = {}
            for leaf in record.leaves[:MAX_FIELDS]:
                tail = leaf.path[len(path) :]
                if leaf.path[: len(path)] != path or len(tail) != 2:
                    continue
                item, key = tail
                if not isinstance(item, int) or not isinstance(key, str):
                    continue
                holding.setdefault(key, set()).add(item)
                if _stems((key,)) & _STATE_KEYS and isinstance(leaf.value, str):
                    groups[leaf.value] = groups.get(leaf.value, 0) + 1
            for value, count in groups.items():
                leaf = FieldLeaf((*path, value), count)
                by_state.append((Decimal(count), Typed(FieldRef(record, leaf), keys)))
            for key, items in holding.items():
                named = _stems((key,)) - _GENERIC_ITEM_KEYS
                if named and len(items) > 1:
                    leaf = FieldLeaf((*path, key), len(items))
                    by_key.append(
                        (Decimal(len(items)), Typed(FieldRef(record, leaf), named | keys))
                    )
        self.quantities += by_state + by_key

    def _type(self, typed: Typed, currency: str | None) -> None:
        value = typed.ref.leaf.value
        keys = typed.keys
        last = _stems(typed.ref.leaf.path[-1:]) if typed.ref.leaf.path else frozenset()
        if isinstance(value, bool) or value is None or value == ():
            return
        if isinstance(value, int | float):
            number = _decimal(value)
            if number is None:
                return
            minor = last & _MINOR_UNIT_KEYS and isinstance(value, int)
            if minor and (keys & _MONEY_KEYS or currency):
                self.money.append((number.scaleb(-2), currency, typed))  # 38997 cents: 389.97
                return
            if keys & _ID_KEYS and isinstance(value, int) and not _plural(typed.ref.leaf.path):
                self.ids.append((_normal(str(value)), typed))
                return  # "po": 4500017311 is a name, not a number of things
            if keys & _MONEY_KEYS or currency:
                self.money.append((number, currency, typed))
            self.quantities.append((number, typed))
            return
        if not isinstance(value, str):
            return
        text = value.strip()
        if len(text) > MAX_VALUE_CHARS:
            return
        self.vocabulary |= {w.stem for w in words(text) if len(text) <= 60}
        if last & _STATE_KEYS and not _past_entry(typed.ref.leaf.path):
            self.states.append(typed)
        amount = self.readers.money.amount(text)
        if amount is not None:
            value_, code = amount
            if code is not None or keys & _MONEY_KEYS:
                self.money.append((value_, code or currency, typed))
            elif not keys & _ID_KEYS:
                self.quantities.append((value_, typed))
        recorded = self.readers.dates.recorded(text)
        if recorded is not None and (recorded.day is not None or recorded.clock):
            self.times.append((recorded, typed))
        elif (
            last & _DATE_HINTS
            and any(c.isdigit() for c in text)
            and amount is None
            and not keys & _ID_KEYS
            and not _mixed(text)  # "request": "RITM-284417" is an id, not a date
        ):
            self.unparsed.append(typed)
        if any(c.isdigit() for c in text) and (keys & _ID_KEYS or _mixed(text)):
            self.ids.append((_normal(text), typed))
        if any(c.isalpha() for c in text) and len(text) <= 80:
            self.strings.append((fold(text), typed))
        role = _name_role(typed.ref.leaf.path)
        if role is not None and any(c.isalpha() for c in text):
            self.names.append((fold(text), role, typed))

    # -- questions the checks ask -------------------------------------------------------

    def in_text(self, written: str) -> bool:
        """Is ``written`` (folded) anywhere in the evidence, the question or a field?"""
        folded = fold(written).strip()
        return bool(folded) and folded in self.folded_text

    @cached_property
    def _string_words(self) -> list[tuple[frozenset[str], tuple[str, ...], Typed]]:
        return [(frozenset(ws), ws, t) for value, t in self.strings for ws in [name_words(value)]]

    def holding(self, parts: Sequence[str]) -> list[Typed]:
        """The text fields holding every word of a name ("e. yilmaz" holds E Yilmaz)."""
        return [t for held, _, t in self._string_words if all(p in held for p in parts)]

    def written_whole(self, parts: Sequence[str]) -> bool:
        """Is a name some text field's whole value ("Beata Zielinska")?"""
        wanted = tuple(parts)
        return any(ws == wanted for _, ws, _ in self._string_words)

    @cached_property
    def _objects_by_value(self) -> dict[tuple[object, object], set[tuple[str, Path]]]:
        out: dict[tuple[object, object], set[tuple[str, Path]]] = {}
        for record in self.executed:
            for leaf in record.leaves[:MAX_FIELDS]:
                key = (leaf.path[-1] if leaf.path else None, leaf.value)
                out.setdefault(key, set()).add((record.item.id, tuple(leaf.path[:-1])))
        return out

    def objects_holding(self, leaf: FieldLeaf) -> set[tuple[str, Path]]:
        """The objects (record id, path) holding this leaf's value under its key: a value
        every element of a list shares (each request was EUR 42.50) anchors none alone."""
        key = (leaf.path[-1] if leaf.path else None, leaf.value)
        return set(self._objects_by_value.get(key, ()))

    def records_named(self, normal: str) -> list[str]:
        """The evidence ids of the records an id names (``DMG-2290`` names the record
        ``DMG-2290``), compared without separators."""
        return [r.item.id for r in self.executed if _normal(r.item.id) == normal]

    def money_known(self, money: Money) -> FieldRef | bool:
        """The field that holds this amount, True when a text or a sum of fields does,
        False when nothing does."""
        for value, currency, typed in self.money:
            if money.matches(value, currency):
                return typed.ref
        if any(money.matches(m.value, m.currency) for m in self.text_money):
            return True
        return any(money.matches(value, currency) for value, currency in self.derived_money)

    def has_word(self, word: str) -> bool:
        """Is the (folded) word one of the evidence's words?"""
        return word in self._words

    def has_word_like(self, word: str) -> bool:
        """A word the evidence writes in another form: the same first five letters, for
        names a language inflects ("Wroclaw" beside "Wroclawskie")."""
        if len(word) < 6:
            return False
        return any(w.startswith(word[:5]) and len(w) >= 6 for w in self._words)

    def in_normal_text(self, normal: str) -> bool:
        """Is an id (letters and digits only, upper case) written anywhere?"""
        return normal in self._normal_text

    def text_dates(self) -> list[DateMention]:
        """Dates and times the evidence's texts and the question write (read on first
        use: only a claim's date or time that no field holds needs them)."""
        if self._text_dates is None:
            self._text_dates = []
            budget = MAX_DATE_TEXT_CHARS
            for text in self._all_texts:
                if budget <= 0:
                    self.text_dates_capped = True
                    break
                piece = text[: min(MAX_TEXT_CHARS, budget)]
                budget -= len(piece)
                self._text_dates += self.readers.dates.mentions(piece, self.now)
        return self._text_dates

    @property
    def carries_money(self) -> bool:
        """Does a field hold an amount: under an amount's key, or written with its
        currency ("advance": "1.249,90 EUR")?"""
        return any(
            typed.keys & _MONEY_KEYS or isinstance(typed.ref.leaf.value, str)
            for _, _, typed in self.money
        )

    @cached_property
    def zones(self) -> list[ZoneInfo]:
        """The time zones the records name as a value ("tz": "Europe/London")."""
        found = (zone_of(leaf.value) for r in self._records for leaf in r.leaves[:MAX_FIELDS])
        return list(dict.fromkeys(z for z in found if z is not None))

    def date_fields(self) -> list[tuple[RecordedTime, Typed]]:
        return [(t, typed) for t, typed in self.times if t.day is not None]

    def clock_fields(self) -> list[tuple[RecordedTime, Typed]]:
        return [(t, typed) for t, typed in self.times if t.clock]


# Keys every list item may have: they name no thing to count.
_GENERIC_ITEM_KEYS: Final = _key_words(
    "id name type kind status state date time at code no n line pos index note description"
)
_DIRECTIONS: Final = frozenset({"to", "from"})


_HISTORY_KEYS: Final = _key_words("history histories log logs timeline trail audit changes")


def _past_entry(path: Sequence[str | int]) -> bool:
    """ "history[0].state": an entry of a record's history says what the state was, not
    what it is, and never contradicts a claim about now."""
    return any(
        isinstance(key, str) and isinstance(index, int) and _stems((key,)) & _HISTORY_KEYS
        for key, index in pairwise(path)
    )


def name_words(written: str) -> tuple[str, ...]:
    """ "DPD's Wrocław-Bielany" -> ("dpd", "wroclaw", "bielany")."""
    out = [fold(w.text) for w in words(written)]
    return tuple(w for i, w in enumerate(out) if not (w == "s" and i))


def _plural(path: Sequence[str | int]) -> bool:
    """ "roomsInBlock", "seats_left": a key that counts things an id would name one of."""
    own = [w.lower for p in path[-1:] if isinstance(p, str) for w in words(p)]
    return any(w.endswith("s") and len(w) > 3 and stem(w) in _ID_KEYS for w in own)


def _name_role(path: Sequence[str | int]) -> str | None:
    """Whose name a field holds, from its own key and its parent's: a person
    (``doctor``, ``assignee``, ``passenger.name``) or a place (``airport``,
    ``return_branch``, ``depot.name``; "to" and "from" only as a whole key, so that
    ``charged_to`` is no place)."""
    own = [str(p) for p in path[-1:] if isinstance(p, str)]
    words_ = [w.lower for p in own for w in words(p)]
    if words_ in (["to"], ["from"]):
        return "place"
    stems = {stem(w) for w in words_ if w not in _DIRECTIONS}
    parent = _stems(path[-2:-1])
    if stems <= {"name"} and parent & _PLACE_KEYS:
        return "place"  # ``collection_store.name``, ``depot.name``
    stems |= parent
    if stems & _PERSON_KEYS:
        return "person"
    if stems & _PLACE_KEYS:
        return "place"
    return None


def _decimal(value: float) -> Decimal | None:
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _normal(text: str) -> str:
    return "".join(c for c in text.upper() if c.isalnum())


def _mixed(text: str) -> bool:
    """ "RF-2291", "LX1583", "AC 113": letters and digits in one code."""
    parts = text.split()
    if len(parts) == 2 and len(parts[0]) == 2 and parts[0].isalnum() and parts[1].isdecimal():
        return True  # a flight number written with a space
    return (
        len(parts) == 1
        and any(c.isalpha() for c in text)
        and any(c.isdigit() for c in text)
        and len(text) <= 40
    )


def _currency(record: Record) -> str | None:
    """The record's currency: the field named for it, else a field whose whole value is
    an ISO 4217 code, whatever the key's language ("waehrung": "EUR", "moeda": "EUR")."""
    coded = None
    for leaf in record.leaves[:MAX_FIELDS]:
        if not isinstance(leaf.value, str):
            continue
        code = leaf.value.strip().upper()
        if len(code) != 3 or not code.isalpha():
            continue
        if _stems(leaf.path[-1:]) & _CURRENCY_KEYS:
            return code
        if coded is None and code in _ISO_CURRENCIES and leaf.value.strip() == code:
            coded = code
    return coded


_ISO_CURRENCIES: Final = frozenset(list_currencies())


def _amount_of(value: object, readers: ValueReaders) -> Decimal | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return _decimal(value)
    if isinstance(value, str) and len(value) <= 40:
        parsed = readers.money.amount(value)
        return parsed[0] if parsed is not None else None
    return None
