"""What every record check shares: the record view, the confirmation finding, and what a
claim or a field is about.

The rule families (:mod:`.amounts`, :mod:`.identifiers`, :mod:`.states`,
:mod:`.execution`) each read the same records the same way, so the reading lives here
once: a record or tool result with its field leaves, and the subject ("your package" is
about the order, ``refund_status`` about the refund) that amounts and states use to pick
the field a claim means. Nothing here parses a claim's values or judges one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from streamproc.contracts.events import EvidenceItem, EvidenceKind
from streamproc.judge.records.findings import RecordFinding, RecordReason
from streamproc.judge.text.evidence import FieldLeaf, readable_field, record_leaves
from streamproc.judge.text.features import numbers

__all__ = [
    "Record",
    "claim_entity",
    "confirm",
    "field_entities",
    "records_of",
]


@dataclass(frozen=True, slots=True)
class Record:
    """One record/tool result as the checks read it."""

    item: EvidenceItem
    leaves: tuple[FieldLeaf, ...]

    @property
    def executed(self) -> bool:
        return self.item.executed is not False

    def words(self, leaf: FieldLeaf) -> list[str]:
        return [
            w.lower()
            for part in leaf.path
            if isinstance(part, str)
            for w in readable_field(part).split()
        ]

    def numbers(self) -> frozenset[str]:
        """Every number written anywhere in the record, as the rules judge reads them."""
        texts = [self.item.text] + [str(leaf.value) for leaf in self.leaves]
        return frozenset().union(*(numbers(t) for t in texts))


def records_of(evidence: Sequence[EvidenceItem]) -> list[Record]:
    return [
        Record(item, tuple(record_leaves(item)))
        for item in evidence
        if item.kind in (EvidenceKind.RECORD, EvidenceKind.TOOL_RESULT)
    ]


def confirm(record: Record, leaf: FieldLeaf, written: str) -> RecordFinding:
    return RecordFinding(
        RecordReason.RECORD_CONFIRMED,
        None,
        f"record {record.item.id} {leaf.name} confirms {written}",
        evidence_id=record.item.id,
        field=leaf.name,
        claim_value=written,
        record_value=str(leaf.value),
    )


# What a state is about: "your package" asks about the order, not about the refund.
_ENTITIES: Final[Mapping[str, str]] = {
    "order": "order", "package": "order", "parcel": "order", "shipment": "order",
    "delivery": "order", "purchase": "order", "item": "order", "items": "order",
    "refund": "refund", "reimbursement": "refund",
    "payment": "payment", "charge": "payment", "transaction": "payment",
    "invoice": "invoice", "bill": "invoice",
    "ticket": "ticket", "case": "ticket", "request": "ticket", "complaint": "ticket",
    "claim": "ticket", "return": "return", "rma": "return", "exchange": "return",
    "replacement": "return", "account": "account", "subscription": "account",
    "membership": "account", "booking": "booking", "reservation": "booking",
}  # fmt: skip


def _entities(words: Iterable[str]) -> set[str]:
    return {_ENTITIES[w] for w in words if w in _ENTITIES}


def claim_entity(claim: str) -> str | None:
    """The first thing the claim talks about ("Your refund for order 12 ..." -> refund)."""
    for word in re.findall(r"[a-z]+", claim.lower()):
        if word in _ENTITIES:
            return _ENTITIES[word]
    return None


def field_entities(record: Record, leaf: FieldLeaf) -> set[str]:
    """What a state field is about: its own path ("refund_status"), else its record
    (the item's id and source, the kinds of its id fields: ``order_id`` -> order)."""
    own = _entities(record.words(leaf))
    if own:
        return own
    context = re.findall(r"[a-z]+", f"{record.item.id} {record.item.source or ''}".lower())
    for other in record.leaves:
        context += record.words(other)[:-1]
    if record.item.kind is EvidenceKind.RECORD or not record.leaves:
        context += re.findall(r"[a-z]+", record.item.text.lower())[:50]
    return _entities(context)
