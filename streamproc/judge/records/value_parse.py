"""The values a claim asserts, read from its text: ratings, counts, amounts with units,
the polarity of an attribute mention, and (from :mod:`streamproc.judge.records.hours_parse`)
opening hours and day sets.

Split from :mod:`streamproc.judge.records.structured` so that the record side stays readable.
Everything here is precompiled and works on one claim string; nothing reads evidence.
The parsers return nothing when the wording is ambiguous, because a wrong reading turns
a correct sentence into a flagged one.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from streamproc.judge.records.hours_parse import (
    ALL_DAYS,
    DAYS,
    HoursClaim,
    day_label,
    hours_claims,
    minutes_label,
)

__all__ = [
    "ALL_DAYS",
    "DAYS",
    "ClausePolarity",
    "HoursClaim",
    "NumberClaim",
    "RatingClaim",
    "day_label",
    "hours_claims",
    "is_meta",
    "is_negated_at",
    "minutes_label",
    "number_word",
    "rating_claims",
    "reported_by_reviewer",
    "unit_claims",
]


_NUMBER_WORDS: Final = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
_NUMWORD = "|".join(_NUMBER_WORDS)


def number_word(text: str) -> Decimal | None:
    """ "4.5" -> 4.5, "three and a half" -> 3.5, "four" -> 4; None for anything else."""
    text = text.strip().lower()
    half = Decimal("0.5") if text.endswith("and a half") else Decimal(0)
    head = text.removesuffix("and a half").strip()
    if head in _NUMBER_WORDS:
        return _NUMBER_WORDS[head] + half
    try:
        return Decimal(head) + half
    except ArithmeticError:
        return None


# ------------------------------------------------------------------------ claim context

_REVIEWER = re.compile(
    r"\b(?:customers?|reviewers?|patrons?|guests?|diners?|visitors?|users?|someone|one|"
    r"another|others)\b[^.;]{0,40}?\b(?:mention\w*|said|says|stat(?:ed|es|ing)|not(?:ed|es)|"
    r"report\w*|prais\w*|complain\w*|express\w*|highlight\w*|describ\w*|recommend\w*|rav\w*|"
    r"compliment\w*|comment\w*|found|felt|enjoyed|appreciated|loved|liked|wrote|claim\w*|"
    r"gave|rated|warn\w*|suggest\w*|point\w*|shar\w*|lauded|encourag\w*)\b"
    r"|\baccording to (?:the |a |one |some |customer |their )*reviews?\b"
    r"|\breviews? (?:mention|say|state|note|highlight|indicate|suggest|praise|describe)\w*"
    r"|\breview(?:er)?s?\b",
    re.IGNORECASE,
)
_META = re.compile(
    r"\b(?:whether|unclear|unknown|no information|no data|no details|information (?:about|on|"
    r"regarding)|details (?:about|on|regarding)|not (?:specified|mentioned|stated|listed|"
    r"indicated|clear|provided in)|(?:does|do)(?: not|n't) (?:mention|specify|say|indicate|"
    r"list|include information))\b",
    re.IGNORECASE,
)


def reported_by_reviewer(claim: str) -> bool:
    """Does the claim report what a review said? Then it is about the review text, not
    the business's attributes (only review stars are compared)."""
    return _REVIEWER.search(claim) is not None


def is_meta(claim: str) -> bool:
    """ "Information about parking is not available": a claim about the record itself."""
    return _META.search(claim) is not None


# ----------------------------------------------------------------------------- negation

_BOUNDARY = re.compile(
    r"[.;:!?()]|\b(?:but|however|while|although|though|whereas|yet|except)\b"
    r"|,\s*(?:and\s+|or\s+)?(?:it\s+|they\s+|there\s+|the \w+\s+)?(?:also\s+)?"
    r"(?:offers?|has|have|provides?|is|are|does|do|accepts?|takes?|serves?|can|features?|"
    r"caters?|includes?|allows?|boasts?|welcomes?)\b",
    re.IGNORECASE,
)
_NEGATION_BEFORE = re.compile(
    r"\b(?:not|no|never|neither|nor|without|lacks?|lacking|cannot|none)\b|n't\b", re.IGNORECASE
)
_NEGATION_AFTER = re.compile(  # used with match(claim, end, right): anchored there
    r"[^.;]{0,60}?(?:\b(?:(?:is|are)(?:n't| not)(?: \w+)? (?:available|offered|provided|"
    r"accepted|an option|possible)|unavailable|not (?:available|offered|provided|accepted))\b"
    r"|\b(?:is|are)(?:n't| not)\s*$)",
    re.IGNORECASE,
)
_HEDGED = re.compile(
    r"\b(?:requir\w*|necessary|needed|recommended|limited|only|if|may|might|could|nearby)\b",
    re.IGNORECASE,
)


