"""What a claim reports as having happened, and how: done, not done, asked for, or only
possible.

"I have moved you to seat 3A" reports an action as done; "I wasn't able to move your
seat" reports it as not done; "you asked to move to 3A" reports a request, "it will be
issued within 5 days" a promise, "if it is approved" a condition. Record checks need
that difference before they compare anything: only a report of what *is* can contradict
a record. This reads it from the words, with no model: the claim is cut into clauses,
and each verb or state phrase is taken with the negation, modal, request or condition
words before it in its clause.

State phrases come from the lifecycles (:mod:`.lifecycles`), each tied to the thing the
clause talks about ("your refund ... has been issued" is about the refund); a pronoun
("it has been delivered") takes the thing an earlier claim of the answer named.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from streamproc.judge.records.lifecycles import Lifecycles
from streamproc.judge.text.features import word_set
from streamproc.judge.text.stems import SKIPPED_WORDS, Word, stem, words

__all__ = ["REFUSAL_VERBS", "ActionReport", "ClaimReading", "StateReport", "read_claim"]

_NEGATIONS: Final = frozenset(
    {"not", "never", "no", "cannot", "unable", "nothing", "neither", "nor", "without"}
)
_NEGATED_AUX: Final = {  # "couldn" of "couldn't": the word before the split "t"
    "couldn": "could", "wasn": "was", "weren": "were", "isn": "is", "aren": "are",
    "hasn": "has", "haven": "have", "hadn": "had", "didn": "did", "doesn": "does",
    "don": "do", "won": "will", "wouldn": "would", "shouldn": "should", "can": "can",
    "mustn": "must",
}  # fmt: skip
_MODALS: Final = frozenset(
    {"will", "would", "can", "could", "should", "may", "might", "must", "shall", "ll"}
)
_FUTURE_LEADS: Final = frozenset({"going", "expected", "due", "about", "likely", "scheduled",
                                  "set", "supposed", "planned", "aiming", "hoping",
                                  "welcome", "free"})  # fmt: skip
_CONDITIONS: Final = frozenset(
    {"if", "once", "when", "whenever", "unless", "until", "after", "before", "as", "whether"}
)
# Conditions wherever they stand in a clause ("it is released once the car is back");
# "until", "after", "before" are as often plain time words ("extended until Thursday").
_SUBORDINATORS: Final = frozenset({"if", "unless", "once", "whenever"})
_REQUESTS: Final = frozenset(
    stem(w)
    for w in word_set(
        "asked ask requested request requesting tried try attempted attempt wanted want "
        "wish hoping wondering"
    )
)
REFUSAL_VERBS: Final = frozenset(
    stem(w) for w in word_set("refused declined denied rejected blocked failed turned")
)
_REFUSALS: Final = frozenset(
    stem(w)
    for w in word_set(
        "refused declined denied rejected blocked failed unsuccessful unable impossible "
        "prevented stopped disallowed unavailable ineligible couldn"
    )
)
_LINKS: Final = word_set(
    "is are was were be been being has have had got gets now still already currently "
    "remains remained shows showing shown listed marked status state s ve"
)
_AUX_PERFECT: Final = frozenset({"has", "have", "had", "ve"})
_AUX_BE: Final = frozenset({"is", "are", "was", "were", "been", "be", "being", "s", "re", "got"})
_ADVERBS: Final = word_set(
    "now already successfully just fully also since then today yesterday finally "
    "officially automatically manually gone ahead and indeed actually both re"
)
_IRREGULAR_PAST: Final = word_set(
    "paid sent made done given gave taken took held kept left found bought sold told "
    "brought got gotten written wrote chosen frozen withdrawn spent lost met set put reset "
    "shut cut issued moved"
)
_NOUN_ENDINGS: Final = ("tion", "sion", "ment", "ance", "ence")
_CLAUSE_BREAKS: Final = frozenset({"but", "however", "although", "though", "whereas", "while",
                                   "so", "because", "since", "and"})  # fmt: skip
_PRONOUNS: Final = frozenset({"it", "this", "that", "they", "them"})
_RELATIVE: Final = frozenset(
    {"which", "who", "whom", "whose", "where", "you", "i", "we", "me", "us", "re", "m", "s"}
)
_FIRST_PERSON: Final = frozenset({"i", "we"})


@dataclass(frozen=True, slots=True)
class Mode:
    """How a clause reports its predicate."""

    negated: bool = False
    modal: bool = False
    requested: bool = False
    conditional: bool = False
    refusal: bool = False

    @property
    def fact(self) -> bool:
        """Reported as what is (or was), not as a wish, a promise or a condition."""
        return not (self.modal or self.requested or self.conditional)


@dataclass(frozen=True, slots=True)
class ActionReport:
    """A verb reported in a done form ("have moved", "was cancelled", "I sent")."""

    verb: str  # stem
    written: str
    start: int
    end: int
    mode: Mode
    agentive: bool  # "I/we ..." (the agent says it did it)
    objects: frozenset[str]  # stems of the words the action is about
    done: bool = True  # False: reported as not done ("I couldn't cancel")
    again: bool = False  # "re-submitted": done once more (a retry)
    yours: bool = False  # a passive said of "your ..." ("your card has been charged")
    by_agent: bool = False  # "I have ...": what the agent did in this conversation


@dataclass(frozen=True, slots=True)
class StateReport:
    """A lifecycle state phrase reported of a thing ("your refund ... is pending")."""

    phrase: str
    start: int
    end: int
    mode: Mode
    states: dict[str, frozenset[str]]  # lifecycle -> states the phrase names there
    entity: tuple[str, ...]  # lifecycles the thing it is said of belongs to


@dataclass(frozen=True, slots=True)
class ClaimReading:
    """What one claim reports, for the record checks."""

    words: tuple[Word, ...]
    actions: tuple[ActionReport, ...]
    states: tuple[StateReport, ...]
    entities: tuple[tuple[str, ...], ...]  # lifecycles of each thing named, in order
    first_person: bool
    addresses_customer: bool
    refusal: bool  # the claim says something was refused or could not be done
    request: bool
    stems: frozenset[str]
    lowers: tuple[str, ...] = ()
    clause_starts: tuple[int, ...] = ()

    @property
    def last_entity(self) -> tuple[str, ...]:
        return self.entities[-1] if self.entities else ()

    def mode_at(self, offset: int) -> Mode:
        """The mode of the clause that holds character ``offset`` of the claim, read from
        all of its words ("from tomorrow onwards every invoice will show it" is a promise)."""
        index = next((i for i, w in enumerate(self.words) if w.end > offset), None)
        if index is None:
            return Mode()
        last = _clause_end(self.clause_starts, index)
        return _mode(self.lowers, self.clause_starts[index], last, last)


def _normalised(ws: Sequence[Word]) -> list[str]:
    """Lower-case words with contractions read: "couldn" "t" -> "could" "not"."""
    out = []
    for index, word in enumerate(ws):
        lower = word.lower
        nxt = ws[index + 1].lower if index + 1 < len(ws) else ""
        if lower == "may" and word.text == "May" and (index or nxt[:1].isdigit()):
            out.append("may-month")  # "on 17 May": the month, not the modal
            continue
        if nxt == "t" and lower in _NEGATED_AUX:
            out.append(_NEGATED_AUX[lower])
        elif lower == "t" and index and ws[index - 1].lower in _NEGATED_AUX:
            out.append("not")
        elif lower == "ve":
            out.append("have")
        elif lower == "ll":
            out.append("will")
        elif lower == "re":
            out.append("are")
        else:
            out.append(lower)
    return out


def _clause_starts(text: str, ws: Sequence[Word], lowers: Sequence[str]) -> list[int]:
    """For each word, the index of the first word of its clause (punctuation other than
    an apostrophe or hyphen, or a conjunction, starts a clause)."""
    starts = []
    current = 0
    for index, word in enumerate(ws):
        if index:
            between = text[ws[index - 1].end : word.start]
            glued = not any(c.isspace() for c in between)  # "4,90", "1.249,90"
            if glued and ws[index - 1].text.isdecimal() and word.text.isdecimal():
                pass
            elif (
                any(c in ",;:()!?\u2014\u2013" for c in between)
                or ("." in between and between.strip() not in {"."})
                or between.strip() == "-"  # "I couldn't reopen it - duplicates stay closed"
            ) or lowers[index] in _CLAUSE_BREAKS:
                current = index
        starts.append(current)
    return starts


def _mode(lowers: Sequence[str], first: int, at: int, last: int | None = None) -> Mode:
    """The mode of the word at ``at``, read from its clause (``first`` to ``last``):
    negation, modal and request words before it, a condition anywhere in it."""
    first = max(first, at - _MODE_WORDS)  # a clause of thousands of words: read near ``at``
    end = len(lowers) if last is None else last
    window = lowers[first:at]
    clause = lowers[first : min(end, at + _MODE_WORDS)]
    stems = {stem(w) for w in window}
    negated = any(w in _NEGATIONS for w in window) or "yet" in window[-2:]
    # "could not" reports a past attempt (a fact); "can't be booked" is a rule (a modal)
    modal = any(w in _MODALS for w in window) and not (negated and "could" in window)
    modal = modal or any(
        w in _FUTURE_LEADS and i + 1 < len(window) and window[i + 1] == "to"
        for i, w in enumerate(window)
    )
    return Mode(
        negated=negated,
        modal=modal,
        requested=bool(stems & _REQUESTS),
        conditional=bool(set(clause) & _SUBORDINATORS)
        or (bool(window) and window[0] in _CONDITIONS)
        or _as_soon_as(clause),
        refusal=bool(stems & _REFUSALS),
    )


def _as_soon_as(words: Sequence[str]) -> bool:
    return any(words[i : i + 3] == ["as", "soon", "as"] for i in range(len(words) - 2))


_MODE_WORDS: Final = 48  # the words either side of a verb its mode is read from


def _clause_end(starts: Sequence[int], index: int) -> int:
    end = index + 1
    while end < len(starts) and starts[end] == starts[index] and end - index < _MODE_WORDS:
        end += 1
    return end


def _past_form(word: str) -> bool:
    return (word.endswith("ed") and len(word) > 4) or word in _IRREGULAR_PAST


def read_claim(text: str, lifecycles: Lifecycles, carried: tuple[str, ...] = ()) -> ClaimReading:
    """What ``text`` reports; ``carried`` is the thing an earlier claim named, for a
    pronoun here."""
    ws = tuple(words(text.replace("\u2019", "'")))
    lowers = _normalised(ws)
    starts = _clause_starts(text, ws, lowers)
    nouns = lifecycles.nouns
    entities: list[tuple[int, tuple[str, ...]]] = []
    for index in range(len(ws)):
        if _past_form(lowers[index]):
            continue  # "issued", "booked": verbs, not the things named
        for width in (2, 1):
            key = tuple(stem(w) for w in lowers[index : index + width])
            if len(key) == width and key in nouns:
                entities.append((index, nouns[key]))
                break
        if lowers[index] in _PRONOUNS and carried and not entities:
            entities.append((index, carried))
    actions = _actions(ws, lowers, starts) + _undone(ws, lowers, starts)
    states = _states(text, ws, lowers, starts, lifecycles, entities, carried)
    stems = frozenset(stem(w) for w in lowers)
    return ClaimReading(
        words=ws,
        actions=tuple(actions),
        states=tuple(states),
        entities=tuple(e for _, e in entities),
        first_person=bool(set(lowers) & _FIRST_PERSON),
        addresses_customer=bool(set(lowers) & {"you", "your", "yours"}),
        refusal=bool(stems & _REFUSALS) or "not" in lowers,
        request=bool(stems & _REQUESTS),
        stems=stems,
        lowers=tuple(lowers),
        clause_starts=tuple(starts),
    )


_OTHER: Final = ("(other)",)  # a thing no lifecycle knows: matches no state field


def _subject(
    entities: Sequence[tuple[int, tuple[str, ...]]], first: int, at: int
) -> tuple[str, ...]:
    """The thing a state phrase is said of: the first thing its clause names before it
    ("your refund for order 10442 has been approved" is about the refund), else the
    nearest one."""
    in_clause = [e for i, e in entities if first <= i < at]
    return in_clause[0] if in_clause else _entity_before(entities, at)


def _entity_before(entities: Sequence[tuple[int, tuple[str, ...]]], at: int) -> tuple[str, ...]:
    before = [e for i, e in entities if i < at]
    if before:
        return before[-1]
    after = [e for i, e in entities if i >= at]
    return after[0] if after else ()


def _actions(
    ws: Sequence[Word], lowers: Sequence[str], starts: Sequence[int]
) -> list[ActionReport]:
    """Verbs in a done form: "have moved", "was cancelled", "I sent"."""
    out = []
    for index, word in enumerate(lowers):
        if not _past_form(word) or word in {"need", "based", "used"} or stem(word) in _REQUESTS:
            continue  # "I tried to ...", "you asked for ...": a request, not a deed
        back = index - 1
        while back >= starts[index] and lowers[back] in _ADVERBS:
            back -= 1
        if back < starts[index]:
            continue
        before = lowers[back]
        agentive = before in _FIRST_PERSON or (
            before in _AUX_PERFECT and back > 0 and lowers[back - 1] in _FIRST_PERSON
        )
        speaker = before if before in _FIRST_PERSON else (lowers[back - 1] if agentive else "")
        done = (before in _AUX_PERFECT | _AUX_BE and before != "being") or (
            before in _FIRST_PERSON
        )  # "is being handled": under way, not done
        if before in {"been"} and back > 0 and lowers[back - 1] in _AUX_PERFECT:
            agentive = False
        if not done or (before == "be" and back > 0 and lowers[back - 1] == "to"):
            continue  # "has to be sent": an obligation, not a deed
        objects = _objects_after(lowers, index, starts, [w.text for w in ws])
        yours = False
        if not agentive:  # passive: the thing acted on is the subject, before the verb
            objects |= _subject_before(lowers, starts[index], back)
            # "Your manager, Sofia, has raised ...", "your card was charged": "your" in
            # the verb's clause or six words before it, not far back ("Your payment was
            # settled on Thursday 5 February, so the money has left")
            yours = "your" in lowers[max(0, starts[index] - 6) : back]
        again = index > 0 and lowers[index - 1] == "re"  # "re-submitted": done again
        out.append(
            ActionReport(
                verb=stem(word),
                written=ws[index].text,
                start=ws[index].start,
                end=ws[index].end,
                again=again,
                mode=_mode(lowers, starts[index], index, _clause_end(starts, index)),
                agentive=agentive,
                objects=objects,
                yours=yours,
                by_agent=agentive and speaker == "i",
            )
        )
    return out


_ABLE: Final = frozenset({"able", "unable", "possible", "allowed", "permitted"})
_MANAGED: Final = frozenset({"able", "managed"})


def _managed(
    ws: Sequence[Word], lowers: Sequence[str], starts: Sequence[int], index: int
) -> ActionReport | None:
    """ "I was able to stop the transfer", "I managed to move it": done, unless negated."""
    mode = _mode(lowers, starts[index], index, _clause_end(starts, index))
    if mode.negated or lowers[index - 2] == "unable":
        return None
    return ActionReport(
        verb=stem(lowers[index]),
        written=ws[index].text,
        start=ws[index].start,
        end=ws[index].end,
        mode=mode,
        agentive=bool(set(lowers[starts[index] : index]) & _FIRST_PERSON),
        objects=_objects_after(lowers, index, starts, [w.text for w in ws]),
    )


def _undone(ws: Sequence[Word], lowers: Sequence[str], starts: Sequence[int]) -> list[ActionReport]:
    """Verbs reported as not done: "I wasn't able to move", "I couldn't cancel", "we are
    unable to change" - a base verb after "to" or a modal, in a negated clause."""
    out = []
    for index in range(1, len(lowers)):
        before = lowers[index - 1]
        if index >= 2 and starts[index] != starts[index - 1]:
            continue  # "I'm not able to: only one fee ..." - the verb is in another clause
        if before == "to" and index >= 2 and lowers[index - 2] in _MANAGED:
            managed = _managed(ws, lowers, starts, index)
            if managed is not None:
                out.append(managed)
            continue
        if before == "to":
            if index < 2 or lowers[index - 2] not in _ABLE:
                continue
        elif (before not in {"not", "cannot"} or index < 2) or (
            before == "not" and lowers[index - 2] not in _MODALS | {"did", "do", "does"}
        ):
            continue
        word = lowers[index]
        if not word.isalpha() or word in _LINKS or word in _DETERMINERS:
            continue
        mode = _mode(lowers, starts[index], index)
        if not (mode.negated or lowers[index - 2] == "unable"):
            continue
        out.append(
            ActionReport(
                verb=stem(word),
                written=ws[index].text,
                start=ws[index].start,
                end=ws[index].end,
                mode=Mode(negated=True, refusal=True),
                agentive=bool(set(lowers[starts[index] : index]) & _FIRST_PERSON),
                objects=_objects_after(lowers, index, starts, [w.text for w in ws]),
                done=False,
            )
        )
    return out


