"""Decompose an answer into the claims a judge checks.

Sentences first (so decimals, abbreviations and ids do not end a sentence), then, at
``atomic`` granularity, a conservative split at semicolons and ", and" / ", but" ...
only where both halves assert something. Inline citations are pulled out of the claim
text but kept per claim; abstentions ("I can't find that in the notes") and
conversational lines ("Thanks for reaching out") are recognised, because neither is
something the evidence could support or refute.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from streamproc.events import ClaimClass, EvidenceItem, EvidenceKind
from streamproc.judge.text import content_words, numbers

__all__ = [
    "Claim",
    "Decomposition",
    "Granularity",
    "Sentence",
    "asserts",
    "decompose",
    "is_abstention",
    "is_conversational",
    "split_sentences",
    "strip_citations",
]

Granularity = Literal["sentence", "atomic"]


@dataclass(frozen=True, slots=True)
class Sentence:
    """One answer sentence; ``start``/``end`` are offsets in the original answer."""

    index: int
    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class Claim:
    """One claim to check (or, if conversational, to report and leave alone).

    ``citations`` are the labels as written ("D07", "3"); ``cited_ids`` the evidence ids
    they resolve to; ``unresolved`` the labels that match no evidence item.
    """

    index: int
    sentence_index: int
    text: str
    start: int
    end: int
    claim_class: ClaimClass
    citations: tuple[str, ...] = ()
    cited_ids: tuple[str, ...] = ()
    unresolved: tuple[str, ...] = ()

    @property
    def checked(self) -> bool:
        """Conversational claims assert nothing and are not checked."""
        return self.claim_class is not ClaimClass.CONVERSATIONAL


@dataclass(frozen=True, slots=True)
class Decomposition:
    """Everything the judge needs to know about the shape of one answer."""

    sentences: tuple[Sentence, ...]
    claims: tuple[Claim, ...]
    abstained: bool
    uses_citations: bool


# ----------------------------------------------------------------------------- citations

_BRACKETS = re.compile(r"\[([^\[\]\n]{1,80})\](?!\()")  # "(...)" after it: a markdown link
_CITATION_LABEL = re.compile(r"[A-Za-z]{0,10}[-_ ]?\d[\w.-]*")


@dataclass(frozen=True, slots=True)
class _Citation:
    start: int
    end: int
    labels: tuple[str, ...]


def _find_citations(text: str, evidence_ids: frozenset[str]) -> list[_Citation]:
    """Bracket groups whose every label has a digit or names an evidence item."""
    found = []
    for match in _BRACKETS.finditer(text):
        labels = tuple(label.strip() for label in re.split(r"[,;]", match.group(1)))
        if labels and all(
            label in evidence_ids or _CITATION_LABEL.fullmatch(label) for label in labels
        ):
            found.append(_Citation(match.start(), match.end(), labels))
    return found


def _resolve(label: str, evidence: Sequence[EvidenceItem]) -> str | None:
    """ "D07" -> the item with that id; "3" -> id "3" if there is one, else the 3rd item."""
    for item in evidence:
        if item.id == label:
            return item.id
    for item in evidence:
        if item.id.lower() == label.lower():
            return item.id
    if label.isdigit() and 1 <= int(label) <= len(evidence):
        return evidence[int(label) - 1].id
    return None


def strip_citations(text: str, evidence_ids: frozenset[str] = frozenset()) -> str:
    """Claim text without its citations, spaces before punctuation closed (as the course)."""
    pieces, last = [], 0
    for citation in _find_citations(text, evidence_ids):
        pieces.append(text[last : citation.start])
        last = citation.end
    pieces.append(text[last:])
    return re.sub(r"\s+([.!?,;:])", r"\1", "".join(pieces)).strip()


# ----------------------------------------------------------------------------- sentences

_LIST_MARKER = re.compile(r"(?:[-*•+]|\d{1,3}[.)])\s+")
_CLOSERS = "\"'\u201d\u2019)"  # straight and curly closing quotes, ")"
_BOUNDARY = re.compile(f"[.!?]+[{re.escape(_CLOSERS)}]*")
_TRAILING_CITATION = re.compile(r"\s*\[[^\[\]\n]{1,80}\](?!\()")
# Abbreviations that are followed by a capitalised word mid-sentence ("Dr. Smith").
_ABBREVIATIONS = frozenset(
    (
        "e.g",
        "i.e",
        "dr",
        "mr",
        "mrs",
        "ms",
        "prof",
        "st",
        "vs",
        "cf",
        "jr",
        "sr",
        "mt",
        "gen",
        "col",
        "sgt",
        "capt",
        "lt",
        "rev",
        "hon",
        "gov",
        "sen",
        "rep",
    )
)
# Abbreviations that are only abbreviations before a number ("No. 5", "Fig. 2").
_NUMERIC_ABBREVIATIONS = frozenset(
    (
        "no",
        "nos",
        "vol",
        "art",
        "p",
        "pp",
        "fig",
        "ch",
        "sec",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
    )
)
_INITIALISM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")  # U.S, e.g, i.e (the final "." is cut)
_NOT_INITIALISMS = frozenset({"a.m", "p.m"})  # "9 a.m. The shop..." does end a sentence


def _ends_sentence(line: str, sentence_start: int, dot: re.Match[str], next_char: str) -> bool:
    """Is this "." / "!" / "?" the end of a sentence, given the next non-space character?"""
    if next_char.islower():
        return False  # "etc. and", "approx. three": a real sentence starts in upper case
    if dot.group(0).rstrip(_CLOSERS) != ".":
        return True  # "!", "?", "...", "?!"
    before = line[sentence_start : dot.start()].split()
    if not before:
        return True
    token = before[-1].lstrip("([\"'\u201c\u2018")
    lowered = token.lower()
    if lowered in _ABBREVIATIONS:
        return False
    if lowered in _NUMERIC_ABBREVIATIONS and next_char.isdigit():
        return False
    if _INITIALISM.fullmatch(token) and lowered not in _NOT_INITIALISMS:
        return False
    return not (len(token) == 1 and token.isupper())  # an initial: "J. Smith"


def _split_line(line: str, offset: int) -> list[tuple[int, int]]:
    """Sentence spans of one line (no newline inside), as offsets in the answer."""
    spans: list[tuple[int, int]] = []
    start = len(line) - len(line.lstrip())
    marker = _LIST_MARKER.match(line, start)
    if marker:
        start = marker.end()
    for dot in _BOUNDARY.finditer(line):
        if dot.start() < start:
            continue
        end = dot.end()
        while cite := _TRAILING_CITATION.match(line, end):  # "...pieces. [D07] Next"
            end = cite.end()
        rest = line[end:]
        if rest.strip() == "":
            break
        if not rest[:1].isspace():
            continue  # "1.5", "U.S.A", "PRC-112.x": not followed by a space
        next_char = rest.lstrip()[0]
        if _ends_sentence(line, start, dot, next_char):
            spans.append((offset + start, offset + end))
            start = end + len(rest) - len(rest.lstrip())
    stripped_end = len(line.rstrip())
    if stripped_end > start:
        spans.append((offset + start, offset + stripped_end))
    return spans


def split_sentences(answer: str) -> list[tuple[int, int]]:
    """Sentence spans of the answer. Line breaks always end a sentence (lists, headings)."""
    spans: list[tuple[int, int]] = []
    offset = 0
    for line in answer.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if body.strip():
            spans.extend(_split_line(body, offset))
        offset += len(line)
    return [(s, e) for s, e in spans if re.search(r"[A-Za-z0-9]", answer[s:e])]


# ------------------------------------------------------------ abstention, conversation

_ABSTAIN = re.compile(
    r"\b(?:i can't find|i cannot find|i don't know|not in the retrieved|no information"
    r"|i (?:can not|could not|couldn't|was unable to|am unable to|'m unable to|am not able to"
    r"|'m not able to) find"
    r"|i do not know|i (?:don't|do not) have (?:enough |any )?information"
    r"|not (?:mentioned |found |included |covered |provided |available )?in the"
    r" (?:retrieved|provided|given|available|supplied) (?:notes?|documents?|context|sources?"
    r"|passages?|information|data|text|articles?|records?)"
    r"|(?:notes|documents|context|sources|passages) (?:do|does) not (?:say|mention|contain|specify"
    r"|state|provide))\b",
    re.IGNORECASE,
)
_GREETING = re.compile(
    r"^(?:hi|hello|hey|dear|greetings|good (?:morning|afternoon|evening))\b", re.IGNORECASE
)
_THANKS = re.compile(r"^(?:thanks|thank you|many thanks)\b", re.IGNORECASE)
_CLOSING = re.compile(
    r"\b(?:let me know|feel free to|i hope (?:this|that|it) helps|hope (?:this|that) helps"
    r"|happy to help|glad to help|glad i could help|(?:don't|do not) hesitate to"
    r"|have a (?:great|nice|good) day)\b",
    re.IGNORECASE,
)
_FILLER = re.compile(
    r"^(?:sure|certainly|of course|absolutely|okay|ok|great|no problem|yes, of course)[.!]*$",
    re.IGNORECASE,
)
_LEAD_IN = re.compile(r"^(?:here is|here are|here's|below is|below are)\b[^:]*[:.!]?$", re.I)
_HEADING = re.compile(r"^(?:#{1,6}\s.*|\*\*[^*]+\*\*:?)$")


def _normalise_quotes(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'")


def is_abstention(sentence: str) -> bool:
    """ "I can't find that in the retrieved notes": a refusal to answer, not a claim."""
    return bool(_ABSTAIN.search(_normalise_quotes(sentence)))


def is_conversational(sentence: str) -> bool:
    """Greetings, thanks, closings, questions and meta lead-ins ("Here is a summary:")
    assert nothing the evidence could support or refute."""
    text = _normalise_quotes(sentence).strip()
    if _GREETING.match(text) and len(text.split()) <= 4:
        return True
    return bool(
        _THANKS.match(text)
        or _CLOSING.search(text)
        or _FILLER.match(text)
        or _LEAD_IN.match(text)
        or _HEADING.match(text)
        or text.endswith((":", "?"))  # a lead-in line, or a question back to the user
    )


# ---------------------------------------------------------------------- atomic claims

_SEPARATOR = re.compile(r";\s+(?:(?:and|but|or|nor|yet|so)\s+)?|,\s+(?:and|but|or|nor|yet|so)\s+")
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'-]*|\d[\d.,:/-]*")  # quotes normalised first
_AUXILIARIES = frozenset(
    (
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "can",
        "could",
        "will",
        "would",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "cannot",
        "can't",
        "won't",
        "isn't",
        "aren't",
        "wasn't",
        "weren't",
        "doesn't",
        "don't",
        "didn't",
        "hasn't",
        "haven't",
        "hadn't",
        "couldn't",
        "wouldn't",
        "shouldn't",
    )
)
_DETERMINERS = frozenset(
    (
        "the",
        "a",
        "an",
        "its",
        "their",
        "his",
        "her",
        "our",
        "your",
        "my",
        "this",
        "that",
        "these",
        "those",
        "all",
        "every",
        "each",
        "some",
        "no",
        "any",
        "both",
        "several",
        "many",
    )
)
_SUBJECT_PRONOUNS = frozenset(
    (
        "i",
        "you",
        "he",
        "she",
        "it",
        "we",
        "they",
        "there",
        "this",
        "that",
    )
)


def asserts(text: str) -> bool:
    """Does this piece of a sentence assert something on its own (subject and verb-ish)?

    Deliberately conservative: a list item ("and grilled chicken sandwiches") or a
    verb phrase without its subject ("and offers a variety of services") does not.
    """
    tokens = [t.lower() for t in _TOKEN.findall(_normalise_quotes(text))]
    if len(tokens) < 3 or not (content_words(text) or numbers(text)):
        return False
    if tokens[0] in _SUBJECT_PRONOUNS and tokens[1] not in _DETERMINERS:
        return True
    for i in range(1, len(tokens)):
        word, before = tokens[i], tokens[i - 1]
        after = tokens[i + 1] if i + 1 < len(tokens) else ""
        if word in _AUXILIARIES:
            return True
        if before in _DETERMINERS:
            continue  # "the blocked invoice", "the payments": adjective or noun
        if word.endswith("ed") and len(word) > 4:
            return True
        verb_s = word.endswith("s") and not word.endswith(("ss", "us", "is"))
        if verb_s and (after in _DETERMINERS or after[:1].isdigit()):
            return True  # "the buyer contacts the vendor", "it costs 5 euros"
    return False


def _atomic_spans(
    answer: str, start: int, end: int, cites: Sequence[_Citation]
) -> list[tuple[int, int]]:
    """Split one sentence span into parts that each assert something (or keep it whole)."""
    text = answer[start:end]
    inside = [(c.start, c.end) for c in cites]
    pieces: list[tuple[int, int]] = []
    last = 0
    for sep in _SEPARATOR.finditer(text):
        if any(s <= sep.start() < e for s, e in inside):
            continue  # "[D1; D2]"
        pieces.append((last, sep.start()))
        last = sep.end()
    pieces.append((last, len(text)))
    if len(pieces) == 1:
        return [(start, end)]
    merged: list[tuple[int, int]] = []
    for piece_start, piece_end in pieces:
        claim_text = strip_citations(text[piece_start:piece_end])
        if merged and not asserts(claim_text):
            merged[-1] = (merged[-1][0], piece_end)
        elif merged and not asserts(strip_citations(text[slice(*merged[-1])])):
            merged[-1] = (merged[-1][0], piece_end)  # a first piece that asserts nothing
        else:
            merged.append((piece_start, piece_end))
    return [(start + s, start + e) for s, e in merged]


# ---------------------------------------------------------------------------- decompose


def _classify(text: str, has_records: bool) -> ClaimClass:
    """record: an id or amount checked against records; rule: everything else asserted."""
    if is_conversational(text):
        return ClaimClass.CONVERSATIONAL
    if has_records and numbers(text):
        return ClaimClass.RECORD
    return ClaimClass.RULE


def _part_labels(
    cites: Sequence[_Citation], offset: int, part: tuple[int, int], last: tuple[int, int]
) -> tuple[str, ...]:
    """A part's own citations; a part without any takes the sentence-final ones
    ("A, and B [D07]." cites D07 for A too)."""

    def within(span: tuple[int, int]) -> list[str]:
        return [lab for c in cites if span[0] <= c.start + offset < span[1] for lab in c.labels]

    return tuple(within(part) or within(last))


def decompose(
    answer: str, evidence: Sequence[EvidenceItem], granularity: Granularity = "sentence"
) -> Decomposition:
    """Split ``answer`` into sentences and claims, resolving citations against ``evidence``."""
    evidence_ids = frozenset(item.id for item in evidence)
    has_records = any(
        item.kind in (EvidenceKind.RECORD, EvidenceKind.TOOL_RESULT) for item in evidence
    )
    all_cites = _find_citations(answer, evidence_ids)
    sentences: list[Sentence] = []
    claims: list[Claim] = []
    abstained = False
    for sentence_start, sentence_end in split_sentences(answer):
        sentence = Sentence(
            len(sentences), sentence_start, sentence_end, answer[sentence_start:sentence_end]
        )
        sentences.append(sentence)
        if is_abstention(sentence.text):
            abstained = True
            continue
        cites = [
            _Citation(c.start - sentence_start, c.end - sentence_start, c.labels)
            for c in all_cites
            if sentence_start <= c.start < sentence_end
        ]
        if granularity == "atomic":
            parts = _atomic_spans(answer, sentence_start, sentence_end, cites)
        else:
            parts = [(sentence_start, sentence_end)]
        parts = [(s, e) for s, e in parts if strip_citations(answer[s:e], evidence_ids)]
        for part_start, part_end in parts:
            labels = _part_labels(cites, sentence_start, (part_start, part_end), parts[-1])
            resolved = [(label, _resolve(label, evidence)) for label in labels]
            text = strip_citations(answer[part_start:part_end], evidence_ids)
            claims.append(
                Claim(
                    index=len(claims),
                    sentence_index=sentence.index,
                    text=text,
                    start=part_start,
                    end=part_end,
                    claim_class=_classify(text, has_records),
                    citations=labels,
                    cited_ids=tuple(dict.fromkeys(r for _, r in resolved if r is not None)),
                    unresolved=tuple(label for label, r in resolved if r is None),
                )
            )
    return Decomposition(tuple(sentences), tuple(claims), abstained, bool(all_cites))
