"""The typed values a claim states: amounts, counts, identifiers, dates and times, names.

A claim is read as whitespace tokens (with their offsets) and as words
(:mod:`streamproc.judge.text.stems`); amounts go to :class:`~.money.MoneyReader` (Babel),
dates and times to :class:`~.calendar.DateReader` (dateparser). What is left of a token
with a digit is an identifier when something names its kind ("order 10442", "flight LX
1583", "RF-2291") or a count when a noun follows it ("3 checked bags", "5 of the 8
sessions"). Names are capitalised runs a title, a role or a place word introduces ("Dr.
Okafor", "technician Marco Ruiz", "to Milan Linate", "our Leuven store"). Each value
keeps the span it was read from, so a finding can point at the words that decided it.

One pass over the claim's tokens; every look-around is a fixed number of tokens.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Final

from streamproc.judge.records.calendar import DateReader
from streamproc.judge.records.dates import DateMention
from streamproc.judge.records.money import Money, MoneyReader
from streamproc.judge.records.value_parse import number_word
from streamproc.judge.text.features import STOP_WORDS, word_set
from streamproc.judge.text.stems import Word, stem

__all__ = [
    "ClaimValues",
    "CountValue",
    "IdValue",
    "NameValue",
    "Token",
    "ValueReaders",
    "read_values",
    "tokens",
]


Token = Word  # a whitespace-separated piece of the claim, its edge punctuation stripped


_EDGE = "()[]{}\"'\u201c\u201d\u2018\u2019,;:!?*"


def tokens(text: str) -> list[Token]:
    """Whitespace tokens without the punctuation around them ("(LIS)," -> "LIS"); a
    sentence's final "." is stripped, a decimal's or an abbreviation's inner one kept."""
    out = []
    start = -1
    for index, char in enumerate(f"{text} "):
        if char.isspace():
            if start >= 0:
                raw = text[start:index]
                left = len(raw) - len(raw.lstrip(_EDGE))
                core = raw.strip(_EDGE)
                while core.endswith(".") and not _abbreviation(core):
                    core = core[:-1].rstrip(_EDGE)
                if core:
                    out.append(Token(start + left, start + left + len(core), core))
                start = -1
        elif start < 0:
            start = index
    return out


_ABBREVIATIONS: Final = frozenset({"dr.", "mr.", "mrs.", "ms.", "prof.", "st.", "no.", "approx."})


def _abbreviation(token: str) -> bool:
    return token.lower() in _ABBREVIATIONS


@dataclass(frozen=True, slots=True)
class CountValue:
    """A number of things: "3 checked bags" -> 3, nouns {"check", "bag"}."""

    value: Decimal
    nouns: frozenset[str]
    written: str
    start: int
    end: int
    remainder: bool = False  # "two more", "the remaining 3", "nine are still open"


@dataclass(frozen=True, slots=True)
class IdValue:
    """An identifier and what names its kind ("order", "flight", "RF")."""

    written: str
    kind: frozenset[str]
    start: int
    end: int

    @property
    def normal(self) -> str:
        return "".join(c for c in self.written.upper() if c.isalnum())


@dataclass(frozen=True, slots=True)
class NameValue:
    """A person's or place's name and the role it was introduced with."""

    written: str
    role: str  # "person", "place", or "any" (two capitalised words and no cue)
    cue: frozenset[str]  # stems of the title / role / place word
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class ClaimValues:
    """Everything typed one claim states."""

    money: tuple[tuple[Money, int, int], ...] = ()
    limits: tuple[tuple[Money, int, int], ...] = ()
    counts: tuple[CountValue, ...] = ()
    ids: tuple[IdValue, ...] = ()
    dates: tuple[DateMention, ...] = ()
    names: tuple[NameValue, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.money or self.counts or self.ids or self.dates or self.names)


@dataclass(frozen=True, slots=True)
class ValueReaders:
    """The locale-bound readers, built once per judge."""

    money: MoneyReader
    dates: DateReader

    @classmethod
    def for_locale(cls, locale: str) -> ValueReaders:
        return cls(MoneyReader(locale), DateReader(locale))


