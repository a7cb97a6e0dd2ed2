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
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property

from streamproc.contracts.events import AnswerEvent, EvidenceItem, EvidenceKind, VerdictLabel
from streamproc.contracts.reasons import Reason
from streamproc.judge.records.case_facts import MAX_DATE_TEXT_CHARS, MAX_FIELDS, CaseFacts, Typed
from streamproc.judge.records.claim_values import ValueReaders, read_values
from streamproc.judge.records.execution import (
    LOOKUP_VERBS,
    MODIFY_VERBS,
    Call,
    calls_of,
    names_effect,
    refusal_acknowledged,
    reported_done,
)
from streamproc.judge.records.findings import RecordFinding, RecordReason
from streamproc.judge.records.lifecycles import Lifecycles, load_lifecycles
from streamproc.judge.records.money import DEFAULT_LOCALE
from streamproc.judge.records.reports import REFUSAL_VERBS, ClaimReading, read_claim
from streamproc.judge.records.restated import PassageWords
from streamproc.judge.records.states import check_states
from streamproc.judge.records.value_checks import check_values
from streamproc.judge.text.features import word_set
from streamproc.judge.text.stems import phrase_key, stem, words

__all__ = [
    "MAX_DATE_SEARCHES",
    "CaseCheck",
    "CaseChecker",
    "CaseContext",
    "check_record",
    "is_case_evidence",
]

MAX_DATE_SEARCHES = 32
"""Claims of one answer whose dates are read (dateparser costs milliseconds a date):
an answer with more claims than this has the rest's dates left unread, and says so."""

# Objects too general to ground an action on their own: "I've updated your account".
_GENERAL: frozenset[str] = frozenset(
    {"account", "case", "request", "detail", "inform", "file", "record", "system"}
)
# The particle of a phrasal verb is no object: "your parcel was dropped off".
_PARTICLES: frozenset[str] = frozenset({"off", "up", "out", "back", "over", "down", "away"})


@dataclass(frozen=True, slots=True)
class CaseCheck:
    """What the records say about one claim: the finding that decides it (a verdict) or
    None, what they confirm, and notes for the audit (fields that did not parse)."""

    finding: RecordFinding | None = None
    confirmations: tuple[RecordFinding, ...] = ()
    notes: tuple[Reason, ...] = ()
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
        self._warm_up()

    def _warm_up(self) -> None:
        """Load what the readers load on first use (dateparser's locale data, Babel's
        number formats), so that a worker pays it at start-up, not on its first case."""
        now = datetime.now(UTC)
        read_values(
            "I moved it to 10 February 2026 at 7:45 am for EUR 1,249.90.", self.readers, now
        )
        self.readers.dates.recorded("2026-02-10 07:45")
        self.readers.dates.recorded("10 Feb 2026")

    def describe(self) -> dict[str, str]:
        """What an auditor needs to replay a record check: the locale numbers and dates
        were read in, and which lifecycles (files and a hash of their content)."""
        return {"records_locale": self.locale, "lifecycles": self.lifecycles.describe()}

    def for_answer(self, answer: AnswerEvent) -> CaseContext:
        """The checks for one answer's claims (read nothing until a claim needs it)."""
        return CaseContext(self, answer)


def is_case_evidence(evidence: Sequence[EvidenceItem]) -> bool:
    """A customer's case: a tool result, or a record with fields (not a listing given
    only as text to describe)."""
    return any(
        e.kind is EvidenceKind.TOOL_RESULT or (e.kind is EvidenceKind.RECORD and bool(e.fields))
        for e in evidence
    )


