"""Amounts and quantities: "$118.84" in a claim against the figures a record carries.

NLI reads "$118.84" and "$118.48" as the same, so a figure is parsed (``parse_amount``:
"€1,200.00" and "1.200,00 EUR" are one value) and compared with every numeric field.
A figure after "over", "up to", "per" is a limit, not this case's amount, and is skipped;
a record that carries no money (or no quantity) at all settles nothing. The record side
(``record_amounts``) is read here too, so that one module owns what an amount is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Final

from streamproc.events import VerdictLabel
from streamproc.judge.records.common import Record, claim_entity, confirm, field_entities
from streamproc.judge.records.findings import RecordFinding, RecordReason
from streamproc.judge.text.evidence import FieldLeaf
from streamproc.judge.text.features import word_set

__all__ = [
    "Amount",
    "check_amounts",
    "claim_amounts",
    "parse_amount",
    "record_amounts",
]


_CURRENCY_SYMBOLS: Final[Mapping[str, str]] = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
_CURRENCY_WORDS: Final[Mapping[str, str]] = {
    "euro": "EUR", "euros": "EUR", "dollar": "USD", "dollars": "USD",
    "pound": "GBP", "pounds": "GBP",
}  # fmt: skip
_CODES = "EUR|USD|GBP|CHF|JPY|INR|CAD|AUD|SEK|NOK|DKK|PLN|CNY"
# At most 32 characters: an amount is tried from every digit of a run, and an unbounded
# one would rescan a long run of digits from each of them.
_NUM = r"\d[\d.,]{0,30}\d|\d"
_SYMBOL = r"[$€£¥]"
_CLAIM_AMOUNT = re.compile(
    rf"(?P<cur1>{_SYMBOL}|\b(?:{_CODES})\b)\s?(?P<num1>{_NUM})"
    rf"|(?P<num2>{_NUM})\s?(?P<cur2>{_SYMBOL}|(?:{_CODES})\b|(?:euros?|dollars?|pounds?)\b)"
    rf"|\b(?:amount|total|price|cost|balance|charge|fee|sum)\s+(?:of\s+|is\s+|was\s+|:\s*)?"
    rf"(?P<num3>(?:{_SYMBOL}\s?)?(?:{_NUM})(?:\s?(?:{_SYMBOL}|(?:{_CODES})\b"
    r"|(?:euros?|dollars?|pounds?)\b))?)"
    rf"|\b(?:quantity|qty)\s+(?:of\s+|is\s+|was\s+|:\s*)?(?P<qty1>\d+)\b"
    r"|\b(?P<qty2>\d+)\s+(?:units?|items?|pieces?|pcs|boxes|packages|parcels|seats"
    r"|licen[cs]es)\b",
    re.IGNORECASE,
)
# Before an amount these make it a limit or a rule, not this case's figure. Looked for in
# the last _LOOKBACK characters (``pos`` keeps the text before visible to ``\b``):
# searching all the text before each amount costs its length per amount.
_LOOKBACK: Final = 64
_LIMIT_BEFORE = re.compile(
    r"\b(?:over|above|under|below|up to|more than|less than|at least|at most|exceeds?|exceeding"
    r"|maximum|minimum|max|min|limit|per|than)\s*(?:of\s*)?$",
    re.IGNORECASE,
)
_MONEY_FIELD_WORDS: Final = word_set(
    "amount total subtotal price cost sum refund charge fee balance paid due credit tax "
    "discount net gross"
)
_QUANTITY_FIELD_WORDS: Final = word_set("quantity qty units count pieces")


def parse_amount(text: str) -> tuple[Decimal, str | None] | None:
    """ "€1,200.00" -> (1200, "EUR"); "102,50 EUR" -> (102.50, "EUR"); "7" -> (7, None).

    The last of "," / "." is the decimal mark when both appear; a lone "," followed by
    exactly three digits groups thousands, otherwise it is the decimal mark.
    """
    text = text.strip()
    currency = None
    for symbol, code in _CURRENCY_SYMBOLS.items():
        if symbol in text:
            currency, text = code, text.replace(symbol, "")
    code_match = re.search(rf"\b({_CODES})\b", text, re.IGNORECASE)
    if code_match:
        currency, text = code_match[1].upper(), text.replace(code_match[0], "")
    word = re.search(r"\b(euros?|dollars?|pounds?)\b", text, re.IGNORECASE)
    if word:
        currency, text = _CURRENCY_WORDS[word[1].lower()], text.replace(word[0], "")
    text = text.strip()
    if not re.fullmatch(r"-?\d[\d.,]*", text) or text.endswith((",", ".")):
        return None
    if "," in text and "." in text:
        mark = max(text.rfind(","), text.rfind("."))
        digits = re.sub(r"[.,]", "", text[:mark]) + "." + text[mark + 1 :]
    elif "," in text:
        grouped = re.fullmatch(r"-?\d{1,3}(?:,\d{3})+", text)
        digits = text.replace(",", "") if grouped else text.replace(",", ".")
    elif text.count(".") > 1:
        digits = text.replace(".", "")
    else:
        digits = text
    try:
        return Decimal(digits), currency
    except InvalidOperation:
        return None


@dataclass(frozen=True, slots=True)
class Amount:
    value: Decimal
    currency: str | None
    written: str
    quantity: bool  # "3 units", not money


def claim_amounts(claim: str) -> list[Amount]:
    found = []
    for match in _CLAIM_AMOUNT.finditer(claim):
        if _LIMIT_BEFORE.search(claim, max(0, match.start() - _LOOKBACK), match.start()):
            continue
        quantity = match["qty1"] or match["qty2"]
        written = (match["num3"] or match[0]).strip()
        parsed = parse_amount(quantity if quantity is not None else written)
        if parsed is not None:
            found.append(Amount(parsed[0], parsed[1], written, quantity is not None))
    return found


def _record_currency(record: Record) -> str | None:
    for leaf in record.leaves:
        if record.words(leaf)[-1:] == ["currency"] and isinstance(leaf.value, str):
            return leaf.value.strip().upper() or None
    return None


def record_amounts(record: Record) -> list[tuple[FieldLeaf, Decimal, str | None]]:
    """Every numeric value of a record (numbers, and strings that are entirely an amount)."""
    out = []
    default = _record_currency(record)
    for leaf in record.leaves:
        value = leaf.value
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int | float):
            out.append((leaf, Decimal(str(value)), default))
        elif isinstance(value, str) and (parsed := parse_amount(value)) is not None:
            out.append((leaf, parsed[0], parsed[1] or default))
    return out


def _carries(record: Record, quantity: bool) -> bool:
    """Does the record carry money (or quantities) at all, so that a missing amount
    means something? An order with a price list does not say how many were bought."""
    for leaf, _, currency in record_amounts(record):
        words = set(record.words(leaf))
        if quantity and words & _QUANTITY_FIELD_WORDS:
            return True
        if not quantity and (currency is not None or words & _MONEY_FIELD_WORDS):
            return True
    return False


def _nearest_amount(
    claim: str, carrying: Sequence[Record], quantity: bool
) -> tuple[Record, FieldLeaf, Decimal, str | None]:
    """The amount field the claim most likely means, to show beside the claim's value:
    one about the claim's subject ("refund.amount" for a refund), an amount-named one."""
    entity = claim_entity(claim)
    candidates = [(r, *a) for r in carrying for a in record_amounts(r)]

    wanted = _QUANTITY_FIELD_WORDS if quantity else _MONEY_FIELD_WORDS

    def rank(c: tuple[Record, FieldLeaf, Decimal, str | None]) -> tuple[bool, bool]:
        words = set(c[0].words(c[1]))
        return (bool(words & wanted), entity in field_entities(c[0], c[1]))

    return max(candidates, key=rank)