_BOUNDARY_AT = re.compile(rf"(?=({_BOUNDARY.pattern}))", re.IGNORECASE)  # every start


class ClausePolarity:
    """The polarity of attribute mentions in one claim, its clauses found once.

    Scanning the claim for clause boundaries, hedges and negations per mention costs the
    claim's length each time, and a claim can mention an attribute thousands of times; so
    the scans run once and each mention is a few bisections. Mentions start and end at
    word boundaries (every concept pattern does), so no word straddles their edges.
    """

    __slots__ = ("_boundary_starts", "_chain_ends", "_claim", "_hedges", "_neg_ends", "_negs")

    def __init__(self, claim: str) -> None:
        self._claim = claim
        self._chain_ends = [m.end() for m in _BOUNDARY.finditer(claim)]
        self._boundary_starts = [m.start() for m in _BOUNDARY_AT.finditer(claim)]
        self._hedges = [m.start() for m in _HEDGED.finditer(claim)]
        negations = list(_NEGATION_BEFORE.finditer(claim))
        self._negs = [m.start() for m in negations]
        self._neg_ends = [m.end() for m in negations]

    def clause(self, start: int, end: int) -> tuple[int, int]:
        """The span of the clause around ``claim[start:end]``: from the end of the last
        boundary before it to the start of the first boundary after it."""
        before = bisect_right(self._chain_ends, start)
        after = bisect_left(self._boundary_starts, end)
        left = self._chain_ends[before - 1] if before else 0
        right = self._boundary_starts[after] if after < len(self._boundary_starts) else None
        return left, len(self._claim) if right is None else right

    def at(self, start: int, end: int) -> bool | None:
        """See :func:`is_negated_at`."""
        left, right = self.clause(start, end)
        hedge = bisect_left(self._hedges, left)
        if hedge < len(self._hedges) and self._hedges[hedge] < right:
            return None
        negation = bisect_left(self._negs, left)
        if negation < len(self._negs) and self._neg_ends[negation] <= start:
            return True
        return _NEGATION_AFTER.match(self._claim, end, right) is not None


def is_negated_at(claim: str, start: int, end: int) -> bool | None:
    """Polarity of the mention at ``claim[start:end]``: True when its clause negates it,
    False when plainly asserted, None when hedged ("reservations are required", "limited
    parking") and so not a yes/no statement. For many mentions of one claim, build one
    :class:`ClausePolarity`."""
    return ClausePolarity(claim).at(start, end)


# ------------------------------------------------------------------------------- ratings

_LOOKBACK: Final = 64
"""How far before a value a qualifier ("about", "out of") is looked for: the longest is
a few words; searching all the text before each value costs its length per value."""


def _ends_with(pattern: re.Pattern[str], text: str, end: int) -> bool:
    """Does ``text[:end]`` end with a match of ``pattern`` (a "...$" pattern) that starts
    at most ``_LOOKBACK`` characters before ``end``? ``pos`` keeps the characters before
    the window visible to ``\\b`` and lookbehinds, so a word cut by the window does not
    match where the whole word would not."""
    return pattern.search(text, max(0, end - _LOOKBACK), end) is not None