@dataclass
class CaseContext:
    """One answer's typed evidence (read on first use) and the thing its last claim
    talked about."""

    checker: CaseChecker
    answer: AnswerEvent
    case_evidence: bool = field(init=False)
    has_records: bool = field(init=False)
    _facts: CaseFacts | None = None
    _calls: list[Call] | None = None
    _carried: tuple[str, ...] = ()
    _date_searches: int = MAX_DATE_SEARCHES

    def __post_init__(self) -> None:
        self.case_evidence = is_case_evidence(self.answer.evidence)
        self.has_records = any(
            e.kind in (EvidenceKind.RECORD, EvidenceKind.TOOL_RESULT) for e in self.answer.evidence
        )

    @property
    def facts(self) -> CaseFacts:
        if self._facts is None:
            answer = self.answer
            self._facts = CaseFacts(
                answer.evidence, answer.question, answer.occurred_at, self.checker.readers
            )
        return self._facts

    @cached_property
    def passages(self) -> PassageWords:
        return PassageWords(
            e.text
            for e in self.answer.evidence
            if e.kind in (EvidenceKind.POLICY, EvidenceKind.PASSAGE)
        )

    @property
    def calls(self) -> list[Call]:
        if self._calls is None:
            facts = self.facts
            self._calls = calls_of(facts.executed + facts.refused, self.checker.lifecycles)
        return self._calls

    def limits(self) -> tuple[str, ...]:
        """The caps that kept part of the records from being read, as the judgement's
        ``limits`` name them (never silent)."""
        out = []
        facts = self._facts
        if facts is not None and facts.capped:
            out.append(f"LIMIT_RECORD_FIELDS: only the first {MAX_FIELDS} record fields were typed")
        if facts is not None and facts.text_dates_capped:
            out.append(
                f"LIMIT_RECORD_TEXT: dates read in the first {MAX_DATE_TEXT_CHARS} characters "
                "of the evidence's texts"
            )
        if self._date_searches < 0:
            out.append(f"LIMIT_CLAIM_DATES: dates read in {MAX_DATE_SEARCHES} claims only")
        return tuple(out)

    def check(self, claim: str) -> CaseCheck:
        """The record check of one claim (claims of an answer are checked in order, so
        "it" can mean what the claim before named)."""
        if not self.has_records:
            return _without_records(claim, self.checker.lifecycles)
        reading = read_claim(claim, self.checker.lifecycles, self._carried)
        if reading.entities:
            self._carried = reading.last_entity
        if not (self.case_evidence or reading.first_person or _names_an_id(claim)):
            return CaseCheck()  # a listing's description: its values are the value checks'
        facts = self.facts
        case_claim = self.case_evidence or reading.first_person
        dated = bool(facts.times or facts.unparsed) and case_claim
        values = read_values(
            claim,
            self.checker.readers,
            self.answer.occurred_at,
            dates=dated and self._date_searches > 0,
        )
        self._date_searches -= dated  # below 0: a claim's dates went unread (``limits``)
        if not case_claim:  # a listing's claim that writes a code: its ids and amounts only
            values = replace(values, counts=(), names=())
        restated = not reading.first_person and self.passages.restated(claim)
        refused = (
            None
            if restated
            else reported_done(claim, reading, facts, self.calls, self.checker.lifecycles, values)
        )
        if refused is not None:
            return CaseCheck(refused)
        held = [
            typed for ident in values.ids for normal, typed in facts.ids if normal == ident.normal
        ]
        owned = frozenset(t.ref.evidence_id for t in held if _own_id(t))
        if held and not owned:
            # "the earlier invoice RE-26-039118 is now cancelled": an id a record only
            # refers to - no record here holds that thing's state
            states = check_states(
                reading, facts, self.checker.lifecycles, self.calls, owned, only=True
            )
        else:
            states = check_states(reading, facts, self.checker.lifecycles, self.calls, owned)
        settled_by_state = states.mismatch is not None or states.confirmation is not None
        ungrounded = None if restated else self._ungrounded(reading, settled_by_state, owned)
        if ungrounded is not None:
            return CaseCheck(ungrounded)
        reports_fact = any(a.done and a.mode.fact for a in reading.actions) or any(
            s.mode.fact for s in reading.states
        )
        checked = check_values(
            values,
            facts,
            reading.stems,
            claim,
            reports_fact=reports_fact,
            promised=lambda mention: not reading.mode_at(mention.start).fact,
            deeds=frozenset(a.verb for a in reading.actions if a.done and a.mode.fact),
        )
        notes = (
            tuple(
                Reason(
                    RecordReason.FIELD_UNPARSED.value,
                    f"{t.ref.evidence_id} {t.ref.name} = "
                    f"{str(t.ref.leaf.value)[:60]!r} is not a date or time",
                )
                for t in facts.unparsed
            )
            if values.dates
            else ()
        )
        if checked.mismatch is not None:
            return CaseCheck(checked.mismatch, checked.confirmations, notes)
        if states.mismatch is not None and not self._keyed_by_a_confirmed_date(
            states.mismatch, checked.confirmations
        ):
            return CaseCheck(states.mismatch, checked.confirmations, notes)
        confirmations = list(checked.confirmations)
        if states.confirmation is not None:
            confirmations.append(states.confirmation)
        acknowledged = refusal_acknowledged(claim, reading, facts, self.calls)
        if acknowledged is not None:
            confirmations.append(acknowledged)
        return CaseCheck(None, tuple(confirmations), notes, checked.unconfirmed)

    def _keyed_by_a_confirmed_date(
        self, mismatch: RecordFinding, confirmations: Sequence[RecordFinding]
    ) -> bool:
        """ "the second reminder is scheduled for Thursday the 24th", confirmed by
        ``NextDunningAction.ScheduledFor``: the claimed state is the key of a date field
        the claim's own date matched, so it is about that field, not the record's status.
        Short words say nothing: "on its way" is not keyed by ``approved_on``."""
        said = {w.stem for w in words(mismatch.claim_value or "") if len(w.lower) > 3}
        return any(
            said & {w.stem for w in words(c.field)}
            and self.checker.readers.dates.recorded(c.record_value) is not None
            for c in confirmations
            if c.field
        )

    def _ungrounded(
        self, reading: ClaimReading, settled_by_state: bool, named: frozenset[str]
    ) -> RecordFinding | None:
        """An action reported done that nothing on record accounts for.

        What the agent says it did ("I've added a voucher", "I've put you on the waiting
        list") needs a call that did it: an executed call with that verb, or whose effect
        the verb names, or that handled the thing acted on (``create_complaint`` for "I've
        logged your complaint"), or a record in the state the verb names; the thing
        existing on record (a shipping fee) is no proof it was refunded. What was done to
        "your ..." ("a late fee has been added to your invoice") needs a record that
        speaks of it. ``named``: records whose ids the claim names."""
        facts = self.facts
        executed = [call for call in self.calls if call.record.executed]
        called = {s for call in executed for s in call.verbs | call.things}
        handled = {s for call in executed for s in call.things}
        for action in reading.actions:
            if not action.done or action.mode.negated or not action.mode.fact:
                continue
            if action.verb in LOOKUP_VERBS or not (action.agentive or action.yours):
                continue  # only what the agent did, or what was done to "your ..."
            if action.verb in REFUSAL_VERBS:
                continue  # "the change was refused": a refusal reports nothing done
            overlapping = [
                s for s in reading.states if s.start < action.end and action.start < s.end
            ]
            if settled_by_state and overlapping:
                continue
            if action.verb in called or any(
                names_effect(action.verb, call, self.checker.lifecycles) for call in executed
            ):
                continue
            objects = action.objects - _GENERAL - _PARTICLES
            if action.verb in MODIFY_VERBS and any(
                call.verbs & MODIFY_VERBS and call.things & objects for call in executed
            ):
                continue  # "I've changed the delivery address" beside update_shipping_address
            if not objects and action.by_agent:  # "I've put you on the waiting list"
                objects = frozenset(
                    w for s in reading.states if s.start >= action.start
                    for w in phrase_key(s.phrase)
                ) - _GENERAL  # fmt: skip
            if not objects:
                continue
            if action.by_agent:
                if objects <= handled or any(
                    c.record.item.id in named and c.record.item.kind is EvidenceKind.TOOL_RESULT
                    for c in executed
                ):
                    continue  # a call on the thing the claim names did it
                if action.verb in facts.vocabulary and objects <= facts.vocabulary:
                    continue  # a record that says it ("complaint_logged": true)
            elif action.verb in facts.vocabulary or objects & (facts.vocabulary | called):
                continue
            return RecordFinding(
                RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE,
                VerdictLabel.UNSUPPORTED,
                f"the claim reports '{action.written}' ({', '.join(sorted(objects))}) done; "
                "no record or tool result holds it",
                claim_value=action.written,
            )
        return None


