"""Amounts with their currency, read the way a locale writes them.

"2,500.00 EUR", "2500 EUR" and "EUR 2.500,00" are one amount; "$118.48" is not "$118.84".
Numbers are parsed by Babel (``babel.numbers.parse_decimal``, strict: a grouping that
does not fit the locale is refused rather than guessed), first in the configured locale,
then in a few others - so "2.500,00" reads as 2500 under ``en_US`` too, where it can only
mean that, while an ambiguous "1,200" means what the configured locale says. Currencies
are Babel's: ISO codes, the locale's symbols ("€", "$", "CA$") and names ("euros"); a name
several currencies share ("dollars") gives the amount no currency, so only its value is
compared.

Amounts are compared at the precision the claim writes them: "EUR 2,500" is 2500.00,
"119 euros" is 118.84 rounded to whole euros, and a hedged "about 120" is within the
rounding of its last significant digit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from functools import lru_cache
from typing import Final

from babel import Locale, UnknownLocaleError
from babel.numbers import NumberFormatError, get_currency_name, list_currencies, parse_decimal

__all__ = ["DEFAULT_LOCALE", "Money", "MoneyReader", "parse_amount"]

DEFAULT_LOCALE: Final = "en_US"
# Tried after the configured locale, for numbers only one of them can parse.
_FALLBACK_LOCALES: Final = ("en_US", "de_DE", "fr_FR", "de_CH")
# Where symbols such as "US$", "CA$" and "A$" come from, after the configured locale.
_SYMBOL_LOCALES: Final = ("en", "en_GB")
_MAX_NUMBER_CHARS: Final = 32


@dataclass(frozen=True, slots=True)
class Money:
    """An amount as written: its value, currency (None when not written or ambiguous),
    the text, and whether it was hedged ("about", "roughly")."""

    value: Decimal
    currency: str | None
    written: str
    approximate: bool = False
    readings: tuple[Decimal, ...] = ()
    """Every value the written number may be ("1.200": 1200 in de_DE, 1.2 in en_US);
    ``value`` is the configured locale's."""

    def matches(self, value: Decimal, currency: str | None) -> bool:
        """Is ``value`` (a record's) this amount, at the precision written here, in any
        reading of it?"""
        if self.currency and currency and self.currency != currency:
            return False
        return any(
            same_at_precision(reading, value, approximate=self.approximate)
            for reading in (self.readings or (self.value,))
        )


def same_at_precision(claimed: Decimal, recorded: Decimal, *, approximate: bool) -> bool:
    """``recorded`` rounded to the claim's precision equals the claim: "119" for 118.84,
    "2,500" for 2500.00; hedged, to its last significant digit ("about 120" for 118.84)."""
    if claimed == recorded:
        return True
    exponent = claimed.normalize().as_tuple().exponent if approximate else None
    if not isinstance(exponent, int):
        exponent = claimed.as_tuple().exponent
        if not isinstance(exponent, int):
            return False
    try:
        rounded = recorded.quantize(Decimal(1).scaleb(exponent), rounding=ROUND_HALF_UP)
    except InvalidOperation:
        return False
    return rounded == claimed


class MoneyReader:
    """Numbers and currencies as ``locale`` (and, for what it cannot parse, a few common
    locales) writes them. Built once per judge; reading is pure."""

    def __init__(self, locale: str = DEFAULT_LOCALE) -> None:
        try:
            parsed = Locale.parse(locale)
        except (UnknownLocaleError, ValueError, TypeError) as error:
            raise ValueError(f"unknown locale {locale!r}: {error}") from None
        self.locale = str(parsed)
        self._locales = tuple(dict.fromkeys((self.locale, *_FALLBACK_LOCALES)))
        self._codes = frozenset(list_currencies())
        self._symbols = _symbols((self.locale, *_SYMBOL_LOCALES))
        self._names = _names(self._codes, parsed, frozenset(self._symbols.values()))

    # -- numbers ------------------------------------------------------------------------

    def number(self, text: str) -> Decimal | None:
        """A decimal as some locale writes it ("2,500.00", "2.500,00", "1 249,90"); the
        configured locale first. None for anything else."""
        text = text.strip()
        signed = text[:1] in "-+" and text[1:2].isdecimal()
        if not text or len(text) > _MAX_NUMBER_CHARS or not (text[0].isdigit() or signed):
            return None
        return _parse_number(text, self._locales)

    def readings(self, text: str) -> tuple[Decimal, ...]:
        """Every value ``text`` has in some locale, the configured locale's first
        ("1.200": 1.2 and 1200 under en_US)."""
        first = self.number(text)
        if first is None:
            return ()
        text = text.strip()
        out = [first]
        for locale in self._locales:
            reading = _parse_number(text, (locale,))
            if reading is not None and reading not in out:
                out.append(reading)
        return tuple(out)

    # -- currencies ---------------------------------------------------------------------

    def currency(self, word: str) -> str | None:
        """The ISO code of a code, symbol or unambiguous name ("EUR", "€", "euros")."""
        if word.upper() in self._codes and (word.isupper() or len(word) == 3):
            return word.upper() if word.isupper() else None
        return self._symbols.get(word) or self._names.get(word.lower())

    def is_currency_word(self, word: str) -> bool:
        """A currency word, even one several currencies share ("dollars")."""
        return self.currency(word) is not None or word.lower() in self._names

    def split_symbol(self, token: str) -> tuple[str | None, str, bool]:
        """(currency, rest, had a currency) for a token with a symbol or code glued on:
        "€1,200.00" -> ("EUR", "1,200.00", True), "1.249,90€" -> ("EUR", "1.249,90",
        True), "US$5" -> ("USD", "5", True)."""
        for symbol, code in self._symbols_by_length():
            if token.startswith(symbol) and len(token) > len(symbol):
                return code, token[len(symbol) :], True
            if token.endswith(symbol) and len(token) > len(symbol):
                return code, token[: -len(symbol)], True
        return None, token, False

    def _symbols_by_length(self) -> Iterable[tuple[str, str]]:
        return _by_length(tuple(self._symbols.items()))

    # -- whole values -------------------------------------------------------------------

    def amount(self, text: str) -> tuple[Decimal, str | None] | None:
        """A record's value read as an amount: "118.84", "EUR 1.249,90", "$75.00",
        "118,84 €". None when the text is anything more than a number and a currency."""
        parts = _join_space_groups(text.split())
        if not 1 <= len(parts) <= 3:
            return None
        currency: str | None = None
        numbers: list[Decimal] = []
        for part in parts:
            code = self.currency(part)
            if code is not None:
                currency = code
                continue
            glued, rest, had = self.split_symbol(part)
            value = self.number(rest)
            if value is None:
                return None
            numbers.append(value)
            currency = glued if had else currency
        if len(numbers) != 1:
            return None
        return numbers[0], currency


