"""Amounts read with Babel: locales, currencies, precision."""

from __future__ import annotations

from decimal import Decimal

import pytest

from streamproc.judge.records.money import Money, MoneyReader, parse_amount, same_at_precision


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2,500.00 EUR", (Decimal("2500.00"), "EUR")),
        ("2500 EUR", (Decimal("2500"), "EUR")),
        ("EUR 2.500,00", (Decimal("2500.00"), "EUR")),
        ("€1,200.00", (Decimal("1200.00"), "EUR")),
        ("1.249,90€", (Decimal("1249.90"), "EUR")),
        ("$75.00", (Decimal("75.00"), "USD")),
        ("CHF 48.60", (Decimal("48.60"), "CHF")),
        ("118,84 €", (Decimal("118.84"), "EUR")),
        ("7", (Decimal("7"), None)),
    ],
)
def test_amounts_in_any_common_form(text: str, expected: tuple[Decimal, str | None]) -> None:
    assert parse_amount(text) == expected


@pytest.mark.parametrize("text", ["A-17", "2013-12-18", "12 items", "", "EUR", "1,2,3"])
def test_what_is_no_amount(text: str) -> None:
    assert parse_amount(text) is None


def test_the_configured_locale_reads_an_ambiguous_number() -> None:
    assert MoneyReader("en_US").amount("1,200") == (Decimal("1200"), None)
    assert MoneyReader("de_DE").amount("1,200") == (Decimal("1.200"), None)
    assert MoneyReader("de_DE").amount("1.200") == (Decimal("1200"), None)
    with pytest.raises(ValueError, match="unknown locale"):
        MoneyReader("xx_YY")


def test_currency_names_and_symbols_come_from_babel() -> None:
    reader = MoneyReader("en_US")
    assert reader.currency("euros") == "EUR"
    assert reader.currency("EUR") == "EUR"
    assert reader.currency("€") == "EUR"
    assert reader.currency("dollars") is None  # US, Canadian, Australian...
    assert reader.is_currency_word("dollars")
    assert not reader.is_currency_word("units")  # the Chilean unit of account is no word
    assert reader.split_symbol("US$5") == ("USD", "5", True)


def test_amounts_compare_at_the_precision_the_claim_writes() -> None:
    assert same_at_precision(Decimal("119"), Decimal("118.84"), approximate=False)
    assert not same_at_precision(Decimal("118"), Decimal("118.84"), approximate=False)
    assert same_at_precision(Decimal("120"), Decimal("118.84"), approximate=True)
    assert not same_at_precision(Decimal("118.48"), Decimal("118.84"), approximate=False)
    assert Money(Decimal("2500"), "EUR", "EUR 2,500").matches(Decimal("2500.00"), "EUR")
    assert not Money(Decimal("2500"), "USD", "$2,500").matches(Decimal("2500.00"), "EUR")
