"""Lifecycles: which states a record's state field can hold, and what a claim may say then.

"Your refund has been issued" against ``status: queued_for_review`` is a state the record
rules out; "your refund is waiting for a review" is the same state in other words. NLI
cannot see a state machine, so the states are read: each lifecycle (orders, refunds,
payments, shipments, bookings, flights, claims, subscriptions, appointments, tickets,
invoices, returns, accounts) lists its states, the phrases that name them, and which
states each one implies (a delivered parcel was shipped). The built-in lifecycles ship in
``lifecycles.toml``; a deployment adds or replaces whole lifecycles with a file of the
same shape (:func:`load_lifecycles`).

Phrases are compared as word stems (:mod:`streamproc.judge.text.stems`), so "cancelled",
"canceled" and "cancellation" name one state, and "waiting for a review" is "waiting
for review".
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, Final

from streamproc.judge.text.stems import phrase_key

__all__ = [
    "BUILT_IN",
    "Lifecycle",
    "LifecycleError",
    "Lifecycles",
    "load_lifecycles",
]

BUILT_IN: Final = "lifecycles.toml"


class LifecycleError(ValueError):
    """A lifecycles file that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """One kind of thing's states: ``phrases`` maps a phrase key to the states it names,
    ``holds`` each state to every state that holds while it does (itself included)."""

    name: str
    nouns: tuple[str, ...]
    states: tuple[str, ...]
    phrases: Mapping[tuple[str, ...], frozenset[str]]
    holds: Mapping[str, frozenset[str]]
    progressive: frozenset[tuple[str, ...]] = frozenset()
    """Phrases written in the -ing form ("processing", "waiting for review"): a claim's
    "is arriving" names no state whose phrase is "arrived"."""

    def states_named(self, phrase: str) -> frozenset[str]:
        """The states a phrase names here ("waiting for a review" -> queued_for_review)."""
        return self.phrases.get(phrase_key(phrase), frozenset())

    def record_state(self, value: str) -> frozenset[str]:
        """The states a record's value may be: the state of that name, else those its
        phrase names ("CONFIRMED": a flight scheduled or ticketed), else those of the
        longest phrase the value contains ("QUEUED_FOR_MANUAL_REVIEW" ->
        queued_for_review); empty when none fits."""
        key = phrase_key(value)
        named = self.phrases.get(key, frozenset())
        exact = frozenset(s for s in named if phrase_key(s) == key)
        if exact or named:
            return exact or named
        best: tuple[int, frozenset[str]] = (0, frozenset())
        for phrase, states in self.phrases.items():
            if _contains(key, phrase, skip_awaited=True):
                if len(phrase) > best[0]:
                    best = (len(phrase), states)
                elif len(phrase) == best[0]:
                    best = (best[0], best[1] | states)
        return best[1]

    def allows(self, claimed: Iterable[str], recorded: Iterable[str]) -> bool:
        """Is some claimed state true while the record is in (one of) ``recorded``?"""
        wanted = set(claimed)
        return any(wanted & self.holds.get(r, frozenset({r})) for r in recorded)


# "PENDING_HOTEL_CONFIRMATION" waits for a confirmation: it is pending, not confirmed.
_AWAITING: Final = frozenset({"pend", "await", "wait", "for", "need", "requir"})


def _contains(words: tuple[str, ...], part: tuple[str, ...], *, skip_awaited: bool = False) -> bool:
    """Does ``part`` occur in ``words``? With ``skip_awaited``, not where it is what the
    value waits for ("pending ... confirmation")."""
    width = len(part)
    for i in range(len(words) - width + 1):
        if words[i : i + width] != part:
            continue
        if skip_awaited and any(w in _AWAITING for w in words[:i]):
            continue
        return True
    return False