_HEDGES: Final = word_set(
    "about around roughly approximately approx. approx nearly almost circa some ~"
)
_HEDGE_PAIRS: Final = frozenset(
    {
        ("just", "under"),
        ("just", "over"),
        ("close", "to"),
        ("a", "little"),
        ("just", "below"),
        ("just", "above"),
    }
)
_LIMITS: Final = word_set(
    "over under above below exceeding exceeds exceed max maximum min minimum up per within "
    "than least most limit"
)
_ID_KINDS: Final = frozenset(
    stem(w)
    for w in word_set(
        "order purchase po invoice ticket case claim policy booking reservation confirmation "
        "reference ref tracking shipment parcel account customer member membership "
        "transaction transfer payment refund return rma flight train ticket incident request "
        "complaint contract subscription plan quote quotation note receipt statement report "
        "job visit appointment card iban number no # id code pnr voucher coupon seat room "
        "rental vehicle plate registration gate terminal platform"
    )
)
_TITLES: Final = frozenset(
    {"dr", "dr.", "mr", "mr.", "mrs", "mrs.", "ms", "ms.", "prof", "prof.", "miss", "sir"}
)
_PERSON_ROLES: Final = frozenset(
    stem(w)
    for w in word_set(
        "doctor dentist physician surgeon nurse therapist physiotherapist optician hygienist "
        "practitioner consultant specialist vet veterinarian technician engineer mechanic "
        "installer fitter plumber electrician agent adviser advisor representative rep "
        "manager supervisor adjuster assessor inspector handler courier driver stylist "
        "coordinator contact colleague owner assignee analyst officer host guide instructor "
        "trainer captain pilot passenger guest holder name"
    )
)
_PLACE_WORDS: Final = frozenset(
    stem(w)
    for w in word_set(
        "airport terminal station branch store shop office clinic practice surgery hospital "
        "centre center depot hub warehouse locker point hotel desk counter garage workshop "
        "location site address street road avenue"
    )
)
_PLACE_PREPOSITIONS: Final = frozenset({"to", "from", "at", "in", "via", "into", "near"})
_NOT_NAMES: Final = word_set(
    "i monday tuesday wednesday thursday friday saturday sunday january february march "
    "april may june july august september october november december utc gmt cet cest "
    "am pm eur usd gbp chf dkk sek nok pln czk"
)
_MAX_ID_CHARS: Final = 40
_LEGAL_FORMS: Final = word_set("gmbh ltd limited inc llc plc ag sa sas bv nv oy ab as spa srl")
_TIME_UNITS: Final = frozenset(
    stem(w) for w in word_set("second minute min hour hr day week fortnight month year")
)


def read_values(
    text: str, readers: ValueReaders, now: datetime, *, dates: bool = True
) -> ClaimValues:
    """Every typed value of ``text`` (a claim); ``now`` is the answer's time, against
    which relative dates are read. ``dates=False`` skips the date search."""
    pieces = tokens(text)
    mentions = readers.dates.mentions(text, now) if dates else []
    starts = [p.start for p in pieces]
    taken: set[int] = set()  # the starts of the tokens a value already holds

    def take(spans: Iterable[tuple[int, int]]) -> None:
        for start, end in spans:  # the tokens overlapping [start, end), found by bisection
            index = max(0, bisect_left(starts, start) - 1)
            while index < len(pieces) and pieces[index].start < end:
                if start < pieces[index].end:
                    taken.add(pieces[index].start)
                index += 1

    def free(token: Token) -> bool:
        return token.start not in taken

    take((m.start, m.end) for m in mentions)
    money, limits = _money(pieces, readers.money, free)
    take((s, e) for _, s, e in money + limits)
    ids = _ids(pieces, free)
    take((i.start, i.end) for i in ids)
    counts = _counts(pieces, free, readers.money)
    names = _names(text, pieces, free)
    return ClaimValues(
        tuple(money), tuple(limits), tuple(counts), tuple(ids), tuple(mentions), tuple(names)
    )


# ---------------------------------------------------------------------------------- money


