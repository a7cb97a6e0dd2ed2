"""Level 2a: a claim about this case, settled by the records and tool results that can.

Per answer, the evidence is typed once (:class:`~.case_facts.CaseFacts`); per claim, in
order:

1. a refused call whose effect the claim reports as done: NOT_EXECUTED (:mod:`.execution`);
2. an action the agent reports doing that no record or tool result grounds ("I've added
   a 10 EUR voucher"): CLAIM_WITHOUT_TOOL_EVIDENCE;
3. each typed value against the fields of its type: AMOUNT_, IDENTIFIER_, DATE_, TIME_,
   COUNT_ and NAME_MISMATCH (:mod:`.value_checks`);
4. each state against its lifecycle: RECORD_STATE_MISMATCH (:mod:`.states`);
5. else what the records confirm (a value, a state, a refusal the claim acknowledges).

A finding with a verdict is *hard*: the judge takes it as the claim's verdict, whatever a
model or a calibrator would say. Where the records are a case's (fields, tool results),
every claim is read; over a record given only as text (a data-to-text listing) only a
claim that addresses the customer or names an id is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from streamproc.events import AnswerEvent, EvidenceItem, EvidenceKind, VerdictLabel
from streamproc.judge.records.case_facts import CaseFacts
from streamproc.judge.records.claim_values import ValueReaders, read_values
from streamproc.judge.records.execution import (
    LOOKUP_VERBS,
    Call,
    calls_of,
    refusal_acknowledged,
    reported_done,
)
from streamproc.judge.records.findings import RecordFinding, RecordReason
from streamproc.judge.records.lifecycles import Lifecycles, load_lifecycles
from streamproc.judge.records.money import DEFAULT_LOCALE
from streamproc.judge.records.reports import ClaimReading, read_claim
from streamproc.judge.records.states import check_states
from streamproc.judge.records.value_checks import check_values

__all__ = ["CaseCheck", "CaseChecker", "CaseContext", "check_record"]

# Objects too general to ground an action on their own: "I've updated your account".
_GENERAL: frozenset[str] = frozenset(
    {"account", "case", "request", "detail", "inform", "file", "record", "system"}
)


@dataclass(frozen=True, slots=True)
class CaseCheck:
    """What the records say about one claim: the finding that decides it (a verdict) or
    None, what they confirm, and notes for the audit (fields that did not parse)."""

    finding: RecordFinding | None = None
    confirmations: tuple[RecordFinding, ...] = ()
    notes: tuple[str, ...] = ()
    unconfirmed: int = 0

    @property
    def hard(self) -> bool:
        return self.finding is not None and self.finding.verdict is not None

    @property
    def first(self) -> RecordFinding | None:
        """The finding to report: the deciding one, else the first confirmation."""
        return self.finding or (self.confirmations[0] if self.confirmations else None)


class CaseChecker:
    """The record checks of one judge: the locale's readers and the lifecycles, built
    once; :meth:`for_answer` types an answer's evidence."""

    def __init__(self, locale: str = DEFAULT_LOCALE, lifecycles: Lifecycles | None = None) -> None:
        self.readers = ValueReaders.for_locale(locale)
        self.lifecycles = lifecycles or load_lifecycles()
        self.locale = self.readers.money.locale

    def for_answer(self, answer: AnswerEvent) -> CaseContext | None:
        """The checks for one answer's claims; None when it has no record or tool result."""
        if not any(e.kind in (EvidenceKind.RECORD, EvidenceKind.TOOL_RESULT) for e in answer.evidence):
            return None
        return CaseContext(self, answer)


