"""Which came first: answers that pick one of two dated things.

"Who was born earlier, Gerina Dunwich or Erich Maria Remarque?" answered "Gerina Dunwich
was born earlier" reads as entailed to a verifier that sees "Gerina Dunwich (born
December 27, 1959 ...)": a cross-encoder does not compare years. The evidence usually
dates both sides the way encyclopaedia ledes do - "(born 20 February 1963)", "(7 May
1896 - 16 November 1982)", "is a 2000 film", "Founded in 1847" - so the pick can be
checked by comparing the two years, with no model.

Deliberately narrow: the question must ask which of "A or B" was first / earlier / older
or later / younger (born, died, founded, released ...), both sides must be found in the
evidence with a year each, the years must differ, and the claim must either say which
side is earlier or later itself ("X was born first", "X is younger than Y") or be the
bare pick ("The University of Iowa"). Anything else says nothing and the claim goes to
the verifier as before. English only, like the rest of the claim splitter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

from streamproc.contracts.reasons import Reason
from streamproc.judge.text.features import word_set

__all__ = ["ComparisonFinding", "Question", "check_comparison", "parse_question"]

Event = Literal["birth", "death", "start"]

_EARLY: Final = r"first|earlier|earliest|sooner|older|oldest|elder|before"
_LATE: Final = (
    r"later|latest|last|younger|youngest|newer|newest|more\s+recent(?:ly)?"
    r"|most\s+recent(?:ly)?|after"
)
_DIRECTION: Final = re.compile(rf"\b(?:(?P<early>{_EARLY})|(?P<late>{_LATE}))\b", re.IGNORECASE)
# "first" and "last" order things only next to a verb of the event ("born first", "was
# released first", "came first"); elsewhere they are ordinals ("their first album").
_ORDINAL: Final = re.compile(r"^(?:first|last)$", re.IGNORECASE)
_EVENT_VERB: Final = re.compile(
    r"\b(?:born|died|passed\s+away|founded|established|formed|created|released|published"
    r"|made|built|opened|premiered|launched|started|introduced|debuted|aired|written"
    r"|produced|incorporated|discovered|invented|came|come|began|begun|founded|held"
    r"|erected|completed|designed|constructed|issued|signed|elected|organi[sz]ed)\s*$",
    re.IGNORECASE,
)
_VERB_REACH: Final = 40
_DEATH: Final = re.compile(r"\b(?:died|die|passed\s+away|death)\b", re.IGNORECASE)
_BIRTH: Final = re.compile(r"\b(?:born|older|oldest|elder|younger|youngest)\b", re.IGNORECASE)
_NEGATION: Final = re.compile(r"\b(?:not|never|neither|nor)\b|n't\b", re.IGNORECASE)
_YEAR: Final = re.compile(r"(?<![\d.,])(1[0-9]{3}|20[0-9]{2})(?![\d])")
_DIED_YEAR: Final = re.compile(
    r"(?:\b(?:died|death|passed\s+away)\b|\bd\.)[^()\d]{0,40}?(?:\d{1,2}\s+)?(?:[A-Z][a-z]+\s+)?"
    r"(?:\d{1,2},?\s+)?(1[0-9]{3}|20[0-9]{2})\b"
)
_PARENTHESIS: Final = re.compile(r"\(([^()]{1,300})\)")
_DASH: Final = re.compile(r"\s[\u2013\u2014-]\s|[\u2013\u2014]")
_BORN_YEAR: Final = re.compile(
    r"\bborn\b[^()\d]{0,60}?(?:\d{1,2}\s+)?(?:[A-Z][a-z]+\s+)?(?:\d{1,2},?\s+)?"
    r"(1[0-9]{3}|20[0-9]{2})\b",
    re.IGNORECASE,
)
_WORD: Final = re.compile(r"[\w'.-]+", re.UNICODE)
_LEADING_FRAME: Final = re.compile(
    r"^(?:who|which|what|whose)\b(?:\s+(?:one|of\s+the\s+two|person|people|is|was|were"
    r"|are|has|had|came|come))*",
    re.IGNORECASE,
)
_OF_THE_TWO: Final = re.compile(
    r"^(?:of|between)\s+(?:the\s+two\s+)?(?P<pair>[^,]{3,200}),\s*(?P<asking>(?:who|which)\b[^,]*)$",
    re.IGNORECASE,
)
_ARTICLE: Final = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_SHARED_WORDS: Final = word_set("the a an of and at in on for to de del la le von van der da di du")
_FILLER: Final = word_set("was is were are than the a an did does had has been one it he she they")
_WINDOW: Final = 300
"""How far after a side's name its year may stand (a lede's parenthesis, its next
sentence "Founded in 1847")."""
_MAX_MENTIONS: Final = 20
"""Mentions of a side read per evidence item: a lede names its subject early, and an item
that repeats a name thousands of times must not cost thousands of windows per claim."""
_MAX_PICK_EXTRA_WORDS: Final = 3
"""A claim that names one side and says nothing about order is read as the pick only
when it is little more than the name ("The University of Iowa", "Gene Mayer is")."""


@dataclass(frozen=True, slots=True)
class Question:
    """A question that asks which of two sides came first (``early``) or last."""

    text: str
    left: str
    right: str
    event: Event
    early: bool


@dataclass(frozen=True, slots=True)
class ComparisonFinding:
    """What the evidence's years say about the claim's pick."""

    holds: bool
    reason_text: Reason
    evidence_ids: tuple[str, ...]
    whole: bool
    """The claim says nothing but the comparison, so the years settle all of it."""


# -- the question ------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def parse_question(question: str) -> Question | None:
    """``Question`` for "Who was born earlier, A or B?", "Of the two musicians A and B,
    who is older?" and their kin, else None. The order word must be in the clause that
    asks ("Who was born earlier", "... was made first"), not anywhere in a long question
    ("recorded with an earlier lineup")."""
    text = question.strip().rstrip("?").strip()
    shape = _either_or(text) or _of_the_two(text)
    if shape is None:
        return None
    left, right, asking = shape
    direction = _direction(asking)
    if direction is None:
        return None
    return Question(text, left, right, _event(asking), direction)


def _either_or(text: str) -> tuple[str, str, str] | None:
    """The two names around " or " and the words that ask about them: the clause before
    the first name (or its start, up to the order phrase) and the one after the second."""
    if text.lower().count(" or ") != 1:
        return None
    before, after = re.split(r"\s+or\s+", text, maxsplit=1, flags=re.IGNORECASE)
    clauses = re.split(r"[,:;]", before)
    left = clauses[-1]
    asking = clauses[-2] if len(clauses) > 1 else ""
    orders = _orders(left) if len(clauses) == 1 else []  # "who is younger A or B"
    if orders:
        asking, left = left[: orders[-1].end()], left[orders[-1].end() :]
    stripped = _LEADING_FRAME.sub("", left.strip()).strip()
    asking += " " + left.strip()[: len(left.strip()) - len(stripped)]
    closing = re.search(r"\s+(?:was|were|is|are|came|come|has|had|did)\b|[,:;]", after)
    right = after[: closing.start()] if closing else after
    if closing is not None:  # "... or B was made first", "... or B, was made first"
        asking += " " + re.split(r"[,:;]", after[closing.start() :].lstrip(",:; "))[0]
    left, right = _name(stripped), _name(right)
    return (left, right, asking) if left and right else None


def _of_the_two(text: str) -> tuple[str, str, str] | None:
    """ "Of the two American musicians Janet Gardner and Myles Kennedy, who is older":
    the names are what follows the last lower-case word before "and"."""
    shape = _OF_THE_TWO.match(text)
    if shape is None or shape.group("pair").lower().count(" and ") != 1:
        return None
    before, right = re.split(r"\s+and\s+", shape.group("pair"), flags=re.IGNORECASE)
    words = before.split()
    lower = [i for i, w in enumerate(words) if w[:1].islower()]
    left = " ".join(words[lower[-1] + 1 :] if lower else words)
    asking = shape.group("asking")
    return (_name(left), _name(right), asking) if left and right else None


def _name(text: str) -> str:
    return _ARTICLE.sub("", text.strip()).strip(" '\"")


def _direction(text: str) -> bool | None:
    """True for "earlier"-like, False for "later"-like, None when absent or both."""
    found = {match.group("early") is not None for match in _orders(text)}
    return found.pop() if len(found) == 1 else None


def _orders(text: str) -> list[re.Match[str]]:
    """The order words of ``text``; "first" and "last" only right after an event's verb."""
    kept = []
    for match in _DIRECTION.finditer(text):
        before = text[max(0, match.start() - _VERB_REACH) : match.start()]
        if not _ORDINAL.match(match.group(0)) or _EVENT_VERB.search(before):
            kept.append(match)
    return kept