def _join_space_groups(parts: list[str]) -> list[str]:
    """ "NOK 6 500" -> ["NOK", "6500"]: thousands set apart by spaces, joined."""
    out: list[str] = []
    for part in parts:
        grouped = (
            bool(out)
            and out[-1].isdecimal()
            and len(part) >= 3
            and part[:3].isdecimal()
            and (len(part) == 3 or part[3] in ",.")
        )
        if grouped:
            out[-1] += part
        else:
            out.append(part)
    return out


@lru_cache(maxsize=8_192)
def _parse_number(text: str, locales: tuple[str, ...]) -> Decimal | None:
    for locale in locales:
        try:
            return parse_decimal(text, locale=locale, strict=True)
        except (NumberFormatError, InvalidOperation, ValueError):
            continue
    return None


@lru_cache(maxsize=64)
def _by_length(items: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(items, key=lambda item: -len(item[0])))


def _symbols(locales: Iterable[str]) -> dict[str, str]:
    """Symbol -> code; an earlier locale's reading of a symbol wins ("$" is USD under
    en_US, CAD under en_CA), and a symbol one locale gives two codes is left out."""
    out: dict[str, str] = {}
    for name in locales:
        found: dict[str, set[str]] = {}
        for code, symbol in Locale.parse(name).currency_symbols.items():
            if symbol and not symbol.isalpha():
                found.setdefault(symbol, set()).add(code)
        for symbol, codes in found.items():
            if len(codes) == 1 and symbol not in out:
                out[symbol] = codes.pop()
    return out


def _names(codes: Iterable[str], locale: Locale, common: frozenset[str]) -> dict[str, str | None]:
    """Lower-case currency name -> code, or None when names clash: "euro", "euros" ->
    EUR; "dollars" -> None (US, Canadian, Australian...). A whole name beats another
    currency's last word ("euros" is EUR, though "WIR euros" end so too); a last word
    counts only for currencies with a symbol of their own (not "units" of the Chilean
    unit of account)."""
    whole: dict[str, set[str]] = {}
    last: dict[str, set[str]] = {}
    languages = dict.fromkeys((locale, Locale.parse("en")))
    for code in codes:
        for lang in languages:
            for count in (1, 2):
                try:
                    name = get_currency_name(code, count=count, locale=lang).lower()
                except (KeyError, ValueError):
                    continue
                whole.setdefault(name, set()).add(code)
                if code in common:
                    last.setdefault(name.split()[-1], set()).add(code)
    out = {name: (found.pop() if len(found) == 1 else None) for name, found in last.items()}
    out.update({name: found.pop() for name, found in whole.items() if len(found) == 1})
    return out


@lru_cache(maxsize=4)
def _reader(locale: str) -> MoneyReader:
    return MoneyReader(locale)


def parse_amount(text: str, locale: str = DEFAULT_LOCALE) -> tuple[Decimal, str | None] | None:
    """ "€1,200.00" -> (1200.00, "EUR"), "1.200,50 €" -> (1200.50, "EUR"), "7" -> (7, None):
    :meth:`MoneyReader.amount` in ``locale``."""
    return _reader(locale).amount(text)
