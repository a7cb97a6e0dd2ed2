"""Record states: "your order has been shipped" against the record's ``status``.

NLI cannot see a state machine, so a state the claim reports as a present fact ("is
pending", "has been shipped" - not "will be", not "not yet") is mapped to a family and
checked against the state fields about the same thing (the order, not the refund). A
record family that implies the claim's one satisfies it (delivered is shipped). A call on
record that did what the claim reports overrides a lagging status, and "was refused" is
confirmed by a refused call; those two read :mod:`.execution`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from streamproc.events import VerdictLabel
from streamproc.judge.records.common import Record, claim_entity, confirm, field_entities
from streamproc.judge.records.execution import (
    call_actions,
    refusal_reported,
    reported_actions,
    reports_call,
)
from streamproc.judge.records.findings import RecordFinding, RecordReason
from streamproc.judge.text.evidence import FieldLeaf

__all__ = [
    "check_states",
    "claim_states",
]


# claim word -> its family; a record value maps to a family by the same words
_STATE_WORDS: Final[Mapping[str, str]] = {
    "pending": "pending", "queued": "pending", "awaiting": "pending", "on hold": "pending",
    "under review": "pending", "in review": "pending", "waiting": "pending",
    "processing": "processing", "in progress": "processing", "being processed": "processing",
    "shipped": "shipped", "dispatched": "shipped", "in transit": "shipped",
    "delivered": "delivered", "refunded": "refunded", "issued": "issued",
    "cancelled": "cancelled", "canceled": "cancelled", "voided": "cancelled",
    "approved": "approved", "accepted": "approved", "authorized": "approved",
    "authorised": "approved", "rejected": "rejected", "denied": "rejected",
    "declined": "rejected", "refused": "rejected", "paid": "paid", "settled": "paid",
    "unpaid": "unpaid", "overdue": "unpaid", "outstanding": "unpaid",
    "completed": "completed", "complete": "completed", "fulfilled": "completed",
    "closed": "closed", "resolved": "closed", "open": "open", "reopened": "open",
    "failed": "failed", "escalated": "escalated", "returned": "returned",
    "blocked": "blocked", "suspended": "blocked",
}  # fmt: skip
# claim family -> record families under which the claim is true
_SATISFIED_BY: Final[Mapping[str, frozenset[str]]] = {
    "shipped": frozenset({"shipped", "delivered"}),
    "issued": frozenset({"issued", "refunded", "paid", "completed"}),
    "approved": frozenset({"approved", "issued", "paid", "refunded", "completed"}),
    "paid": frozenset({"paid", "completed", "refunded"}),
    "completed": frozenset({"completed", "closed", "delivered", "refunded", "paid", "issued"}),
    "closed": frozenset({"closed", "completed"}),
    "pending": frozenset({"pending", "processing"}),
    "processing": frozenset({"processing", "pending"}),
    "open": frozenset({"open", "pending", "processing", "escalated"}),
    "escalated": frozenset({"escalated", "pending"}),
    "failed": frozenset({"failed", "rejected"}),
}
_STATE_ALTERNATION = "|".join(sorted(_STATE_WORDS, key=len, reverse=True)).replace(" ", r"\s+")
# The state reported as a fact: "has been shipped", "is pending", "status is approved".
_REPORTED_STATE = re.compile(
    r"\b(?:is|are|was|were|been|has|have|had|got|now|already|being|status\s+is|status:)"
    rf"\s+(?:(?:now|already|successfully|fully|just|been)\s+)?(?P<state>{_STATE_ALTERNATION})\b",
    re.IGNORECASE,
)
_NEGATION = re.compile(r"\b(?:not|never|no|yet to be)\b|n't\b", re.IGNORECASE)
_MODAL = re.compile(r"\b(?:will|would|can|could|should|may|might|must|shall)\b", re.IGNORECASE)
_STATE_FIELD_ENDS: Final = frozenset({"status", "state", "stage"})


def _family(value: str) -> str | None:
    text = re.sub(r"[_\-]+", " ", value.strip().lower())
    if re.search(r"\b(?:not|no|never)\b", text):
        return None  # "not_shipped" is no state of the "shipped" family
    if text in _STATE_WORDS:
        return _STATE_WORDS[text]
    families = {f for w, f in _STATE_WORDS.items() if re.search(rf"\b{w}\b", text)}
    return families.pop() if len(families) == 1 else None  # "queued for review" -> pending


def claim_states(claim: str) -> list[tuple[str, str]]:
    """(word as written, family) for each state the claim reports as a present fact."""
    found = []
    for match in _REPORTED_STATE.finditer(claim):
        before = claim[max(0, match.start() - 30) : match.start("state")]
        if _NEGATION.search(before) or _MODAL.search(before):
            continue
        written = re.sub(r"\s+", " ", match["state"].lower())
        found.append((match["state"], _STATE_WORDS[written]))
    return found


def _state_fields(claim: str, records: Sequence[Record]) -> list[tuple[Record, FieldLeaf, str]]:
    """The state fields about what the claim is about, whose value is a state we know
    ("state": "CA" is an address). A claim naming nothing we know is matched only
    against a record with a single state field."""
    entity = claim_entity(claim)
    out = []
    for record in records:
        for leaf in record.leaves:
            words = record.words(leaf)
            if words and words[-1] in _STATE_FIELD_ENDS and isinstance(leaf.value, str):
                family = _family(leaf.value)
                if family is not None:
                    out.append((record, leaf, family))
    if entity is None:
        return out if len(out) == 1 else []
    return [f for f in out if entity in field_entities(f[0], f[1])]


def check_states(
    claim: str, records: Sequence[Record]
) -> tuple[RecordFinding | None, RecordFinding | None]:
    fields = _state_fields(claim, [r for r in records if r.executed])
    done = reported_actions(claim)
    if done and any(reports_call(done, call_actions(r)) for r in records if r.executed):
        fields = []  # a call that did it is on record; a lagging status is not proof
    confirmation = None
    for written, family in claim_states(claim):
        if family == "rejected" and (refusal := refusal_reported(claim, records)):
            confirmation = confirmation or RecordFinding(
                RecordReason.RECORD_CONFIRMED,
                None,
                f"call {refusal.item.id} was refused, as the claim says",
                evidence_id=refusal.item.id,
                claim_value=written,
                record_value="not executed",
            )
            continue
        if not fields:
            continue
        allowed = _SATISFIED_BY.get(family, frozenset({family}))
        match = next(((r, lf) for r, lf, f in fields if f in allowed), None)
        if match is not None:
            confirmation = confirmation or confirm(match[0], match[1], written)
            continue
        record, leaf, _ = fields[0]
        return (
            RecordFinding(
                RecordReason.RECORD_STATE_MISMATCH,
                VerdictLabel.CONTRADICTED,
                f"claim says {written}, record {record.item.id} {leaf.name} is {leaf.value}",
                evidence_id=record.item.id,
                field=leaf.name,
                claim_value=written,
                record_value=str(leaf.value),
            ),
            None,
        )
    return None, confirmation
