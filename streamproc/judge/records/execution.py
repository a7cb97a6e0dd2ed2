"""Refused calls: an action reported as done whose tool call was refused.

A tool result with ``executed: false`` grounds "that was refused" or "I could not do
it", never "it was done". What a call would have done is read from the call itself, not
from a list of keywords: its name (``change_seat``: the verb *change*, the thing *seat*),
its arguments (seat ``3A``, a new date) and the state its verb names in the lifecycle of
its thing (``cancel_booking`` would make the booking *cancelled*). A claim reports the
call's effect as done when it reports, as a fact and not negated:

- an action with the call's verb, or a generic one ("processed", "completed"), about the
  call's thing or one of its arguments ("I have moved you to seat 3A" - ``3A`` is what
  the call asked for and no executed record holds);
- the state the call would have produced ("your booking is now cancelled");
- an argument only the call holds, as the new value ("your new seat is 3A").

That is NOT_EXECUTED - unless an executed call did the same (a retry that went through).
A claim that says the call's action was not done, or was refused, matches the record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date
from decimal import Decimal, InvalidOperation
from itertools import pairwise
from typing import Final

from streamproc.contracts.events import VerdictLabel
from streamproc.judge.records.case_facts import CaseFacts
from streamproc.judge.records.claim_values import ClaimValues, tokens
from streamproc.judge.records.common import Record
from streamproc.judge.records.findings import RecordFinding, RecordReason
from streamproc.judge.records.lifecycles import Lifecycles
from streamproc.judge.records.reports import ClaimReading
from streamproc.judge.text.evidence import FieldLeaf
from streamproc.judge.text.features import word_set
from streamproc.judge.text.stems import stem, words

__all__ = [
    "LOOKUP_VERBS",
    "MODIFY_VERBS",
    "Call",
    "calls_of",
    "names_effect",
    "refusal_acknowledged",
    "reported_done",
]

LOOKUP_VERBS: Final = frozenset(
    stem(w)
    for w in word_set(
        "get lookup look fetch read list search query find retrieve check show view status "
        "verify validate inspect describe count see pull open note"
    )
)
# Verbs that say an action was carried out, whatever the action: "your refund has been
# processed" reports ``issue_refund`` done.
GENERIC_DONE: Final = frozenset(
    stem(w)
    for w in word_set(
        "processed completed done executed finalised finalized carried actioned handled "
        "sorted arranged applied put gone went"
    )
)
MODIFY_VERBS: Final = frozenset(
    stem(w) for w in word_set("change update modify amend edit correct adjust")
)  # say a thing was modified, whichever of them a tool's name uses
_NAME_FIELDS: Final = word_set(
    "tool tool_name toolname name action function operation call method endpoint intent command"
)
_ARGUMENT_FIELDS: Final = word_set(
    "arguments args params parameters request input payload changes new body"
)
_META_FIELDS: Final = word_set(
    "tool tool_name toolname name action function operation call method endpoint intent "
    "command outcome status result error reason refusal message detail details code "
    "executed policy gate decision"
)


@dataclass(frozen=True, slots=True)
class Call:
    """What one tool call does: its verbs, the things it acts on, its arguments."""

    record: Record
    verbs: frozenset[str]
    things: frozenset[str]
    arguments: frozenset[str]  # normalised argument values
    lifecycles: tuple[str, ...]
    effects: frozenset[str]  # states its verb names in its things' lifecycles

    @property
    def acts(self) -> bool:
        """A lookup (``get_refund``) changes nothing and can be refused harmlessly."""
        return bool(self.verbs)


def _normal(text: str) -> str:
    """An argument as compared: letters and digits, upper case; a number in its shortest
    form (42.00 and 42.0 are "42")."""
    try:
        number = Decimal(text)
    except (InvalidOperation, ValueError):
        return "".join(c for c in text.upper() if c.isalnum())
    if not number.is_finite():
        return text.upper()
    return format(number.normalize(), "f").rstrip(".") if number == number else text


def _call_name(record: Record) -> str:
    for leaf in record.leaves:
        if leaf.path and str(leaf.path[-1]).lower() in _NAME_FIELDS and isinstance(leaf.value, str):
            return leaf.value
    return record.item.source or record.item.id


def argument_leaves(record: Record) -> list[FieldLeaf]:
    """What the call asked for: the leaves of its arguments object where it has one
    (never its error's status code or message), else those of no known meta field."""
    leaves = record.leaves[:500]
    asked = [
        leaf for leaf in leaves if any(str(p).lower() in _ARGUMENT_FIELDS for p in leaf.path[:-1])
    ]
    if asked:
        return asked
    return [leaf for leaf in leaves if leaf.path and str(leaf.path[-1]).lower() not in _META_FIELDS]


def calls_of(records: Sequence[Record], lifecycles: Lifecycles) -> list[Call]:
    """Each call's profile, from its name, its arguments and the lifecycles."""
    out = []
    for record in records:
        # a tool is named verb first: issue_refund, refund_charge, cancelBooking
        name = [w.stem for w in words(_call_name(record)) if not w.text.isdecimal()]
        lookup = bool(name) and name[0] in LOOKUP_VERBS
        verb = frozenset() if lookup or not name else frozenset(name[:1])
        things = frozenset(s for s in name[1:] if s not in LOOKUP_VERBS)
        cycles = tuple(dict.fromkeys(c for s in things for c in lifecycles.nouns.get((s,), ())))
        effects = frozenset(
            state
            for cycle in cycles
            for key, states in lifecycles.by_name[cycle].phrases.items()
            if set(key) & verb
            for state in states
        )
        arguments = frozenset(
            _normal(str(leaf.value))
            for leaf in argument_leaves(record)
            if leaf.value not in (None, "", ())
            and not isinstance(leaf.value, bool)
            and len(_normal(str(leaf.value))) >= 2
        )
        out.append(Call(record, verb, things, arguments, cycles, effects))
    return out


@dataclass(frozen=True, slots=True)
class _Specific:
    """What only a refused call asked for - the new seat, the new date, the amount - and no
    executed record holds: as written, as days, as amounts."""

    written: frozenset[str]
    days: frozenset[date]
    amounts: frozenset[Decimal]

    def __bool__(self) -> bool:
        return bool(self.written or self.days or self.amounts)


def _specific_arguments(call: Call, facts: CaseFacts) -> _Specific:
    held = {value for value, _ in facts.ids}
    held |= {_normal(str(t.ref.leaf.value)) for _, t in facts.times}
    held |= {
        _normal(str(leaf.value)) for r in facts.executed for leaf in r.leaves[:500] if leaf.value
    }
    held_days = {t.day for t, _ in facts.times if t.day is not None}
    held_amounts = {abs(value) for value, _, _ in facts.money}
    days, amounts = set(), set()
    for leaf in argument_leaves(call.record)[:200]:
        recorded = facts.readers.dates.recorded(leaf.value)
        if recorded is not None and recorded.day is not None and recorded.day not in held_days:
            days.add(recorded.day)
        value = leaf.value
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = Decimal(str(value))
        elif isinstance(value, str) and (parsed := facts.readers.money.amount(value)) is not None:
            number = parsed[0]
        else:
            continue
        if abs(number) not in held_amounts and number:
            amounts.add(abs(number))
    written = set(a for a in call.arguments if a not in held)
    held_words = {
        _normal(w) for r in facts.executed for leaf in r.leaves[:500]
        if isinstance(leaf.value, str) for w in leaf.value.split()
    }  # fmt: skip
    for leaf in call.record.leaves[:200]:  # "under your name, Sophie": one word of a name
        if isinstance(leaf.value, str) and _normal(leaf.value) in written:
            words_ = [_normal(w) for w in leaf.value.split()]
            if len(words_) > 1:
                written |= {
                    w for w in words_ if len(w) >= 4 and w.isalpha() and w not in held_words
                }
    return _Specific(frozenset(written), frozenset(days), frozenset(amounts))


def _mentions(text: str, specific: _Specific, values: ClaimValues | None = None) -> bool:
    """Does the claim write one of the refused call's own values?"""
    pieces = {_normal(t.text) for t in tokens(text)}
    joined = _normal(text)
    if any(a in pieces or (len(a) >= 4 and a in joined) for a in specific.written):
        return True
    if values is None:
        return False
    if any(any(m.date_matches(d) for d in specific.days) for m in values.dates if m.has_date):
        return True
    return any(money.value in specific.amounts for money, _, _ in values.money)


def _effect_reported(reading: ClaimReading, call: Call) -> bool:
    for state in reading.states:
        if state.mode.negated or not state.mode.fact:
            continue
        if state.entity and not set(state.entity) & set(call.lifecycles):
            continue
        for cycle in call.lifecycles:
            if state.states.get(cycle, frozenset()) & call.effects:
                return True
    return False


def names_effect(verb: str, call: Call, lifecycles: Lifecycles) -> bool:
    """Does the claim's verb name the state the call would have made ("stopped" is a
    cancelled transfer, "moved" a rescheduled delivery)?"""
    return any(
        lifecycles.by_name[cycle].phrases.get((verb,), frozenset()) & call.effects
        for cycle in call.lifecycles
    )


def _action_reported(
    text: str,
    reading: ClaimReading,
    call: Call,
    specific: _Specific,
    lifecycles: Lifecycles,
    values: ClaimValues | None,
) -> bool:
    for action in reading.actions:
        if not action.done or action.mode.negated or not action.mode.fact:
            continue
        about = bool(call.things & reading.stems) or _mentions(text, specific, values)
        verbs = {action.verb} | ({"retri"} if action.again else set())
        if action.verb in MODIFY_VERBS:  # "I've changed it" beside a refused update_...
            verbs |= MODIFY_VERBS
        if verbs & call.verbs and (about or not call.things):
            return True
        if action.verb in call.things and action.agentive:
            return True  # "I have refunded your order" beside ``issue_refund``
        # a verb that names the call's effect, or a generic one ("processed"), said of the
        # call's thing: "your refund has been processed", not "your case is handled by
        # our solicitors" beside a refused ``appoint_own_solicitor``
        acted_on = bool(call.things & action.objects) or _mentions(text, specific, values)
        if acted_on and names_effect(action.verb, call, lifecycles):
            return True
        if action.verb in GENERIC_DONE and acted_on and action.verb not in LOOKUP_VERBS:
            return True
        if (
            action.agentive
            and _mentions(text, specific, values)
            and action.verb not in LOOKUP_VERBS
        ):
            return True  # "I have moved you to seat 3A": the call asked for 3A
    return False


_NEW_VALUE: Final = frozenset({"new", "now", "instead", "will"})


def _new_value_reported(
    text: str, reading: ClaimReading, specific: _Specific, values: ClaimValues | None
) -> bool:
    """ "Your new seat is 3A", "it will be a Volvo XC40 instead": a value only the refused
    call holds, said to hold now or to come - never "I can ask for 3A"."""
    if reading.refusal or reading.request or not specific:
        return False
    lowers = set(reading.lowers)
    if lowers & {"can", "could", "may", "might", "try", "if", "would", "should", "welcome"}:
        return False
    if not lowers & _NEW_VALUE:
        return False
    for start, end in _clauses(text):  # "it's now listed at 3,999, but that 900 drop ...":
        clause = text[start:end]  # the value must be the one said to hold now
        said = {w.lower for w in words(clause)}
        if not said & _NEW_VALUE:
            continue
        inside = None
        if values is not None:
            inside = replace(
                values,
                money=tuple(m for m in values.money if start <= m[1] < end),
                dates=tuple(d for d in values.dates if start <= d.start < end),
            )
        if _mentions(clause, specific, inside):
            return True
    return False


_CLAUSE_BREAKS: Final = frozenset(";:")  # not commas: "now under your name, Sophie"


def _clauses(text: str) -> list[tuple[int, int]]:
    """Spans of the claim between semicolons and colons, and before "but"."""
    cuts = [i for i, c in enumerate(text) if c in _CLAUSE_BREAKS]
    at = text.find(" but ")
    while at >= 0:
        cuts.append(at)
        at = text.find(" but ", at + 1)
    bounds = [0, *sorted(cuts), len(text)]
    return [(a, b) for a, b in pairwise(bounds) if b > a]


def reported_done(
    text: str,
    reading: ClaimReading,
    facts: CaseFacts,
    calls: Sequence[Call],
    lifecycles: Lifecycles,
    values: ClaimValues | None = None,
) -> RecordFinding | None:
    """NOT_EXECUTED when ``text`` reports a refused call's effect as done."""
    executed = [c for c in calls if c.record.executed]
    for call in calls:
        if call.record.executed or not call.acts:
            continue
        if any(not a.done and a.verb in call.verbs for a in reading.actions):
            continue  # "I couldn't cancel it: it had been submitted": the refusal, told
        specific = _specific_arguments(call, facts)
        if not (
            _action_reported(text, reading, call, specific, lifecycles, values)
            or _effect_reported(reading, call)
            or _new_value_reported(text, reading, specific, values)
        ):
            continue
        if any(e.verbs == call.verbs and e.things == call.things for e in executed):
            continue  # retried and done: the record of the retry decides
        action = " ".join(sorted(call.verbs | call.things)) or call.record.item.id
        return RecordFinding(
            RecordReason.NOT_EXECUTED,
            VerdictLabel.CONTRADICTED,
            f"the claim reports '{action}' done, but call {call.record.item.id} was refused",
            evidence_id=call.record.item.id,
            claim_value=action,
            record_value="not executed",
        )
    return None


def refusal_acknowledged(
    text: str, reading: ClaimReading, facts: CaseFacts, calls: Sequence[Call]
) -> RecordFinding | None:
    """A refused call the claim reports as not done or refused: what the record shows."""
    for call in calls:
        if call.record.executed or not call.acts:
            continue
        about = bool((call.things | call.verbs) & reading.stems) or _mentions(
            text, _specific_arguments(call, facts)
        )
        undone = any(not a.done or a.mode.negated for a in reading.actions if a.verb in call.verbs)
        if about and (undone or reading.refusal):
            return RecordFinding(
                RecordReason.RECORD_CONFIRMED,
                None,
                f"call {call.record.item.id} was refused, as the claim says",
                evidence_id=call.record.item.id,
                claim_value=" ".join(sorted(call.verbs | call.things)),
                record_value="not executed",
            )
    return None