_STAR_NUMBER = rf"\d(?:\.\d+)?|(?:{_NUMWORD})(?: and a half)?"
_STARS = re.compile(
    rf"(?<![\w.])(?P<n>{_STAR_NUMBER})(?:\s*-\s*|\s+)stars?\b(?P<review>\s+reviews?)?"
    r"|\brat(?:ing|ed)(?:\s+(?:of|at|with|is|was|by|to be))?[:\s]+(?P<r>\d(?:\.\d+)?)"
    r"(?![\w.])(?!\s*(?:-\s*)?stars?\b)(?!\s*/)"
    r"|(?<![\w.])(?P<slash>\d(?:\.\d+)?)\s*/\s*5(?:\.0)?(?![\d.])",
    re.IGNORECASE,
)
_OUT_OF = re.compile(r"\bout\s+of\s*$", re.IGNORECASE)  # with _ends_with, like _APPROXIMATE
_ALL_REVIEWS = re.compile(r"\b(?:average|all|every|most|majority|overall|mostly)\b", re.I)
_REVIEW_AVERAGE = re.compile(r"\baverage\b(?!\s+(?:star\s+)?rating)[^.;]*|\breviews?\b", re.I)
_GAVE = re.compile(r"\b(?:gave|giving|left|awarded)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RatingClaim:
    """A star rating the claim states; ``review`` when it is one review's stars."""

    value: Decimal
    written: str
    review: bool


def rating_claims(claim: str) -> list[RatingClaim]:
    """ "rating of 4.0 stars out of 5.0" -> 4.0 (business); "One customer gave it 5 stars"
    -> 5 (a review); "an average of 4.5-star reviews" -> nothing (an aggregate of reviews
    the record does not state)."""
    out: list[RatingClaim] = []
    if len({m[0].split()[0].lower() for m in _REVIEW_AVERAGE.finditer(claim)}) > 1:
        return out  # "an average of 4.5-star reviews": an aggregate no field states
    gave = _GAVE.search(claim) is not None
    all_reviews = _ALL_REVIEWS.search(claim) is not None
    for match in _STARS.finditer(claim):
        if _ends_with(_OUT_OF, claim, match.start()):
            continue
        written = match["n"] or match["r"] or match["slash"]
        value = number_word(written)
        if value is None or not 0 <= value <= 10:
            continue
        review = bool(match["review"]) or gave
        if review and all_reviews:
            continue  # "an average of 4.5-star reviews": no field states that
        out.append(RatingClaim(value, written, review))
    return out


# ----------------------------------------------------------------- counts, money and units

_COUNT = re.compile(
    rf"\b(?:based on|from|received|has|have|with|of|only|includes?|total of)\s+"
    rf"(?P<n>\d{{1,6}}|{_NUMWORD})\s+(?:customer\s+|user\s+|online\s+)?(?P<noun>[a-z]{{3,}})\b",
    re.IGNORECASE,
)
# Looked for at the end of the text before a number, through _ends_with.
_APPROXIMATE = re.compile(
    r"\b(?:about|around|approximately|roughly|nearly|almost|over|under|up to|less than|"
    r"more than|at least|at most|starting at|from|just|some|within|per|than)\s*$",
    re.IGNORECASE,
)

UNITS: Final[dict[str, tuple[str, Decimal]]] = {
    "mm": ("length", Decimal("0.001")), "cm": ("length", Decimal("0.01")),
    "m": ("length", Decimal(1)), "meters": ("length", Decimal(1)),
    "metres": ("length", Decimal(1)), "km": ("length", Decimal(1000)),
    "kilometers": ("length", Decimal(1000)), "kilometres": ("length", Decimal(1000)),
    "mi": ("length", Decimal("1609.344")), "miles": ("length", Decimal("1609.344")),
    "mile": ("length", Decimal("1609.344")), "ft": ("length", Decimal("0.3048")),
    "feet": ("length", Decimal("0.3048")), "g": ("mass", Decimal("0.001")),
    "grams": ("mass", Decimal("0.001")), "kg": ("mass", Decimal(1)),
    "kilograms": ("mass", Decimal(1)), "lb": ("mass", Decimal("0.45359237")),
    "lbs": ("mass", Decimal("0.45359237")), "pounds": ("mass", Decimal("0.45359237")),
    "min": ("time", Decimal(60)), "mins": ("time", Decimal(60)),
    "minutes": ("time", Decimal(60)), "h": ("time", Decimal(3600)),
    "hrs": ("time", Decimal(3600)), "hours": ("time", Decimal(3600)),
    "days": ("time", Decimal(86400)), "ml": ("volume", Decimal("0.001")),
    "l": ("volume", Decimal(1)), "liters": ("volume", Decimal(1)),
    "litres": ("volume", Decimal(1)), "kb": ("data", Decimal(1000)),
    "mb": ("data", Decimal(10**6)), "gb": ("data", Decimal(10**9)),
    "tb": ("data", Decimal(10**12)), "kwh": ("energy", Decimal(1)),
}  # fmt: skip
_UNIT_ALTERNATION = "|".join(sorted(UNITS, key=len, reverse=True))
_UNIT_VALUE = re.compile(
    rf"(?<![\w.,:$€£])(?P<n>\d[\d,]*(?:\.\d+)?)\s*(?:-\s*)?(?P<unit>{_UNIT_ALTERNATION})\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class NumberClaim:
    """A number the claim states with what it counts or measures."""

    value: Decimal
    written: str
    noun: str  # the counted noun ("reviews") or the unit ("km")
    start: int


def count_claims(claim: str) -> Iterator[NumberClaim]:
    """ "based on three reviews" -> 3 reviews; approximations are skipped."""
    for match in _COUNT.finditer(claim):
        value = number_word(match["n"])
        if value is not None and not _ends_with(_APPROXIMATE, claim, match.start("n")):
            yield NumberClaim(value, match["n"], match["noun"].lower(), match.start())


def unit_claims(claim: str) -> Iterator[NumberClaim]:
    """ "2.5 km", "300 g", "45 minutes"; approximations ("about 3 km") are skipped."""
    for match in _UNIT_VALUE.finditer(claim):
        if _ends_with(_APPROXIMATE, claim, match.start()):
            continue
        value = number_word(match["n"].replace(",", ""))
        if value is not None:
            yield NumberClaim(value, match[0], match["unit"].lower(), match.start())


_AMOUNT = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_CURRENCY = r"[$€£]|\b(?:EUR|USD|GBP|CHF|CAD|AUD)\b"
_MONEY = re.compile(
    rf"(?P<cur>{_CURRENCY})\s?(?P<num>{_AMOUNT})(?![.,]?\d)"
    rf"|(?<![\w.,])(?P<num2>{_AMOUNT})\s?(?P<cur2>[€£]|\b(?:EUR|USD|GBP|CHF|CAD|AUD|"
    r"euros?|dollars?)\b)",
    re.IGNORECASE,
)
_CURRENCY_CODES: Final = {"$": "USD", "€": "EUR", "£": "GBP", "euro": "EUR", "dollar": "USD"}
_PRICE_WORDS = re.compile(r"\b(?:price[sd]?|costs?|fees?|fares?|charges?|sells?)\b", re.I)


@dataclass(frozen=True, slots=True)
class MoneyClaim:
    """An amount with its currency (None when the claim names none)."""

    value: Decimal
    currency: str | None
    written: str


def money_claims(claim: str) -> Iterator[MoneyClaim]:
    """Prices the claim states ("costs $12.50", "a fee of EUR 5"); only in a sentence
    about a price, and never an approximation ("just under $10")."""
    if not _PRICE_WORDS.search(claim):
        return
    for match in _MONEY.finditer(claim):
        if _ends_with(_APPROXIMATE, claim, match.start()):
            continue
        number = (match["num"] or match["num2"]).replace(",", "")
        raw = (match["cur"] or match["cur2"]).lower().rstrip("s")
        currency = _CURRENCY_CODES.get(raw, raw.upper())
        yield MoneyClaim(Decimal(number), currency, match[0].strip())


# ------------------------------------------------------------------------ attribute lexicon


@dataclass(frozen=True, slots=True)
class Concept:
    """An attribute a claim can assert or deny, and how a record names it.

    ``key`` is searched in a field's path words ("attributes restaurants reservations");
    ``support`` in the record's text values, which ground the concept too (a review that
    mentions delivery). ``lexicon``: a missing field is FIELD_NOT_IN_RECORD - when
    ``missing_key`` is set, only in a record that has such a field, empty (an "Ambience"
    of null says nothing about "casual"; a record without any Ambience is of another kind).
    """

    name: str
    mention: re.Pattern[str]
    key: re.Pattern[str]
    support: str
    lexicon: bool = True
    needs_parking: bool = False
    needs_ambience: bool = False
    generic_parking: bool = False
    missing_key: str | None = None


def _concept(
    name: str, mention: str, key: str, support: str, missing_key: str | None = None, **flags: bool
) -> Concept:
    return Concept(
        name,
        re.compile(mention, re.IGNORECASE),
        re.compile(key, re.IGNORECASE),
        support,
        missing_key=missing_key,
        **flags,
    )


_AMBIENCE_WORDS: Final = {
    "casual": r"\bcasual\b", "classy": r"\bclassy\b", "trendy": r"\btrendy\b",
    "romantic": r"\bromantic\b", "intimate": r"\bintimate\b", "upscale": r"\bupscale\b",
    "touristy": r"\btouristy\b|\btourist trap\b", "divey": r"\bdive(?:y| bar)\b",
    "hipster": r"\bhipster\b|\bhip\b(?= (?:atmosphere|ambiance|ambience|vibe|environment|"
    r"setting|spot|place|crowd|decor))",
}  # fmt: skip

CONCEPTS: Final[tuple[Concept, ...]] = (
    _concept("reservations", r"\breservations?\b|\bbook (?:a )?table\b", r"reservation",
             r"reserv|book"),
    _concept("takeout", r"\btake[- ]?outs?\b|\btake[- ]?away\b|\bcarry[- ]?out\b|\bpick[- ]?up\b",
             r"take ?out|takeaway|pick ?up", r"take[- ]?out|to[- ]go|pick[- ]?up|carry"),
    _concept("outdoor seating", r"\boutdoor (?:seating|dining|tables?|area|patio)|\bpatio\b",
             r"outdoor", r"outdoor|outside|patio"),
    _concept("wifi", r"\bwi-?fi\b|\bwireless internet\b", r"wi-?fi|wireless", r"wi-?fi|internet"),
    _concept("good for groups", r"\b(?:good|great|suitable|ideal|perfect|accommodat\w*|cater\w*)"
             r"\b[^.;]{0,25}\bgroups?\b|\bgroup (?:outings?|dining|gatherings?)\b",
             r"groups?", r"group|party|parties", lexicon=False),
    _concept("good for kids", r"\b(?:kid|child)[- ]friendly\b|\bgood for (?:kids|children)\b"
             r"|\bkids'? menu\b|\bchildren'?s menu\b", r"kids|children", r"kid|child|famil"),
    _concept("delivery", r"\bdeliver(?:y|ies|s)?\b", r"deliver", r"deliver"),
    _concept("wheelchair accessible", r"\bwheelchair\b|\bhandicap(?:ped)?[- ]accessible\b",
             r"wheelchair|accessib", r"wheelchair|accessib|handicap"),
    _concept("alcohol", r"\balcohol\w*|\bfull bar\b|\bbeers?\b|\bwines?\b|\bcocktails?\b"
             r"|\bliquor\b|\btequila\b|\bmezcal\b|\bmargaritas?\b",
             r"alcohol|full bar|beer|wine", r"alcohol|\bbars?\b|beer|wine|cocktail|liquor|"
             r"tequila|mezcal|margarita|sake|drink|brew|pub"),
    _concept("credit cards", r"\bcredit cards?\b|\bcards? (?:are )?accepted\b",
             r"credit ?card|cards", r"card|credit"),
    _concept("dogs allowed", r"\bdogs? (?:are )?(?:allowed|welcome)\b|\b(?:dog|pet)[- ]friendly\b"
             r"|\bpets? (?:are )?(?:allowed|welcome)\b", r"dogs?|pets?", r"dog|pet"),
    _concept("happy hour", r"\bhappy hours?\b", r"happy ?hour", r"happy hour"),
    _concept("tv", r"\bTVs?\b|\btelevisions?\b", r"\btv\b|television", r"\btv|television"),
    _concept("noise level", r"\bnoise level\b|\bnoisy\b", r"noise", r"noise|noisy|loud|quiet"),
    _concept("price range", r"\bprice range\b", r"price ?range", r"price range|\$\$"),
    _concept("parking", r"\bparking\b", r"parking", r"park", generic_parking=True),
    _concept("valet parking", r"\bvalet\b", r"parking valet", r"valet", lexicon=False,
             needs_parking=True),
    _concept("garage parking", r"\bgarage\b", r"parking garage", r"garage", lexicon=False,
             needs_parking=True),
    _concept("street parking", r"\bstreet parking\b|\bon the street\b|\bon-street\b",
             r"parking street", r"street", lexicon=False, needs_parking=True),
    _concept("lot parking", r"\bparking lots?\b|\blot parking\b|\b(?:in|on|or|and) (?:a |the |"
             r"its |their )?(?:\w+ )?lot\b", r"parking lot", r"\blot", lexicon=False,
             needs_parking=True),
    _concept("validated parking", r"\bvalidat\w*", r"parking validated", r"validat",
             lexicon=False, needs_parking=True),
    *(
        _concept(word, pattern, rf"(?:ambien|atmosphere).* {word}$", word, r"ambien",
                 needs_ambience=True)
        for word, pattern in _AMBIENCE_WORDS.items()
    ),
)  # fmt: skip

_YES: Final = frozenset({"yes", "true", "free", "paid", "y", "1", "available"})
_NO: Final = frozenset({"no", "false", "none", "n", "0", "unavailable"})


def bool_value(value: object) -> bool | None:
    """A record value read as yes/no: True, "yes", "free" (WiFi), "u'no'"; else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower().removeprefix("u").strip("'\"")
        return True if text in _YES else False if text in _NO else None
    return None


# ------------------------------------------------------------------------------ places

US_STATES: Final = {
    "alabama": "AL", "alaska": "AK", "arizona": "AZ", "arkansas": "AR", "california": "CA",
    "colorado": "CO", "connecticut": "CT", "delaware": "DE", "florida": "FL", "georgia": "GA",
    "hawaii": "HI", "idaho": "ID", "illinois": "IL", "indiana": "IN", "iowa": "IA",
    "kansas": "KS", "kentucky": "KY", "louisiana": "LA", "maine": "ME", "maryland": "MD",
    "massachusetts": "MA", "michigan": "MI", "minnesota": "MN", "mississippi": "MS",
    "missouri": "MO", "montana": "MT", "nebraska": "NE", "nevada": "NV",
    "new hampshire": "NH", "new jersey": "NJ", "new mexico": "NM", "new york": "NY",
    "north carolina": "NC", "north dakota": "ND", "ohio": "OH", "oklahoma": "OK",
    "oregon": "OR", "pennsylvania": "PA", "rhode island": "RI", "south carolina": "SC",
    "south dakota": "SD", "tennessee": "TN", "texas": "TX", "utah": "UT", "vermont": "VT",
    "virginia": "VA", "washington": "WA", "west virginia": "WV", "wisconsin": "WI",
    "wyoming": "WY", "district of columbia": "DC",
}  # fmt: skip
_STATE_CODES: Final = frozenset(US_STATES.values())
_CAP_WORDS = r"[A-Z][a-zA-Z.'-]+(?:\s+[A-Z][a-zA-Z.'-]+){0,3}"
_CITY_STATE = re.compile(
    rf"(?:\bin\s+|,\s*)(?P<city>{_CAP_WORDS}),\s*(?P<state>[A-Z]{{2}}|[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)\b"
)
_ADDRESS = re.compile(
    r"\b(?:at|on)\s+(?P<num>\d{1,6})\s+(?P<street>[A-Z][\w.'-]*(?:\s+[A-Z][\w.'-]*){0,3})"
)


def state_code(text: str) -> str | None:
    """ "California" / "CA" -> "CA"; None when it is no US state."""
    text = text.strip()
    if text.upper() in _STATE_CODES and (text.isupper() or len(text) > 2):
        return text.upper()
    return US_STATES.get(text.lower())


def city_states(claim: str) -> Iterator[tuple[str, str]]:
    """ "in Santa Barbara, California" -> ("Santa Barbara", "CA")."""
    for match in _CITY_STATE.finditer(claim):
        code = state_code(match["state"])
        if code is not None:
            yield match["city"], code


def addresses(claim: str) -> Iterator[tuple[str, str]]:
    """ "located at 5134 Hollister Ave" -> ("5134", "Hollister Ave")."""
    for match in _ADDRESS.finditer(claim):
        yield match["num"], match["street"]