def _event(frame: str) -> Event:
    if _DEATH.search(frame):
        return "death"
    if _BIRTH.search(frame):
        return "birth"
    return "start"


# -- the claim ---------------------------------------------------------------------------


def check_comparison(
    question: Question, claim: str, evidence: Sequence[tuple[str, str]]
) -> ComparisonFinding | None:
    """Does ``claim``'s pick agree with the years ``evidence`` gives both sides? None when
    the claim is not a pick or either year cannot be read (``evidence``: (id, text))."""
    if _NEGATION.search(claim):
        return None
    pick = _picked_side(question, claim)
    if pick is None:
        return None
    subject, early = pick
    other = question.right if subject == question.left else question.left
    mine = _dated(subject, other, question.event, evidence)
    theirs = _dated(other, subject, question.event, evidence)
    if mine is None or theirs is None or mine[0] == theirs[0]:
        return None
    holds = (mine[0] < theirs[0]) == early
    label = {"birth": "born", "death": "died", "start": "dated"}[question.event]
    relation = "before" if mine[0] < theirs[0] else "after"
    prefix = "COMPARISON_CONFIRMED" if holds else "COMPARISON_CONTRADICTED"
    reason = Reason(
        prefix,
        f"{subject} {label} {mine[0]}, {relation} {other} {label} {theirs[0]} "
        f"({mine[1]}, {theirs[1]})",
    )
    ids = tuple(dict.fromkeys((mine[1], theirs[1])))
    return ComparisonFinding(holds, reason, ids, _only_comparison(question, claim))


