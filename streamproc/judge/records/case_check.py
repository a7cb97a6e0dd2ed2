"""Level 2a: deterministic record checks for claims about this case.

NLI reads "$118.84" and "$118.48" as the same and cannot see a state machine, so an id,
an amount or a state that a record field can settle is read, not inferred. A finding
carries its reason code and the verdict it implies; a record that *confirms* a value is
a finding too, so token confidence can accept a shaky number the record carries.

Conservative on purpose: a false alarm trims a correct sentence in front of a user, so
the check says nothing (None) unless the claim is plainly a report about this case
("your order", "I have refunded", an order number) and a field plainly settles it.
Policy-like sentences ("Refunds over EUR 500 need approval", "Orders are shipped
within 2 days") are left to NLI.

This module holds that gate and the order in which the rule families run; each family
lives in its own module (:mod:`.execution`, :mod:`.identifiers`, :mod:`.amounts`,
:mod:`.states`) so that one can be read, and changed, without the others.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from streamproc.events import EvidenceItem, VerdictLabel
from streamproc.judge.records.amounts import check_amounts, claim_amounts
from streamproc.judge.records.common import records_of
from streamproc.judge.records.execution import not_executed
from streamproc.judge.records.findings import RecordFinding, RecordReason
from streamproc.judge.records.identifiers import Identifier, check_ids, claim_ids
from streamproc.judge.records.states import check_states, claim_states

__all__ = [
    "check_record",
]


_CONDITIONAL = re.compile(
    r"\b(?:if|once|when|whenever|after|before|until|unless|within)\b", re.IGNORECASE
)
_CASE_MARKER = re.compile(
    r"\b(?:your|you|you'r?e|you've|i|i've|i'm|we|we've|we're|my|our)\b", re.IGNORECASE
)


def _about_this_case(claim: str, ids: Sequence[Identifier]) -> bool:
    """A report about this customer's case, not a rule: it names the case (an id) or
    addresses the customer, and does not state a condition ("once it ships...")."""
    if _CONDITIONAL.search(claim):
        return False
    return bool(ids) or bool(_CASE_MARKER.search(claim.replace("\u2019", "'")))


def check_record(claim: str, evidence: Sequence[EvidenceItem]) -> RecordFinding | None:
    """The record check of one claim against the answer's evidence, or None.

    In order: a reported action whose call was refused (NOT_EXECUTED); a case claim
    with no record or tool result at all (CLAIM_WITHOUT_TOOL_EVIDENCE); an identifier,
    amount or state that the records contradict; else a value the records confirm.
    """
    records = records_of(evidence)
    refused = not_executed(claim, records)
    if refused is not None:
        return refused
    ids = claim_ids(claim)
    if not _about_this_case(claim, ids):
        return None
    amounts = claim_amounts(claim)
    states = claim_states(claim)
    if not records:
        if not (ids or amounts or states):
            return None
        shown = ", ".join(
            [i.written for i in ids] + [a.written for a in amounts] + [s[0] for s in states]
        )
        return RecordFinding(
            RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE,
            VerdictLabel.UNSUPPORTED,
            f"a claim about this case ({shown}) with no record or tool result behind it",
            claim_value=shown,
        )
    confirmations = []
    for mismatch, confirmation in (
        check_ids(ids, records),
        check_amounts(claim, amounts, records),
        check_states(claim, records),
    ):
        if mismatch is not None:
            return mismatch
        if confirmation is not None:
            confirmations.append(confirmation)
    return confirmations[0] if confirmations else None