def _money(
    pieces: Sequence[Token], reader: MoneyReader, free: Callable[[Token], bool]
) -> tuple[list[tuple[Money, int, int]], list[tuple[Money, int, int]]]:
    found: list[tuple[Money, int, int]] = []
    limits: list[tuple[Money, int, int]] = []
    used: set[int] = set()
    for index, token in enumerate(pieces):
        if index in used or not free(token):
            continue
        parsed = _amount_at(pieces, index, reader)
        if parsed is None:
            continue
        value, currency, first, last = parsed
        number = "".join(
            p.text for p in pieces[first : last + 1] if not reader.is_currency_word(p.text)
        )  # "4 920" of "SEK 4 920" as one number
        readings = reader.readings(reader.split_symbol(number)[1])
        used.update(range(first, last + 1))
        start, end = pieces[first].start, pieces[last].end
        before = [p.lower for p in pieces[max(0, first - 2) : first]]
        hedged = bool(before) and (before[-1] in _HEDGES or tuple(before[-2:]) in _HEDGE_PAIRS)
        written = " ".join(p.text for p in pieces[first : last + 1])
        money = Money(value, currency, written, approximate=hedged, readings=readings)
        if not hedged and before and before[-1] in _LIMITS:
            limits.append((money, start, end))
        else:
            found.append((money, start, end))
    return found, limits


def _amount_at(
    pieces: Sequence[Token], index: int, reader: MoneyReader
) -> tuple[Decimal, str | None, int, int] | None:
    """An amount starting at ``pieces[index]``: "€1,200.00", "EUR 2.500,00", "118 euros",
    "1.249,90€". The currency is a glued symbol or a neighbouring code, symbol or name."""
    token = pieces[index].text
    glued, rest, had = reader.split_symbol(token)
    if had:
        value = reader.number(rest)
        return (value, glued, index, index) if value is not None else None
    if reader.is_currency_word(token) and index + 1 < len(pieces):
        written, last = _space_grouped(pieces, index + 1)
        value = reader.number(written)
        if value is not None:
            return value, reader.currency(token), index, last
        return None
    written, last = _space_grouped(pieces, index)
    value = reader.number(written)
    if value is None or last + 1 >= len(pieces):
        return None
    following = pieces[last + 1].text
    if reader.is_currency_word(following):
        return value, reader.currency(following), index, last + 1
    return None


def _space_grouped(pieces: Sequence[Token], index: int) -> tuple[str, int]:
    """A number whose thousands are set apart by spaces ("SEK 4 920", "2 460,00 kr"),
    joined, and the index of its last piece; any other token as it is."""
    text, last = pieces[index].text, index
    if not (text.isdecimal() and len(text) <= 3):
        return text, last
    while last + 1 < len(pieces) and len(pieces[last + 1].text) >= 3:
        group = pieces[last + 1].text
        if not (group[:3].isdecimal() and (len(group) == 3 or group[3] in ",.")):
            break
        if pieces[last + 1].start != pieces[last].end + 1:
            break  # one space between the groups, nothing else
        text, last = text + group, last + 1
    return text, last


# ---------------------------------------------------------------------------- identifiers


def _ids(pieces: Sequence[Token], free: Callable[[Token], bool]) -> list[IdValue]:
    found: list[IdValue] = []
    skip = -1
    for index, token in enumerate(pieces):
        if index <= skip or not free(token):
            continue
        text = token.text.lstrip("#")
        kind = _kind_before(pieces, index)
        if index + 1 < len(pieces) and _airline_code(text) and _flight_digits(pieces[index + 1]):
            following = pieces[index + 1]
            found.append(
                IdValue(f"{text} {following.text}", kind | {"flight"}, token.start, following.end)
            )
            skip = index + 1
            continue
        if not any(c.isdigit() for c in text) or len(text) > _MAX_ID_CHARS:
            continue
        letters = "".join(c for c in text if c.isalpha())
        if _decimal_like(text):
            continue
        if letters and len(text) >= 3 and any(c.isdigit() for c in text):
            prefix = frozenset({letters.lower()[:4]}) if text[:1].isalpha() else frozenset()
            found.append(IdValue(token.text, kind | prefix, token.start, token.end))
        elif kind and (len(text) >= 2 and (letters or len(text) >= 3)):
            found.append(IdValue(token.text, kind, token.start, token.end))
        elif token.text.startswith("#") and len(text) >= 3:
            found.append(IdValue(token.text, frozenset({"#"}), token.start, token.end))
    return found