_PERSONAL: tuple[str, ...] = ("i ", "i'", "i\u2019", "we ", "we'", "we\u2019", "your ")


def _without_records(claim: str, lifecycles: Lifecycles) -> CaseCheck:
    """An answer with no record and no tool result: what the agent says it did ("I have
    refunded your order") or what it says happened to the case ("your refund has been
    issued") has nothing behind it. Other claims are the passages' to ground."""
    lowered = f" {claim.lower()}"
    if not any(f" {p}" in lowered for p in _PERSONAL):
        return CaseCheck()
    reading = read_claim(claim, lifecycles)
    for action in reading.actions:
        if not action.done or action.mode.negated or not action.mode.fact:
            continue
        if action.verb in LOOKUP_VERBS or not (action.agentive or action.yours):
            continue
        if action.written[:1].isupper():
            continue  # "(Till) I Kissed You": a title, not a report
        if not action.agentive and not any(
            s.mode.fact and not s.mode.negated and s.start <= action.start < s.end
            for s in reading.states
        ):
            continue  # "your X has been ..." counts when it names a state of the case
        return CaseCheck(
            RecordFinding(
                RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE,
                VerdictLabel.UNSUPPORTED,
                f"the claim reports '{action.written}' done about this case; the answer "
                "has no record or tool result",
                claim_value=action.written,
            )
        )
    return CaseCheck()


_REFERENCE_KEYS: frozenset[str] = frozenset(
    stem(w)
    for w in word_set(
        "previous original old earlier replaces replaced related parent linked prior "
        "orig superseded cancelled"
    )
)


def _own_id(typed: Typed) -> bool:
    """Is the id its record's own (``invoice_no``, ``id``), not one it refers to
    (``replaces``, ``original_invoice``)?"""
    return not (typed.keys & _REFERENCE_KEYS)


def _names_an_id(claim: str) -> bool:
    """A token with letters and digits, or a long digit run: perhaps this case's id."""
    for piece in claim.split():
        core = piece.strip(".,;:()[]#")
        digits = sum(c.isdigit() for c in core)
        if digits >= 4 or (digits and any(c.isalpha() for c in core) and len(core) >= 4):
            return True
    return False


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
    return (checker or _default_checker()).for_answer(event).check(claim).first


_DEFAULT: list[CaseChecker] = []


def _default_checker() -> CaseChecker:
    if not _DEFAULT:
        _DEFAULT.append(CaseChecker())
    return _DEFAULT[0]
