"""Atomic claims: split a sentence at semicolons and ", and" / ", but" ... only where
both halves assert something. A heuristic without a parser, so it errs towards not
splitting: a wrong split makes a claim nobody wrote."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence

from streamproc.judge.text.features import content_words, numbers, word_set
from streamproc.judge.text.markup import CitationMark, strip_citations
from streamproc.judge.text.speech_acts import normalise_quotes

__all__ = ["asserts", "atomic_spans"]


_SEPARATOR = re.compile(r";\s+(?:(?:and|but|or|nor|yet|so)\s+)?|,\s+(?:and|but|or|nor|yet|so)\s+")
_LIST_CONJUNCTION = re.compile(r",\s+(?:and|or)\s")
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'-]*|\d[\d.,:/-]*")  # quotes normalised first
_AUXILIARIES = word_set(
    "is are was were be been being am has have had do does did can could will would shall "
    "should may might must cannot can't won't isn't aren't wasn't weren't doesn't don't "
    "didn't hasn't haven't hadn't couldn't wouldn't shouldn't"
)
_DETERMINERS = word_set(
    "the a an its their his her our your my this that these those all every each some no any "
    "both several many"
)
_SUBJECT_PRONOUNS = word_set(
    "i you he she it we they there this that it's there's that's he's she's they're we're"
)
# Past these, a verb belongs to a subordinate or coordinated part, not to the main clause.
_CLAUSE_STOPS = word_set(
    "which who whom whose that with because if when while although though since unless where "
    "whereas whether including and but or nor"
)
_NOT_VERBS = word_set(
    "towards afterwards always perhaps sometimes whereas thus besides across plus news"
)
_VERB_WITHIN = 6  # words; a main-clause verb comes early
_PREPOSITIONS = word_set("for to with in on at from by of about into than as")


def asserts(text: str) -> bool:
    """Does this piece of a sentence assert something on its own (subject, then verb)?

    Deliberately conservative, since a wrong split makes a claim nobody wrote: the verb
    must follow a subject within the first few words, before any subordinate or
    coordinated part. So a list item ("and grilled chicken sandwiches"), a verb phrase
    without its subject ("and also offers salads"), a relative clause ("gelato, which
    is made fresh") or a prepositional tail ("and for Samoans to be granted citizenship")
    does not assert, and the sentence stays one claim.
    """
    return _assertion(text)[0]


def _assertion(text: str) -> tuple[bool, bool]:
    """:func:`asserts`, and whether more text at the end could change it: not once the
    text has content and more tokens than the verb search reads."""
    tokens = [t.lower() for t in _TOKEN.findall(normalise_quotes(text))]
    if len(tokens) < 3:
        return False, False
    has_content = bool(content_words(text) or numbers(text))
    return has_content and _has_main_verb(tokens), has_content and len(tokens) > _VERB_WITHIN + 1


def _has_main_verb(tokens: Sequence[str]) -> bool:
    if tokens[0] in _PREPOSITIONS:
        return False
    if tokens[0] == "that" and (tokens[1] in _SUBJECT_PRONOUNS or tokens[1] in _DETERMINERS):
        return False  # "that he was motivated ...": a complement clause, not a statement
    if tokens[0] in _SUBJECT_PRONOUNS and tokens[0] != "that" and tokens[1] not in _DETERMINERS:
        return True
    has_subject = False
    for i, word in enumerate(tokens[: _VERB_WITHIN + 1]):
        if i and word in _CLAUSE_STOPS:
            return False
        before = tokens[i - 1] if i else ""
        after = tokens[i + 1] if i + 1 < len(tokens) else ""
        if has_subject and word in _AUXILIARIES:
            return True
        if has_subject and before not in _DETERMINERS:  # "the blocked invoice" is no verb
            if word.endswith("ed") and len(word) > 4 and after:
                return True
            verb_s = word.endswith("s") and not word.endswith(("ss", "us", "is"))
            verb_s = verb_s and word not in _NOT_VERBS
            if verb_s and (after in _DETERMINERS or after[:1].isdigit()):
                return True  # "the buyer contacts the vendor", "it costs 5 euros"
        has_subject = has_subject or bool(content_words(word)) or word[:1].isdigit()
    return False


def _ends_list(text: str, start: int, end: int, separator: str) -> bool:
    """ ", and" closing a list ("burgers, fries, and shakes"): the words since the last
    comma of ``text[start:end]`` are a short list item, so the conjunction joins items,
    not statements. Looks back only to that comma: slicing from ``start`` would cost the
    whole run of items so far, once per item."""
    if not _LIST_CONJUNCTION.match(separator):
        return False
    comma = text.rfind(",", start, end)
    return comma >= 0 and len(text[comma + 1 : end].split()) <= 3


def atomic_spans(
    answer: str, start: int, end: int, cites: Sequence[CitationMark]
) -> list[tuple[int, int]]:
    """Split one sentence span into parts that each assert something (or keep it whole)."""
    text = answer[start:end]
    cite_starts = [c.start for c in cites]  # in order and disjoint: finditer's matches
    pieces: list[tuple[int, int]] = []
    last = 0
    for sep in _SEPARATOR.finditer(text):
        cite = bisect_right(cite_starts, sep.start()) - 1  # the last citation before it
        if cite >= 0 and sep.start() < cites[cite].end:
            continue  # "[D1; D2]"
        if _ends_list(text, last, sep.start(), sep.group(0)):
            continue
        pieces.append((last, sep.start()))
        last = sep.end()
    pieces.append((last, len(text)))
    if len(pieces) == 1:
        return [(start, end)]

    def assertion(span: tuple[int, int]) -> tuple[bool, bool]:
        return _assertion(strip_citations(text[span[0] : span[1]]))

    merged: list[tuple[int, int]] = []
    known: tuple[bool, bool] | None = None  # merged[-1]'s assertion, while it holds
    for piece in pieces:
        if merged and assertion(piece)[0]:
            known = known or assertion(merged[-1])
            glue = not known[0]
        else:
            glue = bool(merged)
        if glue:
            merged[-1] = (merged[-1][0], piece[1])  # glue it back to what came before
            known = known if known is not None and known[1] else None  # settled: kept
        else:
            merged.append(piece)
            known = None
    return [(start + s, start + e) for s, e in merged]
