"""Synthetic pairs made by editing one evidence sentence.

A sentence kept verbatim or restated is a positive; the same sentence with one fact
changed (negation flipped, number / date / name swapped, hedge dropped, unsupported fact
appended) or a neighbouring sentence is a negative. Kept apart from the data sources so
the edits can change without touching how any source is read.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TypeAlias

from modelwork.verifier.pair_text import Pair, word_coverage

__all__ = [
    "Perturbation",
    "negate",
    "swap_date",
    "swap_entity",
    "swap_number",
    "synthetic",
]

Perturbation: TypeAlias = Callable[[str, random.Random, Sequence[str]], str | None]
"""A sentence, the generator and the document's sentences -> the changed sentence or None."""

_NEGATE = [
    (r"\b(is|was|are|were|has|had|have|can|will|could|should|would|does|did|do)\b not ", r"\1 "),
    (r"\b(is|was|are|were|can|will|could|should|would)\b(?! not)", r"\1 not"),
    (r"\b(does|did|do)n't\b", r"\1"),
    (r"\bnever\b", "always"),
]
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_HEDGES = re.compile(
    r"\b(may|might|some|about|approximately|around|nearly|almost|likely|possibly|"
    r"reportedly|allegedly|partly|often|usually|mostly|several) ",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?(?![\w.])")
_NAME = re.compile(r"(?<=[a-z,] )[A-Z][a-zA-Z'-]+(?:\s+[A-Z][a-zA-Z'-]+)*")
_OPENER = re.compile(
    r"^(In|On|At|After|Before|During|Since|By|Following|According to) ([^,]{3,60}), (.+)$"
)
_FACTS = [
    ", and it was founded in {year}",
    ", which was first reported in {year}",
    " after a vote of the board",
    ", according to a later government report",
    ", the first time this had happened",
    " for the third year in a row",
    ", and the company confirmed it on Monday",
    " despite strong objections from local residents",
]


def negate(s: str, rng: random.Random, doc: Sequence[str]) -> str | None:
    """A verb negated (or its negation dropped)."""
    for pattern, repl in rng.sample(_NEGATE, len(_NEGATE)):
        out = re.sub(pattern, repl, s, count=1)
        if out != s:
            return out
    return None


def swap_number(s: str, rng: random.Random, doc: Sequence[str]) -> str | None:
    """One number changed: another of the document's, or a nearby value."""
    found = list(_NUMBER.finditer(s))
    if not found:
        return None
    m = rng.choice(found)
    value = m.group()
    others: list[str] = sorted({n for t in doc for n in _NUMBER.findall(t)} - {value})
    if others and rng.random() < 0.5:
        new = rng.choice(others)
    else:
        digits = value.replace(",", "")
        if "." in digits:
            new = f"{float(digits) * rng.choice([0.5, 1.5, 2.0]):.1f}"
        else:
            n = int(digits)
            new = str(n + rng.choice([-1, 1]) * max(1, round(n * rng.choice([0.1, 0.25, 0.5]))))
            if 1900 <= n <= 2030:
                new = str(n + rng.choice([-3, -2, -1, 1, 2, 3]))
        if new == value:
            return None
    return s[: m.start()] + new + s[m.end() :]


def swap_date(s: str, rng: random.Random, doc: Sequence[str]) -> str | None:
    """One month or weekday name swapped for another."""
    for names in rng.sample([_MONTHS, _DAYS], 2):
        found = [w for w in names if re.search(rf"\b{w}\b", s)]
        if found:
            old = rng.choice(found)
            new = rng.choice([w for w in names if w != old])
            return re.sub(rf"\b{old}\b", new, s, count=1)
    return None


def swap_entity(s: str, rng: random.Random, doc: Sequence[str]) -> str | None:
    """One capitalised name swapped for another name of the document."""
    here = [m for m in _NAME.finditer(s) if m.group() not in _MONTHS + _DAYS]
    if not here:
        return None
    m = rng.choice(here)
    pool: list[str] = sorted(
        {n for t in doc for n in _NAME.findall(t)}
        - {m.group()}
        - set(_MONTHS + _DAYS)
        - {w for w in (m.group().split())}
    )
    pool = [n for n in pool if n not in s and m.group() not in n]
    if not pool:
        return None
    return s[: m.start()] + rng.choice(pool) + s[m.end() :]


def _hedge(s: str, rng: random.Random, doc: Sequence[str]) -> str | None:
    found = list(_HEDGES.finditer(s))
    if not found:
        return None
    m = rng.choice(found)
    out = s[: m.start()] + s[m.end() :]
    return out[0].upper() + out[1:] if m.start() == 0 else out


def _append(s: str, rng: random.Random, doc: Sequence[str], other: Sequence[str]) -> str | None:
    body = s.rstrip(" .!?")
    if len(body) < 20:
        return None
    if other and rng.random() < 0.5:
        clause = rng.choice(other).rstrip(" .!?")
        if len(clause) < 15 or len(clause) > 160:
            return None
        return f"{body}, and {clause[0].lower()}{clause[1:]}."
    fact = rng.choice(_FACTS).format(year=rng.randint(1950, 2015))
    return body + fact + "."


def _reorder(s: str, rng: random.Random) -> str | None:
    m = _OPENER.match(s.strip())
    if not m:
        return None
    rest = m.group(3).rstrip(" .")
    return f"{rest[0].upper()}{rest[1:]} {m.group(1).lower()} {m.group(2)}."


def _prefix(s: str, rng: random.Random) -> str | None:
    """The sentence up to its last comma: what it says first stays entailed."""
    body = s.rstrip(" .")
    cut = body.rfind(", ")
    if cut < 25 or len(body) - cut < 10:
        return None
    head = body[:cut]
    if re.search(r"\b(not|no|never|if|unless|but|although|though)\b", body[cut:]):
        return None  # the cut part may negate or condition the head
    return head + "."


_NEGATIVES: dict[str, Perturbation] = {
    "negation": negate,
    "number": swap_number,
    "date": swap_date,
    "entity": swap_entity,
    "hedge": _hedge,
}


def synthetic(
    doc_id: str,
    sentences: Sequence[str],
    units: Sequence[str],
    rng: random.Random,
    per_doc: int,
    other: Sequence[str],
) -> Iterator[Pair]:
    """About ``per_doc`` pairs from one document's sentences, half of them negatives."""
    usable = [s for s in sentences if 6 <= len(s.split()) <= 60]
    if not usable:
        return
    for s in rng.sample(usable, min(len(usable), max(1, per_doc // 2))):
        windows = [u for u in units if s in u] or [s]
        premise = rng.choice(windows)
        # positive
        kind, hyp = "syn-verbatim", s
        roll = rng.random()
        if roll < 0.35:
            moved = _reorder(s, rng) or _prefix(s, rng)
            if moved:
                kind, hyp = "syn-restated", moved
        yield Pair(premise, hyp, 1, kind, doc_id)
        # negative: a perturbation, else a neighbouring sentence
        names = rng.sample(list(_NEGATIVES), len(_NEGATIVES))
        names.insert(rng.randint(0, len(names)), "append")
        names.insert(rng.randint(0, len(names)), "neighbour")
        for name in names:
            if name == "append":
                out = _append(s, rng, sentences, other)
            elif name == "neighbour":
                near = [t for t in usable if t != s and word_coverage(t, premise) < 0.6]
                out = rng.choice(near) if near else None
            else:
                out = _NEGATIVES[name](s, rng, sentences)
            if out and out != s:
                yield Pair(premise, out, 0, f"syn-{name}", doc_id)
                break