_DETERMINERS: Final = word_set(
    "a an the your my our his her their its this that these those some any one new"
)
_OBJECT_STOPS: Final = word_set(
    "to for on in at by with from of and or but so as than into onto about until"
)


def _objects_after(
    lowers: Sequence[str], index: int, starts: Sequence[int], raw: Sequence[str] | None = None
) -> frozenset[str]:
    """Stems of the words right after a verb, up to a preposition ("added a 10 EUR
    voucher to your account" -> {voucher}; numbers and currency words skipped)."""
    out = set()
    for at in range(index + 1, min(len(lowers), index + 9)):
        if starts[at] != starts[index]:
            break
        word = lowers[at]
        if word in _OBJECT_STOPS:
            break
        if word in _DETERMINERS or word in {"you", "it", "them", "me", "us"} or not word.isalpha():
            continue
        if word in _DATE_WORDS:
            continue  # "was made on Tuesday 3 March": when, not what
        if raw is not None and raw[at].isupper() and len(raw[at]) <= 3:
            continue  # "EUR", "UTC": a unit, not what the action is about
        out.add(stem(word))
    return frozenset(out)


_DATE_WORDS: Final = word_set(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday "
    "morning afternoon evening night week month year"
)


def _subject_before(lowers: Sequence[str], first: int, aux: int) -> frozenset[str]:
    out = set()
    skipped = _DETERMINERS | _LINKS | _OBJECT_STOPS | _NEGATIONS | _MODALS | _PRONOUNS | _RELATIVE
    for at in range(max(first, aux - 4), aux):
        word = lowers[at]
        if word in skipped or not word.isalpha() or word in _CLAUSE_BREAKS:
            continue
        out.add(stem(word))
    return frozenset(out)