class Lifecycles:
    """Every lifecycle the judge knows, by name, with the lookups claims need built once:
    which lifecycles a noun names, and what each phrase names in each lifecycle."""

    __slots__ = (
        "by_name", "longest_phrase", "nouns", "phrases", "progressive", "sha256", "source"
    )  # fmt: skip

    def __init__(self, by_name: Mapping[str, Lifecycle], source: str, sha256: str = "") -> None:
        self.by_name = dict(by_name)
        self.source = source
        self.sha256 = sha256
        nouns: dict[tuple[str, ...], dict[str, None]] = {}
        phrases: dict[tuple[str, ...], dict[str, frozenset[str]]] = {}
        for cycle in self.by_name.values():
            for noun in cycle.nouns:
                nouns.setdefault(phrase_key(noun), {})[cycle.name] = None
            for key, states in cycle.phrases.items():
                phrases.setdefault(key, {})[cycle.name] = states
        self.nouns: Mapping[tuple[str, ...], tuple[str, ...]] = {
            k: tuple(v) for k, v in nouns.items()
        }
        self.phrases: Mapping[tuple[str, ...], Mapping[str, frozenset[str]]] = phrases
        self.longest_phrase = max((len(k) for k in phrases), default=1)
        self.progressive = frozenset(
            key for cycle in self.by_name.values() for key in cycle.progressive
        )

    def describe(self) -> str:
        """ "lifecycles.toml sha256:1a2b..." - the files and a hash of their text."""
        return f"{self.source} sha256:{self.sha256}" if self.sha256 else self.source

    def for_noun(self, noun: str) -> tuple[str, ...]:
        """The names of the lifecycles ``noun`` names ("parcel" -> shipment)."""
        return self.nouns.get(phrase_key(noun), ())


def _closure(state: str, implies: Mapping[str, tuple[str, ...]]) -> frozenset[str]:
    seen = {state}
    todo = [state]
    while todo:
        for nxt in implies.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return frozenset(seen)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise LifecycleError(f"{where}: expected a list of non-empty strings")
    return tuple(value)


def _lifecycle(name: str, table: Any, where: str) -> Lifecycle:
    if not isinstance(table, dict):
        raise LifecycleError(f"{where}: [{name}] must be a table")
    unknown = set(table) - {"nouns", "states"}
    if unknown:
        raise LifecycleError(f"{where}: [{name}] has unknown keys {sorted(unknown)}")
    nouns = _strings(table.get("nouns", []), f"{where}: {name}.nouns")
    states = table.get("states")
    if not isinstance(states, dict) or not states:
        raise LifecycleError(f"{where}: [{name}] needs a non-empty states table")
    implies: dict[str, tuple[str, ...]] = {}
    phrases: dict[tuple[str, ...], set[str]] = {}
    progressive: set[tuple[str, ...]] = set()
    for state, spec in states.items():
        spec = spec or {}
        if not isinstance(spec, dict) or set(spec) - {"says", "implies"}:
            raise LifecycleError(f"{where}: {name}.states.{state} takes only says and implies")
        implies[state] = _strings(spec.get("implies", []), f"{where}: {name}.{state}.implies")
        for phrase in (state.replace("_", " "), *_strings(spec.get("says", []), where)):
            key = phrase_key(phrase)
            if key:
                phrases.setdefault(key, set()).add(state)
                if phrase.split()[0].lower().endswith("ing"):
                    progressive.add(key)
    for state, targets in implies.items():
        missing = [t for t in targets if t not in implies]
        if missing:
            raise LifecycleError(f"{where}: {name}.{state} implies unknown states {missing}")
    return Lifecycle(
        name,
        nouns,
        tuple(states),
        {k: frozenset(v) for k, v in phrases.items()},
        {s: _closure(s, implies) for s in implies},
        frozenset(progressive),
    )


def _parse(text: str, where: str) -> dict[str, Lifecycle]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise LifecycleError(f"{where}: not valid TOML ({error})") from None
    return {name: _lifecycle(name, table, where) for name, table in data.items()}


def load_lifecycles(extra: Path | None = None) -> Lifecycles:
    """The built-in lifecycles, with ``extra``'s lifecycles added or replacing built-in
    ones of the same name. Raises :class:`LifecycleError` (one line) for a bad file."""
    built_in = files("streamproc.judge.records").joinpath(BUILT_IN).read_text(encoding="utf-8")
    cycles = _parse(built_in, BUILT_IN)
    source = BUILT_IN
    digest = hashlib.sha256(built_in.encode())
    if extra is not None:
        try:
            text = extra.read_text(encoding="utf-8")
        except OSError as error:
            raise LifecycleError(f"cannot read lifecycles file {extra}: {error.strerror}") from None
        except UnicodeDecodeError:
            raise LifecycleError(f"lifecycles file {extra} is not UTF-8 text") from None
        cycles.update(_parse(text, str(extra)))
        source = f"{BUILT_IN} + {extra.name}"
        digest.update(text.encode())
    return Lifecycles(cycles, source, digest.hexdigest()[:16])
