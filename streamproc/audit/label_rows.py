"""Reviewers' labels in the audit trail, as plain functions (no I/O).

The labels loop publishes each accepted label as a
:class:`~streamproc.contracts.label_events.LabelAuditEntry` on the audit topic; the store appends
it to the same hash chain as the answer records of its partition. An entry is told from
a record by its content - a JSON object whose ``"entry"`` is ``"label"`` - so the store
needs no Kafka key to file it, and an export line is self-describing.

Reading is tolerant like the record's: an entry from a newer worker may carry fields
this code does not know. They are dropped for parsing only; the store hashes and keeps
the document as published, unknown fields included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from streamproc.contracts.events import ClaimVerdict
from streamproc.contracts.label_events import LabelAuditEntry

__all__ = [
    "LABEL_ENTRY",
    "ClaimDisagreement",
    "disagreements",
    "is_label_entry",
    "parse_label_entry",
]

LABEL_ENTRY: Final = "label"
"""The ``entry`` field of a label entry; audit records have no ``entry`` field."""

_KNOWN: Final = frozenset(LabelAuditEntry.model_fields)


def is_label_entry(document: Mapping[str, Any]) -> bool:
    """Whether an audit-topic document is a reviewer's label rather than a record."""
    return document.get("entry") == LABEL_ENTRY


def parse_label_entry(document: Mapping[str, Any]) -> LabelAuditEntry:
    """The entry, ignoring top-level fields this version does not know (the model
    itself forbids them, being a contract we write). Raises pydantic's
    ``ValidationError`` when it is no label entry."""
    return LabelAuditEntry.model_validate({k: v for k, v in document.items() if k in _KNOWN})


@dataclass(frozen=True, slots=True)
class ClaimDisagreement:
    """One claim a reviewer labelled otherwise than the judge."""

    number: int
    """1-based, as ``audit show`` numbers claims."""
    judge: str
    """The judge's verdict: supported / contradicted / unsupported, ``unchecked`` for a
    claim it did not check, ``?`` when the record is purged or lacks the claim."""
    reviewer: str

    def describe(self) -> str:
        return f"claim {self.number}: judge {self.judge} -> reviewer {self.reviewer}"


def disagreements(
    entry: LabelAuditEntry, claims: Sequence[ClaimVerdict] | None
) -> list[ClaimDisagreement]:
    """The claims of ``entry.claims_disagreeing``, with the judge's verdict (from the
    answer's record, ``claims``; None once purged) and the reviewer's label."""
    labelled = {claim.index: claim.label.value for claim in entry.label.claims}
    judged = {claim.index: claim for claim in claims or ()}
    found: list[ClaimDisagreement] = []
    for index in sorted(set(entry.claims_disagreeing)):
        claim = judged.get(index)
        if claim is None:
            judge = "?"
        else:
            judge = claim.verdict.value if claim.verdict is not None else "unchecked"
        found.append(ClaimDisagreement(index + 1, judge, labelled.get(index, "?")))
    return found