def _states(
    text: str,
    ws: Sequence[Word],
    lowers: Sequence[str],
    starts: Sequence[int],
    lifecycles: Lifecycles,
    entities: Sequence[tuple[int, tuple[str, ...]]],
    carried: tuple[str, ...],
) -> list[StateReport]:
    """Lifecycle phrases used as what a thing is ("is pending", "has been shipped", "your
    parcel arrived"), longest first, each word in at most one phrase."""
    # the words a phrase is matched on: articles and possessives left out, as in
    # phrase_key ("waiting for a review" is "waiting for review")
    kept = [i for i, w in enumerate(lowers) if w not in SKIPPED_WORDS]
    keys = [stem(lowers[i]) for i in kept]
    at = 0
    out: list[StateReport] = []
    while at < len(kept):
        match = None
        for width in range(min(lifecycles.longest_phrase, len(kept) - at), 0, -1):
            key = tuple(keys[at : at + width])
            named = lifecycles.phrases.get(key)
            if named and lowers[kept[at]].endswith("ing") and key not in lifecycles.progressive:
                named = None  # "is arriving" is not "arrived"
            if named:
                match = (width, dict(named))
                break
        if match is None:
            at += 1
            continue
        width, named = match
        index, end = kept[at], kept[at + width - 1]
        hyphenated = text[ws[end].end : ws[end].end + 1] == "-"  # "missed-appointment fee"
        following = lowers[end + 1] if end + 1 < len(lowers) else ""
        if following[:1].isdigit() or (end + 1 < len(ws) and ws[end + 1].text.isupper()):
            at += width  # "has paid NOK 6 500 of ...": an amount paid, no state of a thing
            continue
        if (
            not hyphenated
            and _asserted(lowers, index, starts, entities)
            and starts[end] == starts[index]
            and not _generic(ws, lowers, entities, starts[index], index)
        ):
            entity = _subject(entities, starts[index], index) or (
                _OTHER if _subject_before(lowers, starts[index], index) else carried
            )  # "the ferry was cancelled": a thing no lifecycle knows, not the last one named
            out.append(
                StateReport(
                    phrase=text[ws[index].start : ws[end].end],
                    start=ws[index].start,
                    end=ws[end].end,
                    mode=_mode(lowers, starts[index], index, _clause_end(starts, index)),
                    states=named,
                    entity=entity,
                )
            )
        at += width
    return out


