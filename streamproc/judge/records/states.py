"""Record states: "your refund has been issued" against ``status: queued_for_review``.

A state the claim reports as a fact (:mod:`.reports`) is checked against the state field
of the thing it is about - the refund's status, not the order's - in that thing's
lifecycle (:mod:`.lifecycles`): supported when the recorded state is the claimed one or
implies it ("waiting for a review" under ``queued_for_review``, "shipped" under
``DELIVERED``), RECORD_STATE_MISMATCH otherwise; a negated claim ("has not been issued
yet") the other way round. A recorded value the lifecycle does not know settles nothing
and is reported as such. An executed call that did what the claim reports outranks a
status field that has not caught up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamproc.contracts.events import VerdictLabel
from streamproc.judge.records.case_facts import CaseFacts, Typed
from streamproc.judge.records.execution import Call
from streamproc.judge.records.findings import RecordFinding, RecordReason
from streamproc.judge.records.lifecycles import Lifecycles
from streamproc.judge.records.reports import ClaimReading, StateReport
from streamproc.judge.text.stems import stem, words

__all__ = ["StateCheck", "check_states"]


@dataclass(frozen=True, slots=True)
class StateCheck:
    mismatch: RecordFinding | None = None
    confirmation: RecordFinding | None = None
    unknown: tuple[str, ...] = ()  # recorded states no lifecycle knows, for the audit


def _field_lifecycles(typed: Typed, lifecycles: Lifecycles) -> tuple[str, ...]:
    """Whose state a field holds: its own key ("refund_status"), else its record's (the
    id, source or tool name, the other keys: ``refund_id``)."""
    record = typed.ref.record
    leaves = record.leaves[:200]
    named = [
        str(leaf.value)
        for leaf in leaves
        if leaf.path
        and isinstance(leaf.path[-1], str)
        and leaf.path[-1].lower() in {"tool", "tool_name", "type", "kind", "object", "entity"}
    ]
    own = [s for p in typed.ref.leaf.path[-1:] if isinstance(p, str) for s in _path_stems([p])]
    parents = [s for p in typed.ref.leaf.path[:-1] if isinstance(p, str) for s in _path_stems([p])]
    tiers = [
        own[::-1],  # its own key, head noun last: "refund_status", "replacementShipment"
        parents[::-1],
        [w.stem for w in words(f"{record.item.id} {record.item.source or ''} {' '.join(named)}")],
        # keys named after a thing ("flight": "AC 113", "booking_ref")
        [s for leaf in leaves for s in _path_stems(leaf.path)],
        [w.stem for w in words(record.item.text[:300])],
    ]
    for number, tier in enumerate(tiers):  # the nearest that names a thing decides
        found = [c for s in tier for c in lifecycles.nouns.get((s,), ())]
        if found and number < 2:
            return tuple(dict.fromkeys(found))[:1]  # a key's head noun: one thing
        if found:
            return tuple(dict.fromkeys(found))
    return ()


def _path_stems(path: Sequence[str | int]) -> list[str]:
    return [stem(w.lower) for p in path if isinstance(p, str) for w in words(p)]


def _done_by_call(report: StateReport, calls: Sequence[Call], cycle: str) -> bool:
    """An executed call did what the claim reports: its effect is the claimed state, or
    its verb is the claim's ("I've refunded it" beside ``refund_charge``)."""
    wanted = report.states.get(cycle, frozenset())
    said = {w.stem for w in words(report.phrase)}
    return any(
        c.record.executed
        and ((cycle in c.lifecycles and c.effects & wanted) or (c.verbs | c.things) & said)
        for c in calls
    )


def check_states(
    reading: ClaimReading,
    facts: CaseFacts,
    lifecycles: Lifecycles,
    calls: Sequence[Call],
    named_records: frozenset[str] = frozenset(),
    *,
    only: bool = False,
) -> StateCheck:
    """``named_records``: the records whose own id the claim names; with ``only``, the
    claim's states are read against those alone."""
    fields: list[tuple[Typed, str, frozenset[str]]] = []  # (field, lifecycle, its states)
    unknown: list[str] = []
    for typed in facts.states:
        value = str(typed.ref.leaf.value)
        known = False
        for cycle in _field_lifecycles(typed, lifecycles):
            states = lifecycles.by_name[cycle].record_state(value)
            if states:
                fields.append((typed, cycle, states))
                known = True
        if not known:
            unknown.append(f"{typed.ref.evidence_id} {typed.ref.name} = {value}")
    confirmation = None
    for report in reading.states:
        if not report.mode.fact:
            continue
        cycles = [c for c in report.states if not report.entity or c in report.entity]
        candidates = [] if only else [f for f in fields if f[1] in cycles]
        if named_records:  # the claim names the record ("your request RQ-7781 is ...")
            candidates += [
                f
                for f in fields
                if f[0].ref.evidence_id in named_records
                and f[1] in report.states
                and f not in candidates
            ]
        if not candidates and not report.entity and len(fields) == 1:
            candidates = fields if fields[0][1] in report.states else []
        if not candidates:
            continue
        typed, cycle, _ = candidates[0]
        holds = any(lifecycles.by_name[c].allows(report.states[c], r) for _, c, r in candidates)
        if report.mode.negated:
            holds = not holds
        if holds:
            confirmation = confirmation or RecordFinding(
                RecordReason.RECORD_CONFIRMED,
                None,
                f"record {typed.ref.evidence_id} {typed.ref.name} is {typed.ref.leaf.value}, "
                f"as the claim says ({report.phrase})",
                evidence_id=typed.ref.evidence_id,
                field=typed.ref.name,
                claim_value=report.phrase,
                record_value=str(typed.ref.leaf.value),
            )
            continue
        if not report.mode.negated and _done_by_call(report, calls, cycle):
            continue  # the call that did it is on record; its status has not caught up
        said = f"not {report.phrase}" if report.mode.negated else report.phrase
        return StateCheck(
            RecordFinding(
                RecordReason.RECORD_STATE_MISMATCH,
                VerdictLabel.CONTRADICTED,
                f"claim says {said}, record {typed.ref.evidence_id} {typed.ref.name} is "
                f"{typed.ref.leaf.value} ({cycle} lifecycle)",
                evidence_id=typed.ref.evidence_id,
                field=typed.ref.name,
                claim_value=said,
                record_value=str(typed.ref.leaf.value),
            ),
            None,
            tuple(unknown),
        )
    return StateCheck(None, confirmation, tuple(unknown))