def _amount_mismatch(amount: Amount, record: Record, leaf: FieldLeaf, shown: str) -> RecordFinding:
    return RecordFinding(
        RecordReason.AMOUNT_MISMATCH,
        VerdictLabel.CONTRADICTED,
        f"claim says {amount.written}, no field of the records carries it "
        f"(record {record.item.id} {leaf.name} is {shown})",
        evidence_id=record.item.id,
        field=leaf.name,
        claim_value=amount.written,
        record_value=str(leaf.value),
    )


def check_amounts(
    claim: str, amounts: Sequence[Amount], records: Sequence[Record]
) -> tuple[RecordFinding | None, RecordFinding | None]:
    confirmation = None
    for amount in amounts:
        carrying = [r for r in records if _carries(r, amount.quantity)]
        if not carrying:
            continue
        same_value = [
            (r, leaf, currency)
            for r in records
            for leaf, value, currency in record_amounts(r)
            if value == amount.value
        ]
        match = next(
            (
                (r, leaf)
                for r, leaf, currency in same_value
                if amount.currency is None or currency is None or currency == amount.currency
            ),
            None,
        )
        if match is not None:
            confirmation = confirmation or confirm(match[0], match[1], amount.written)
            continue
        if same_value:  # the figure is there, in another currency: "€120" vs "120.00 USD"
            record, leaf, currency = same_value[0]
            return _amount_mismatch(amount, record, leaf, f"{amount.value} {currency}"), None
        if any(
            (p := parse_amount(n)) is not None and p[0] == amount.value
            for r in records
            for n in r.numbers()
        ):
            continue  # the number is written somewhere in the records
        record, leaf, value, currency = _nearest_amount(claim, carrying, amount.quantity)
        written = f"{value} {currency}" if currency else str(value)
        return _amount_mismatch(amount, record, leaf, written), None
    return None, confirmation