def _asserted(
    lowers: Sequence[str],
    index: int,
    starts: Sequence[int],
    entities: Sequence[tuple[int, tuple[str, ...]]],
) -> bool:
    """Is the phrase at ``index`` said of something (not "a cancellation fee", "to
    cancel")? A linking word before it in its clause, a past form right after the thing
    ("your parcel arrived"), or a status label ("status: shipped")."""
    word = lowers[index]
    if word.endswith(_NOUN_ENDINGS) or (index and lowers[index - 1] in {"to", "a", "an", "the"}):
        return False
    if index > 1 and lowers[index - 1] == "be" and lowers[index - 2] == "to":
        return False  # "waiting to be paid out": what is to come
    following = lowers[index + 1] if index + 1 < len(lowers) else ""
    if following in _MEANS and index and lowers[index - 1] in {"is", "are"}:
        return False  # "is paid by direct debit", "is charged monthly": how, not what
    if index + 1 < len(lowers) and lowers[index + 1] in {"you", "me", "us"}:
        return False  # "I have moved you": an action on the customer, not a thing's state
    window = lowers[max(starts[index], index - 3) : index]
    if any(w in _LINKS for w in window):
        return True
    if not _past_form(word):
        return False
    # a past form as the clause's verb: "your parcel arrived", "RMA-77-0921 passed
    # inspection" - after the thing or its id, not after another verb
    previous = {i for i, _ in entities}
    return bool(previous & set(range(index - 4, index))) or (
        index > 0 and lowers[index - 1].isdecimal() and len(lowers[index - 1]) >= 3
    )


_MEANS: Final = word_set("by via through using every each monthly weekly yearly annually daily")
_SPECIFIC: Final = word_set("your the this that my our his her their its")


def _generic(
    ws: Sequence[Word],
    lowers: Sequence[str],
    entities: Sequence[tuple[int, tuple[str, ...]]],
    first: int,
    at: int,
) -> bool:
    """ "Claims are assessed in the order they come in": a rule about things of a kind
    (a bare plural subject), not a report about this case's."""
    subject = [i for i, _ in entities if first <= i < at]
    if not subject:
        return False
    index = subject[0]
    word = ws[index].text
    bare = index == 0 or lowers[index - 1] not in _SPECIFIC
    return bare and word.lower().endswith("s") and not word.lower().endswith("ss")
