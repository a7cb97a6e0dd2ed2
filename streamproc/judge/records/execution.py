"""Execution status: an action reported as done against the tool call that was refused.

"I have refunded your order" beside an ``issue_refund`` call with ``executed: false`` is
contradicted (NOT_EXECUTED), unless a later call that did it succeeded. What a call does
is read from its name (id, source, a ``tool`` field; a lookup such as ``get_refund``
does nothing); what the claim reports done, from its verbs, skipping anything requested,
negated, conditional or acknowledged as refused. :mod:`.states` reads the same actions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from streamproc.events import VerdictLabel
from streamproc.judge.records.common import Record, claim_entity
from streamproc.judge.records.findings import RecordFinding, RecordReason
from streamproc.judge.text.features import word_set

__all__ = [
    "call_actions",
    "not_executed",
    "refusal_reported",
    "reported_actions",
    "reports_call",
]


_ACTIONS: Final[Mapping[str, str]] = {
    "refund": "refund", "refunded": "refund", "reimbursed": "refund",
    "cancel": "cancel", "cancelled": "cancel", "canceled": "cancel", "cancellation": "cancel",
    "ship": "ship", "shipped": "ship", "reshipped": "ship", "dispatched": "ship",
    "approve": "approve", "approved": "approve", "approval": "approve",
    "issue": "issue", "issued": "issue", "reset": "reset", "update": "update",
    "updated": "update", "change": "change", "changed": "change", "book": "book",
    "booked": "book", "transfer": "transfer", "transferred": "transfer", "pay": "pay",
    "paid": "pay", "payment": "pay", "payout": "pay", "escalate": "escalate",
    "escalated": "escalate", "send": "send", "sent": "send", "credit": "credit",
    "credited": "credit", "replace": "replace", "replaced": "replace",
    "replacement": "replace", "return": "return", "returned": "return", "close": "close",
    "closed": "close", "reopen": "reopen", "reopened": "reopen", "unblock": "unblock",
    "unblocked": "unblock", "release": "release", "released": "release",
    "delete": "delete", "deleted": "delete", "create": "create", "created": "create",
    "schedule": "schedule", "scheduled": "schedule", "upgrade": "upgrade",
    "upgraded": "upgrade", "process": "process", "processed": "process",
    "waive": "waive", "waived": "waive", "apply": "apply", "applied": "apply",
    "completed": "complete", "made": "make", "initiated": "initiate",
    "executed": "execute", "finalized": "finalize", "finalised": "finalize",
}  # fmt: skip
# Verbs that say something was done to a noun: "your refund has been issued/sent".
_GENERIC_ACTIONS: Final = frozenset(
    {"issue", "process", "complete", "make", "initiate", "execute", "apply", "finalize", "send"}
)
_LOOKUP = re.compile(
    r"\b(?:get|lookup|look up|fetch|read|list|search|query|find|retrieve|check|show|view"
    r"|status)\b",
    re.IGNORECASE,
)
_CALL_NAME_FIELDS: Final = word_set(
    "tool tool_name name action function operation call method endpoint intent"
)
_DONE_VERBS = "|".join(w for w in _ACTIONS if w.endswith(("ed", "sent", "paid", "reset", "made")))
# "I have refunded", "I've cancelled", "has been issued", "was processed", "I refunded"
_REPORTED_ACTION = re.compile(
    r"\b(?:i|we|i've|we've|has|have|had|was|were|been|is|are|successfully|just|now|already)"
    rf"\s+(?:(?:been|now|already|successfully|just|fully)\s+)*(?P<verb>{_DONE_VERBS})\b",
    re.IGNORECASE,
)
_NOT_DONE = re.compile(
    r"\b(?:not|never|unable|cannot|requested|request|tried|attempted|submitted|pending"
    r"|review|will|would|can|could|should|may|might|must|if|once|when)\b|n't\b",
    re.IGNORECASE,
)
_ACKNOWLEDGES_REFUSAL = re.compile(
    r"\b(?:refused|denied|declined|rejected|not executed|blocked)\b", re.IGNORECASE
)


def _action_words(text: str) -> set[str]:
    words = re.findall(r"[a-z]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower())
    return {_ACTIONS[w] for w in words if w in _ACTIONS}


def reported_actions(claim: str) -> set[str]:
    """Actions the claim says were done - not requested, refused or negated. After a
    generic verb ("has been processed", "was issued") the action is the noun it is
    about ("your refund"), so the nouns of the claim count too."""
    text = claim.replace("\u2019", "'")
    if _ACKNOWLEDGES_REFUSAL.search(text):
        return set()  # "the refund was requested but refused": matches the evidence
    done = set()
    for match in _REPORTED_ACTION.finditer(text):
        if _NOT_DONE.search(text[max(0, match.start() - 40) : match.start("verb")]):
            continue
        done.add(_ACTIONS[match["verb"].lower()])
    if done & _GENERIC_ACTIONS:
        done |= _action_words(text)
    return done


def call_actions(record: Record) -> set[str]:
    """What a tool call does, from its name: the item's id and source and fields such as
    ``tool``; only when those name no action, from all its keys and text."""
    named = [record.item.id, record.item.source or ""]
    named += [
        str(leaf.value)
        for leaf in record.leaves
        if leaf.path and str(leaf.path[-1]).lower() in _CALL_NAME_FIELDS
    ]
    name = " ".join(named)
    if _LOOKUP.search(re.sub(r"([a-z])([A-Z])", r"\1 \2", name).replace("_", " ")):
        return set()  # "get_refund" reads a refund, it does not make one
    actions = _action_words(name)
    if actions:
        return actions
    rest = [record.item.text] + [str(p) for leaf in record.leaves for p in leaf.path]
    return _action_words(" ".join(rest))


def reports_call(done: set[str], call: set[str]) -> bool:
    """ "I have refunded" reports ``issue_refund``; "I sent you an email" does not report
    ``send_refund``: every specific action of the call must be reported."""
    specific = call - _GENERIC_ACTIONS
    return specific <= done if specific else bool(call & done)


def not_executed(claim: str, records: Sequence[Record]) -> RecordFinding | None:
    done = reported_actions(claim)
    if not done:
        return None
    executed = [call_actions(r) for r in records if r.executed]
    for record in records:
        if record.executed:
            continue
        call = call_actions(record)
        if not call or not reports_call(done, call):
            continue
        if any(reports_call(done, other) for other in executed if other & call):
            continue  # a refused call retried successfully: leave it to NLI
        action = ", ".join(sorted(call & done))
        return RecordFinding(
            RecordReason.NOT_EXECUTED,
            VerdictLabel.CONTRADICTED,
            f"the claim reports '{action}' done, but call {record.item.id} was refused",
            evidence_id=record.item.id,
            claim_value=action,
            record_value="not executed",
        )
    return None


def refusal_reported(claim: str, records: Sequence[Record]) -> Record | None:
    """ "Your refund was refused": true when a refused call is about that action."""
    words = _action_words(claim) | ({e} if (e := claim_entity(claim)) else set())
    return next((r for r in records if not r.executed and call_actions(r) & words), None)
