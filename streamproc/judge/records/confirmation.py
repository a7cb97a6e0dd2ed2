"""What the records confirm, for token confidence: a value a record carries is no guess.

A number the model wrote with a low probability is accepted when a record carries it
(``confirmed_values``), so sentence confidence does not count "$118.84" as shaky beside a
refund of 118.84. Kept apart from :mod:`.case_check` because it judges no claim: it reads
amounts as :mod:`.money` does and identifiers as written, over every executed record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from streamproc.contracts.events import EvidenceItem
from streamproc.judge.records.common import records_of
from streamproc.judge.records.money import parse_amount
from streamproc.judge.rules.confidence import specific_spans

__all__ = [
    "confirmed_by_records",
    "confirmed_values",
    "same_id",
]


def _normal(value: str) -> str:
    return "".join(c for c in value.upper() if c.isalnum())


def _bare(normal: str) -> str:
    """Without a kind prefix and leading zeros: "PO4500" and "04500" are "4500"."""
    return normal.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ").lstrip("0")


def same_id(a: str, b: str) -> bool:
    """Equal up to case, separators, a kind prefix ("PO-4500" = "4500") or leading zeros."""
    x, y = _normal(a), _normal(b)
    return x == y or (bool(_bare(x)) and _bare(x) == _bare(y))


def confirmed_by_records(evidence: Sequence[EvidenceItem]) -> Callable[[str], bool]:
    """A predicate for token confidence: does a record carry this specific value?

    Compared as an amount ("€1,200.00" == 1200, currencies must agree when both are
    known) or as an identifier ("PO-4500017311" == "4500017311"). Refused calls do not
    confirm: their arguments were asked for, not done.
    """
    records = [r for r in records_of(evidence) if r.executed]
    amounts = []
    written = []
    for record in records:
        currency = next(
            (
                str(leaf.value).strip().upper()
                for leaf in record.leaves
                if leaf.path and str(leaf.path[-1]).lower() == "currency"
            ),
            None,
        )
        for leaf in record.leaves:
            if leaf.value is None or isinstance(leaf.value, bool):
                continue
            text = str(leaf.value)
            written.append(text)
            parsed = parse_amount(text) if len(text) <= 40 else None
            if parsed is not None:
                amounts.append((parsed[0], parsed[1] or currency))

    def confirmed(value: str) -> bool:
        parsed = parse_amount(value)
        if parsed is not None and any(
            v == parsed[0] and (parsed[1] is None or c is None or c == parsed[1])
            for v, c in amounts
        ):
            return True
        return bool(_normal(value)) and any(same_id(value, w) for w in written)

    return confirmed


def confirmed_values(claim: str, evidence: Sequence[EvidenceItem]) -> frozenset[str]:
    """The ids, amounts, dates and numbers of ``claim``, as written, that a record carries:
    the set token confidence accepts when one of them was written with a low probability."""
    confirmed = confirmed_by_records(evidence)
    values = (claim[s:e].rstrip(".,") for s, e in specific_spans(claim))
    return frozenset(v for v in values if confirmed(v))