def _kind_before(pieces: Sequence[Token], index: int) -> frozenset[str]:
    """What names an id's kind: one of the two words before it ("order 10442", "order
    number 10442", "flight no. 12")."""
    kinds = set()
    for back in (1, 2, 3):
        if index - back < 0:
            break
        word = pieces[index - back].lower.rstrip(".")
        key = stem(word)
        if key in _ID_KINDS:
            kinds.add(key)
        elif word not in {"is", "was", "your", "the", "of", "a", "new"}:
            break
    return frozenset(kinds)


def _airline_code(text: str) -> bool:
    """ "LX", "AC", "U2", "TP": two capitals or a capital and a digit."""
    return (
        len(text) == 2
        and text.isupper()
        and text.isalnum()
        and any(c.isalpha() for c in text)
        and text[0].isalpha()
    )


def _flight_digits(token: Token) -> bool:
    return token.text.isdecimal() and 1 <= len(token.text) <= 4


def _decimal_like(text: str) -> bool:
    """ "1.5", "12,50", "3.410": a quantity, not a code."""
    return all(c.isdigit() or c in ".,-" for c in text) and any(c in ".," for c in text)


# --------------------------------------------------------------------------------- counts


def _counts(
    pieces: Sequence[Token], free: Callable[[Token], bool], reader: MoneyReader
) -> list[CountValue]:
    found: list[CountValue] = []
    for index, token in enumerate(pieces):
        if not free(token):
            continue
        value = _count_number(token.text, reader)
        if value is None or index + 1 >= len(pieces):
            continue
        if token.text.isdecimal() and len(token.text) == 4 and 1900 <= value <= 2100:
            continue  # "the Summer 2026 issue": a year
        nouns = _nouns_after(pieces, index + 1)
        before = pieces[index - 1].lower if index else ""
        after = {p.lower for p in pieces[index + 1 : index + 4]}
        remainder = before in _REMAINDER_BEFORE or bool(after & _REMAINDER_AFTER)
        unit = pieces[index + 1].lower
        if (stem(unit) in _TIME_UNITS and not unit.endswith("ly")) or not (nouns or remainder):
            continue  # "2 hours 45 minutes": a span of time, not a number of things
        if before in _SUBSET_BEFORE:
            continue  # "the first two nights": some of the things, not how many there are
        found.append(
            CountValue(
                value, nouns - _REMAINDER_AFTER, token.text, token.start, token.end, remainder
            )
        )
    return found


_REMAINDER_BEFORE: Final = word_set("remaining")
_SUBSET_BEFORE: Final = word_set("first last next")
_REMAINDER_AFTER: Final = word_set("more left remaining still outstanding")


def _count_number(text: str, reader: MoneyReader | None = None) -> Decimal | None:
    """A whole number of things: "3", "1,500", "three"."""
    if text.isdecimal():
        return Decimal(text) if len(text) <= 6 else None
    if text.isalpha():
        return number_word(text)
    if reader is not None and any(c in text for c in ",.\u202f'") and text[:1].isdigit():
        value = reader.number(text)
        if value is not None and value == value.to_integral_value() and value < 10**7:
            return value
    return None


def _nouns_after(pieces: Sequence[Token], index: int) -> frozenset[str]:
    """The noun stems after a number: "3 checked bags" -> {check, bag}; "5 of the 8
    sessions" -> the nouns after 8."""
    words = [p.lower for p in pieces[index : index + 4]]
    if words[:1] == ["of"]:
        rest = [w for w in words[1:] if w not in {"the", "your", "my", "our", "its"}]
        if rest and (_count_number(rest[0], None) is not None):
            at = index + 1 + words[1:].index(rest[0]) + 1
            return _nouns_after(pieces, at)
    nouns = set()
    for piece, word in zip(pieces[index : index + 3], words[:3], strict=False):
        if not word.isalpha() or word in STOP_WORDS or word in _NOT_NAMES:
            break
        if piece.text[:1].isupper():
            break  # "14 Marram Close": a street number, not fourteen of something
        nouns.add(stem(word))
    return frozenset(nouns)


# ---------------------------------------------------------------------------------- names


def _capitalised(token: Token) -> bool:
    """A word of a person's or a place's name: capitalised, letters only, not a date
    word, and not an acronym ("VAT", "ID", "UTC") or a company's legal form."""
    text = token.text
    if text.lower().startswith(("i'", "i\u2019")):
        return False  # "I've", "I'm": the agent, no name
    return (
        text[:1].isupper()
        and text.replace("-", "").replace("'", "").replace(".", "").isalpha()
        and text.lower().rstrip(".") not in _NOT_NAMES
        and not (text.isupper() and len(text) <= 4)
        and text.lower().rstrip(".") not in _LEGAL_FORMS
    )