def _only_comparison(question: Question, claim: str) -> bool:
    """Every word of the claim is a side's name or the question's own framing words."""
    said = {w.lower().strip(".") for w in _WORD.findall(question.text)} | _FILLER
    rest = [w.strip(".") for w in _WORD.findall(claim.lower())]
    return all(not w or w in said for w in rest)


def _picked_side(question: Question, claim: str) -> tuple[str, bool] | None:
    """The side the claim says is earlier (True) or later (False), or None."""
    lowered = claim.lower()
    positions = {
        side: _first_mention(side, lowered, _distinct(side, other))
        for side, other in ((question.left, question.right), (question.right, question.left))
    }
    named = {side: at for side, at in positions.items() if at is not None}
    if not named:
        return None
    subject = min(named, key=lambda side: named[side])
    direction = _direction(claim)
    if direction is not None:
        return subject, direction
    if len(named) > 1 or re.search(r"\d", claim):
        return None
    rest = [w for w in _WORD.findall(lowered) if w not in _name_words(subject)]
    if len(rest) > _MAX_PICK_EXTRA_WORDS:
        return None
    return subject, question.early


def _name_words(side: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(side)}


def _distinct(side: str, other: str) -> list[str]:
    """The words that name this side and not the other ("Iowa", not "University")."""
    theirs = _name_words(other)
    return [
        w
        for w in _name_words(side)
        if w not in theirs and w not in _SHARED_WORDS and len(w.strip(".")) >= 3
    ]


def _first_mention(side: str, lowered: str, words: Sequence[str]) -> int | None:
    full = lowered.find(side.lower())
    if full >= 0:
        return full
    hits = [m.start() for w in words for m in re.finditer(rf"\b{re.escape(w)}\b", lowered)]
    return min(hits) if hits else None


# -- the evidence ------------------------------------------------------------------------


def _dated(
    side: str, other: str, event: Event, evidence: Sequence[tuple[str, str]]
) -> tuple[int, str] | None:
    """The year ``event`` happened to ``side`` by the evidence, with the item's id: read
    after a mention of the side and before the other side's name; a year a lede states
    ("born 1959", "(1896 - 1982)", "died 1968") wins over one that merely follows."""
    words = _distinct(side, other)
    other_words = _distinct(other, side)
    if not words:
        return None
    weak: tuple[int, str] | None = None
    for evidence_id, text in evidence:
        lowered = text.lower()
        for _, end in _mentions(side, words, lowered)[:_MAX_MENTIONS]:
            stop = min(len(text), end + _WINDOW)
            for word in other_words:
                found = re.search(rf"\b{re.escape(word)}\b", lowered[end:stop])
                if found is not None:
                    stop = min(stop, end + found.start())
            read = _year_of(event, text[end:stop])
            if read is None:
                continue
            year, stated = read
            if stated:
                return year, evidence_id
            weak = weak or (year, evidence_id)
    return weak


def _mentions(side: str, words: Sequence[str], lowered: str) -> list[tuple[int, int]]:
    """Where the side is named: its full name, or a run of its distinct words ("Myles
    Richard Kennedy (born ..." for "Myles Kennedy"), in reading order."""
    full = [(m.start(), m.end()) for m in re.finditer(re.escape(side.lower()), lowered)]
    alternatives = "|".join(re.escape(w) for w in words)
    run = re.compile(rf"\b(?:{alternatives})\b(?:[\s\w.'-]{{0,40}}?\b(?:{alternatives})\b)*")
    return sorted({*full, *((m.start(), m.end()) for m in run.finditer(lowered))})


def _year_of(event: Event, window: str) -> tuple[int, bool] | None:
    """The event's year in ``window`` and whether a lede states it as that event's."""
    span = _life_span(window)
    if event == "death":
        died = _DIED_YEAR.search(window)
        if died is not None:
            return int(died.group(1)), True
        return (span[1], True) if span is not None else None
    if event == "birth":
        born = _BORN_YEAR.search(window)
        if born is not None:
            return int(born.group(1)), True
        if span is not None:
            return span[0], True
    year = _YEAR.search(window)
    return (int(year.group(1)), False) if year is not None else None


def _life_span(window: str) -> tuple[int, int] | None:
    """The first parenthesis dated "from - to": "(7 May 1896 - 16 November 1982)"."""
    for parenthesis in _PARENTHESIS.finditer(window):
        inside = parenthesis.group(1)
        dash = _DASH.search(inside)
        if dash is None:
            continue
        start = _YEAR.search(inside, 0, dash.start())
        end = _YEAR.search(inside, dash.end())
        if start is not None and end is not None:
            return int(start.group(1)), int(end.group(1))
    return None
