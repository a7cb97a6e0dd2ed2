"""What the checks of one claim's values share: the findings they write (a mismatch, a
confirmation), the tally of one claim's findings, and where a field sits (the object it
is read from, the words of its own key)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from streamproc.contracts.events import VerdictLabel
from streamproc.judge.records.case_facts import CaseFacts, FieldRef, Typed
from streamproc.judge.records.findings import RecordFinding, RecordReason
from streamproc.judge.text.features import word_set
from streamproc.judge.text.stems import stem, words

__all__ = [
    "Scope",
    "ValueFindings",
    "confirmation",
    "mismatch",
    "nearest",
    "own_keys",
    "scope",
]


def mismatch(
    reason: RecordReason, written: str, kind: str, ref: FieldRef | None, *, held: bool = False
) -> RecordFinding:
    where = f" ({ref.shown})" if ref is not None else ""
    said = (
        f"the records hold {written} in another role or object than the claim gives it"
        if held
        else f"no {kind} of the records holds it"
    )
    return RecordFinding(
        reason,
        VerdictLabel.CONTRADICTED,
        f"claim says {written}, {said}{where}",
        evidence_id=ref.evidence_id if ref else None,
        field=ref.name if ref else None,
        claim_value=written,
        record_value=None if ref is None else str(ref.leaf.value),
    )


def confirmation(ref: FieldRef, written: str) -> RecordFinding:
    return RecordFinding(
        RecordReason.RECORD_CONFIRMED,
        None,
        f"record {ref.evidence_id} {ref.name} confirms {written}",
        evidence_id=ref.evidence_id,
        field=ref.name,
        claim_value=written,
        record_value=str(ref.leaf.value),
    )


def nearest(candidates: Sequence[Typed], stems: frozenset[str]) -> FieldRef | None:
    """The field to show beside a mismatch: the one whose key shares most with the claim."""
    if not candidates:
        return None
    return max(candidates, key=lambda t: len(t.keys & stems)).ref


Scope = tuple[str, tuple[str | int, ...]]


def scope(ref: FieldRef) -> Scope:
    """The object a field sits in: one record, or one element of a record's list."""
    return ref.evidence_id, tuple(ref.leaf.path[:-1])


class ValueFindings:
    def __init__(self, facts: CaseFacts) -> None:
        self.facts = facts
        self.mismatch: RecordFinding | None = None
        self.confirmations: list[RecordFinding] = []
        # the objects each value of the claim was found in (several where a list's
        # elements share it), and the records its ids name
        self.anchors: list[set[Scope]] = []
        self.named: set[Scope] = set()
        self.unconfirmed = 0

    def confirm(self, ref: FieldRef, written: str, *, anchors: bool = True) -> None:
        self.confirmations.append(confirmation(ref, written))
        if anchors:  # a name does not anchor the next: "Mila Novak and Hannah Lind paid"
            self.anchors.append(self.facts.objects_holding(ref.leaf))

    def fail(self, finding: RecordFinding) -> None:
        self.mismatch = self.mismatch or finding


_GENERIC_KEYS: Final = frozenset(stem(w) for w in word_set("name result value data item"))


def own_keys(ref: FieldRef) -> frozenset[str]:
    """The stems of a field's own key and its parent's (``payees[0].name``: payee), less
    the generic ones."""
    parts = [p for p in ref.leaf.path if isinstance(p, str)][-2:]
    return frozenset(stem(w.lower) for p in parts for w in words(p)) - _GENERIC_KEYS
