"""What the records confirm, for token confidence: a value a record carries is no guess.

A number the model wrote with a low probability is accepted when a record carries it
(``confirmed_values``), so sentence confidence does not count "$118.84" as shaky beside a
refund of 118.84. Kept apart from :mod:`.case_check` because it judges no claim: it compares
values the way :mod:`.amounts` and :mod:`.identifiers` do, over every executed record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from streamproc.events import EvidenceItem
from streamproc.judge.records.amounts import parse_amount, record_amounts
from streamproc.judge.records.common import records_of
from streamproc.judge.records.identifiers import norm_id, same_id
from streamproc.judge.rules.confidence import specific_spans

__all__ = [
    "confirmed_by_records",
    "confirmed_values",
]


def confirmed_by_records(evidence: Sequence[EvidenceItem]) -> Callable[[str], bool]:
    """A predicate for token confidence: does a record carry this specific value?

    Compared as an amount ("€1,200.00" == 1200, currencies must agree when both are
    known) or as an identifier ("PO-4500017311" == "4500017311"). Refused calls do not
    confirm: their arguments were asked for, not done.
    """
    records = [r for r in records_of(evidence) if r.executed]
    amounts = [(value, currency) for r in records for _, value, currency in record_amounts(r)]
    written = [str(leaf.value) for r in records for leaf in r.leaves if leaf.value is not None]
    written += [n for r in records for n in r.numbers()]

    def confirmed(value: str) -> bool:
        parsed = parse_amount(value)
        if parsed is not None and any(
            v == parsed[0] and (parsed[1] is None or c is None or c == parsed[1])
            for v, c in amounts
        ):
            return True
        return bool(norm_id(value)) and any(same_id(value, w) for w in written)

    return confirmed


def confirmed_values(claim: str, evidence: Sequence[EvidenceItem]) -> frozenset[str]:
    """The ids, amounts, dates and numbers of ``claim``, as written, that a record carries:
    the set token confidence accepts when one of them was written with a low probability."""
    confirmed = confirmed_by_records(evidence)
    values = (claim[s:e].rstrip(".,") for s, e in specific_spans(claim))
    return frozenset(v for v in values if confirmed(v))
