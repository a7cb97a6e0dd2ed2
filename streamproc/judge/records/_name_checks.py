"""A claim's names against the records' names, word by word: a name nothing holds where
the records hold names of its role, and a name the records hold in another role or
another object than the claim gives it (NAME_MISMATCH)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from streamproc.judge.records._value_findings import (
    Scope,
    ValueFindings,
    mismatch,
    own_keys,
    scope,
)
from streamproc.judge.records.case_facts import CaseFacts, FieldRef, Typed, name_words
from streamproc.judge.records.claim_values import NameValue
from streamproc.judge.records.findings import RecordReason
from streamproc.judge.text.features import word_set
from streamproc.judge.text.stems import stem, words

__all__ = ["check_names"]


def _in_another_role(name: NameValue, parts: Sequence[str], facts: CaseFacts) -> Typed | None:
    """A name the records hold, but in another role than the claim gives it: "approved by
    Aoife Brennan" where ``approved_by`` holds someone else and Aoife ``logged_by`` it;
    "our Tilburg store" where Tilburg is where returns are processed and ``dropoffStore``
    names another. The field of the claimed role is returned."""
    role = name.cue - _NO_ROLE
    if not role:
        return None

    def plays(typed: Typed) -> bool:  # "assessor" plays "assessed", "approved_by" "approved"
        return any(k.startswith(r) or r.startswith(k) for k in typed.keys for r in role)

    holding = facts.holding(parts)
    if not holding or any(plays(t) for t in holding):
        return None
    named = {id(t) for _, kind, t in facts.names if kind == name.role}
    held = {id(t) for t in holding}
    claimed = [
        t
        for _, t in facts.strings
        if (id(t) in named or (name.role == "person" and "by" in t.keys))
        and plays(t)
        and id(t) not in held
        and any(c.isupper() for c in str(t.ref.leaf.value))  # a name, not "learner"
    ]
    return claimed[0] if claimed else None


# A cue that names no role: a title, or the preposition before a place ("in Leuven").
_NO_ROLE: Final = frozenset({"title", "to", "from", "at", "in", "via", "into", "near"})


def _inside(ref: FieldRef, scopes: set[Scope]) -> bool:
    """Is the field in one of the objects (or an object inside one), or in a record an id
    of the claim names?"""
    record, path = scope(ref)
    return any((record, path[:depth]) in scopes for depth in range(len(path) + 1))


def _in_another_scope(
    parts: Sequence[str], facts: CaseFacts, result: ValueFindings
) -> Typed | None:
    """A name held elsewhere than an object another value of the claim was read from:
    "the car was checked at pick-up on 15 April by Javier Molina" where the pick-up
    sheet of 15 April names another inspector and Javier inspected the return. That
    object's field of the same kind is returned. A record the claim names by its id
    is never elsewhere."""
    holding = facts.holding(parts)
    if not holding or any(_inside(t.ref, result.named) for t in holding):
        return None
    if any(
        len(scopes) == 1 and _inside(t.ref, scopes) for scopes in result.anchors for t in holding
    ):
        return None  # a value of the claim only its object holds sits beside the name

    kinds = frozenset().union(*(own_keys(t.ref) for t in holding))
    named = {id(t) for _, _, t in facts.names}
    for scopes in result.anchors:
        if any(_inside(t.ref, scopes) for t in holding):
            continue
        same_kind = [
            typed
            for _, typed in facts.strings
            if scope(typed.ref) in scopes and own_keys(typed.ref) & kinds
        ]
        if same_kind:
            return min(same_kind, key=lambda t: id(t) not in named)
    return None


_DIRECTION_KEYS: Final = {
    "to": frozenset(stem(w) for w in word_set("to destination dest arrival")),
    "from": frozenset(stem(w) for w in word_set("from origin departure")),
}


def _place_keys(cue: frozenset[str]) -> frozenset[str]:
    """The key words of the field a place cue names: "store" a store's, "to" a
    destination's; "in" or "at" alone name no field ("it lands in Warsaw")."""
    out = set(cue - _NO_ROLE)
    for word in cue & _DIRECTION_KEYS.keys():
        out |= _DIRECTION_KEYS[word]
    return frozenset(out)


def _code(typed: Typed) -> bool:
    """ "WAW", "GRX": a code standing for a place, not its name."""
    value = str(typed.ref.leaf.value).strip()
    return value.isupper() and value.isalpha() and len(value) <= 4


_DENIALS: Final = word_set("not never no nor")


def _denied(name: NameValue, claim: str) -> bool:
    """ "... and not to Thomas Ekdahl": a name the claim rules out."""
    return bool({w.lower for w in list(words(claim[: name.start]))[-3:]} & _DENIALS)


def check_names(
    names: Iterable[NameValue], facts: CaseFacts, result: ValueFindings, claim: str
) -> None:
    for name in names:
        parts = name_words(name.written)
        if parts and all(facts.has_word(p) or facts.has_word_like(p) for p in parts):
            held = [t for value, role, t in facts.names if all(p in value for p in parts)]
            wrong_role = None
            if name.role == "any" and not (held or facts.written_whole(parts)):
                continue  # "Rally Bar": capitalised, but no name the records know
            if not _denied(name, claim):
                wrong_role = _in_another_role(name, parts, facts) or _in_another_scope(
                    parts, facts, result
                )
            if wrong_role is not None:
                result.fail(
                    mismatch(
                        RecordReason.NAME_MISMATCH, name.written, "name", wrong_role.ref, held=True
                    )
                )
            elif held:
                result.confirm(held[0].ref, name.written, anchors=False)
            continue
        if name.role == "any":
            continue
        same_role = [  # names, not addresses ("ul. Dobrego Pasterza 118") or codes ("WAW")
            t
            for value, role, t in facts.names
            if role == name.role and not any(c.isdigit() for c in value) and not _code(t)
        ]
        if name.role == "person" and name.cue - {"title"}:
            same_role = [t for t in same_role if t.keys & name.cue] or same_role
        elif name.role == "place":  # only the field of the place the claim names
            same_role = [t for t in same_role if t.keys & _place_keys(name.cue)]
        if same_role:
            result.fail(
                mismatch(RecordReason.NAME_MISMATCH, name.written, "name", same_role[0].ref)
            )
