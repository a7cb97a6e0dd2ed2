"""A claim's ids against the records' ids: exactly, one transposed digit is another id
(IDENTIFIER_MISMATCH against an id field of the same kind)."""

from __future__ import annotations

from collections.abc import Sequence

from streamproc.judge.records._value_findings import ValueFindings, mismatch
from streamproc.judge.records.case_facts import CaseFacts, Typed
from streamproc.judge.records.claim_values import IdValue
from streamproc.judge.records.findings import RecordReason

__all__ = ["check_ids"]


def check_ids(ids: Sequence[IdValue], facts: CaseFacts, result: ValueFindings) -> None:
    for ident in ids:
        normal = ident.normal
        held = [t for value, t in facts.ids if value == normal]
        if held:
            result.confirm(held[0].ref, ident.written)
            result.anchors[-1].update((t.ref.evidence_id, ()) for t in held)  # the whole call
            result.named.update((record, ()) for record in facts.records_named(normal))
            continue
        if facts.in_text(ident.written) or (len(normal) >= 4 and facts.in_normal_text(normal)):
            result.unconfirmed += 1
            continue
        if normal in facts.refused_values:
            continue  # what a refused call asked for: the refused-call check's to judge
        same_kind = [t for value, t in facts.ids if _same_kind(ident, value, t)]
        if same_kind:
            result.fail(
                mismatch(RecordReason.IDENTIFIER_MISMATCH, ident.written, "id", same_kind[0].ref)
            )


def _shape(value: str) -> tuple[str, int]:
    letters = ""
    for char in value:
        if not char.isalpha():
            break
        letters += char
    return letters, len(value) - len(letters)


def _same_kind(ident: IdValue, value: str, typed: Typed) -> bool:
    """A field that holds ids of the claim's kind: its key names the kind ("order_id"
    for "order 10442"), or its value has the same shape (letters, then as many digits:
    "RF-2219" beside "RF-2291")."""
    if ident.kind & typed.keys:
        return True
    mine, theirs = _shape(ident.normal), _shape(value)
    return bool(mine[0]) and mine == theirs