def _names(text: str, pieces: Sequence[Token], free: Callable[[Token], bool]) -> list[NameValue]:
    found: list[NameValue] = []
    index = 0
    while index < len(pieces):
        token = pieces[index]
        initial = (  # "E. Yilmaz"
            len(token.text) == 1
            and token.text.isupper()
            and index + 1 < len(pieces)
            and _capitalised(pieces[index + 1])
        )
        if not free(token) or not (initial or _capitalised(token)) or index == 0:
            index += 1
            continue
        end = index
        while end + 1 < len(pieces) and _capitalised(pieces[end + 1]) and free(pieces[end + 1]):
            end += 1
        run = pieces[index : end + 1]
        after = pieces[end + 1].lower.rstrip(".") if end + 1 < len(pieces) else ""
        if after in _LEGAL_FORMS:  # a company
            index = end + 1
            continue
        cue = _cue(pieces, index, end)
        if cue is not None or end > index:
            role, words = cue or ("any", frozenset())
            # a title is not part of the name; a trailing place word ("Leuven store") is
            names = [p for p in run if p.lower not in _TITLES]
            if role == "place":
                names = [p for p in names if stem(p.lower) not in _PLACE_WORDS]
            if names:
                found.append(
                    NameValue(
                        " ".join(p.text for p in names),
                        role,
                        words,
                        names[0].start,
                        names[-1].end,
                    )
                )
        index = end + 1
    return found


def _cue(pieces: Sequence[Token], first: int, last: int) -> tuple[str, frozenset[str]] | None:
    """What introduces a name: a title ("Dr."), a role ("technician", "account manager"),
    what the person did ("approved by Aoife Brennan", "Kasper Holm signed for it"), a
    place word before or after ("airport", "store"), or a place preposition ("to
    Lisbon"). A person's cue holds the stems that say their role."""
    before = [p.lower.rstrip(",") for p in pieces[max(0, first - 2) : first]]
    role = _role_words(pieces, first, last)
    if pieces[first].lower in _TITLES or (before and before[-1] in _TITLES):
        return "person", frozenset({"title"}) | role
    wide = {stem(p.lower.rstrip(",")) for p in pieces[max(0, first - 4) : first]}
    roles = ({stem(w) for w in before} | wide) & _PERSON_ROLES
    if roles or role:
        return "person", frozenset(roles) | role
    inside = {stem(p.lower) for p in pieces[first : last + 1]} & _PLACE_WORDS
    after = {stem(p.lower) for p in pieces[last + 1 : last + 3]} & _PLACE_WORDS
    places = inside | after  # "our Milan service centre"
    if places:
        return "place", frozenset(places)
    if before and before[-1] in _PLACE_PREPOSITIONS:  # "to Lisbon"; "the depot in Olesnica"
        return "place", frozenset({before[-1], *({stem(w) for w in before[:-1]} & _PLACE_WORDS)})
    return None


_DEED: Final = frozenset({"by"})


def _role_words(pieces: Sequence[Token], first: int, last: int) -> frozenset[str]:
    """What the claim says the person did: the verb before "by" ("fitted on 8 January
    by ...") or right after the name ("... signed for it")."""
    out: set[str] = set()
    if (first and pieces[first - 1].lower == "by") or (
        first > 1 and pieces[first - 2].lower == "by" and pieces[first - 1].lower in _TITLES
    ):
        at = first - 1 if pieces[first - 1].lower == "by" else first - 2
        for back in range(at - 1, max(-1, at - 7), -1):
            word = pieces[back].lower
            if word.endswith("ed") or word in _DONE_FORMS:
                out.add(stem(word))
                break
    for piece in pieces[last + 1 : last + 3]:
        word = piece.lower
        if word in _CONJUNCTIONS:
            break  # "sold by Iberia but operated by Vueling": the verb is another's
        if word.endswith("ed") or word in _DONE_FORMS:
            out.add(stem(word))
            break
    return frozenset(out)


_CONJUNCTIONS: Final = word_set("but and or while whereas though although")
_DONE_FORMS: Final = word_set("done made sent paid signed taken given")