@dataclass
class CaseContext:
    """One answer's typed evidence and the thing its last claim talked about."""

    checker: CaseChecker
    answer: AnswerEvent
    facts: CaseFacts = field(init=False)
    calls: list[Call] = field(init=False)
    _carried: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.facts = CaseFacts(
            self.answer.evidence, self.answer.question, self.answer.occurred_at, self.checker.readers
        )
        self.calls = calls_of(self.facts.executed + self.facts.refused, self.checker.lifecycles)

    @property
    def capped(self) -> bool:
        return self.facts.capped

    def check(self, claim: str) -> CaseCheck:
        """The record check of one claim (claims of an answer are checked in order, so
        "it" can mean what the claim before named)."""
        facts = self.facts
        reading = read_claim(claim, self.checker.lifecycles, self._carried)
        if reading.entities:
            self._carried = reading.last_entity
        about_case = facts.has_fields or reading.first_person or reading.addresses_customer
        refused = reported_done(claim, reading, facts, self.calls, self.checker.lifecycles)
        if refused is not None:
            return CaseCheck(refused)
        if about_case:
            ungrounded = self._ungrounded(reading)
            if ungrounded is not None:
                return CaseCheck(ungrounded)
        values = read_values(claim, self.checker.readers, self.answer.occurred_at, dates=bool(facts.times))
        if not about_case and not values.ids:
            return CaseCheck()
        checked = check_values(values, facts, reading.stems, claim)
        notes = tuple(
            f"{RecordReason.FIELD_UNPARSED.value}: {t.ref.evidence_id} {t.ref.name} = "
            f"{str(t.ref.leaf.value)[:60]!r} is not a date or time"
            for t in facts.unparsed
        ) if values.dates else ()
        if checked.mismatch is not None:
            return CaseCheck(checked.mismatch, checked.confirmations, notes)
        named = frozenset(
            typed.ref.evidence_id
            for ident in values.ids
            for normal, typed in facts.ids
            if normal == ident.normal
        )
        states = check_states(reading, facts, self.checker.lifecycles, self.calls, named)
        if states.mismatch is not None:
            return CaseCheck(states.mismatch, checked.confirmations, notes)
        confirmations = list(checked.confirmations)
        if states.confirmation is not None:
            confirmations.append(states.confirmation)
        acknowledged = refusal_acknowledged(claim, reading, facts, self.calls)
        if acknowledged is not None:
            confirmations.append(acknowledged)
        return CaseCheck(None, tuple(confirmations), notes, checked.unconfirmed)

    def _ungrounded(self, reading: ClaimReading) -> RecordFinding | None:
        """An action the agent reports doing ("I've added a voucher", "a late fee has been
        added to your invoice") that neither a call, a record's state nor a record's
        words account for."""
        facts = self.facts
        called = {s for call in self.calls if call.record.executed for s in call.verbs | call.things}
        for action in reading.actions:
            if not action.done or action.mode.negated or not action.mode.fact:
                continue
            if action.verb in LOOKUP_VERBS or not (action.agentive or reading.addresses_customer):
                continue
            if action.verb in called or action.verb in facts.vocabulary:
                continue
            if any(s.start < action.end and action.start < s.end for s in reading.states):
                continue  # a state phrase ("has been shipped"): the state check's to judge
            objects = action.objects - _GENERAL
            if not objects or objects & (facts.vocabulary | called):
                continue
            return RecordFinding(
                RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE,
                VerdictLabel.UNSUPPORTED,
                f"the claim reports '{action.written}' ({', '.join(sorted(objects))}) done; "
                "no record or tool result holds it",
                claim_value=action.written,
            )
        return None


def check_record(
    claim: str,
    evidence: Sequence[EvidenceItem],
    *,
    checker: CaseChecker | None = None,
    answer: AnswerEvent | None = None,
) -> RecordFinding | None:
    """The record check of one claim on its own (tests, tools): its deciding finding or
    first confirmation. A judge keeps one :class:`CaseContext` per answer instead."""
    from datetime import UTC, datetime

    event = answer or AnswerEvent(
        event_id="claim",
        answer_id="claim",
        conversation_id="claim",
        tenant="-",
        assistant_id="-",
        model="-",
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        answer=claim,
        evidence=list(evidence),
    )
    context = (checker or _default_checker()).for_answer(event)
    return None if context is None else context.check(claim).first


_DEFAULT: list[CaseChecker] = []


def _default_checker() -> CaseChecker:
    if not _DEFAULT:
        _DEFAULT.append(CaseChecker())
    return _DEFAULT[0]
