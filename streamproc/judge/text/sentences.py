"""Where sentences end: not at decimals ("1.5 percent"), abbreviations ("e.g.", "Dr.",
"U.S.") or ids, and always at a line break (lists, headings)."""

from __future__ import annotations

import re

from streamproc.judge.text.features import word_set

__all__ = ["split_sentences"]


_LIST_MARKER = re.compile(r"(?:[-*•+]|\d{1,3}[.)])\s+")
_CLOSERS = "\"'\u201d\u2019)"  # straight and curly closing quotes, ")"
_BOUNDARY = re.compile(f"[.!?]+[{re.escape(_CLOSERS)}]*")
_TRAILING_CITATION = re.compile(r"\s*\[[^\[\]\n]{1,80}\](?!\()")
# Abbreviations that are followed by a capitalised word mid-sentence ("Dr. Smith",
# "Roe v. Wade").
_ABBREVIATIONS = word_set(
    "e.g i.e dr mr mrs ms prof st vs v cf jr sr mt gen col sgt capt lt rev hon gov sen rep"
)
# Abbreviations that are only abbreviations before a number ("No. 5", "Fig. 2").
_NUMERIC_ABBREVIATIONS = word_set(
    "no nos vol art p pp fig ch sec jan feb mar apr jun jul aug sep sept oct nov dec"
)
# "Here is a summary in 75 words: The council ..." - a meta lead-in, then the claim.
_LEAD_IN = re.compile(
    r"(?:(?:sure|certainly|of course|okay)[,!.]?\s+)?"
    r"(?:here is|here are|here's|below is|below are|the following is)\b[^:\n]{0,100}:\s+",
    re.IGNORECASE,
)
_INITIALISM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")  # U.S, e.g, i.e (the final "." is cut)
_NOT_INITIALISMS = frozenset({"a.m", "p.m"})  # "9 a.m. The shop..." does end a sentence
_NON_SPACE = re.compile(r"\S")


def _last_token(line: str, start: int, end: int) -> str:
    """The last whitespace-separated token of ``line[start:end]`` ("" if none), found by
    walking back from ``end``: ``line[start:end].split()[-1]`` costs the whole span, and
    a sentence of many "Dr." would pay it once per dot."""
    stop = end
    while stop > start and line[stop - 1].isspace():
        stop -= 1
    first = stop
    while first > start and not line[first - 1].isspace():
        first -= 1
    return line[first:stop]


def _ends_sentence(line: str, sentence_start: int, dot: re.Match[str], next_char: str) -> bool:
    """Is this "." / "!" / "?" the end of a sentence, given the next non-space character?"""
    if next_char.islower():
        return False  # "etc. and", "approx. three": a real sentence starts in upper case
    if dot.group(0).rstrip(_CLOSERS) != ".":
        return True  # "!", "?", "...", "?!"
    last = _last_token(line, sentence_start, dot.start())
    if not last:
        return True
    token = last.lstrip("([\"'\u201c\u2018")
    lowered = token.lower()
    if lowered in _ABBREVIATIONS:
        return False
    if lowered in _NUMERIC_ABBREVIATIONS and next_char.isdecimal():
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
    stripped_end = len(line.rstrip())
    for dot in _BOUNDARY.finditer(line):
        if dot.start() < start:
            continue
        end = dot.end()
        while cite := _TRAILING_CITATION.match(line, end):  # "...pieces. [D07] Next"
            end = cite.end()
        if end >= stripped_end:
            break  # only spaces follow
        if not line[end].isspace():
            continue  # "1.5", "U.S.A", "PRC-112.x": not followed by a space
        following = _NON_SPACE.search(line, end)
        next_start = following.start() if following else stripped_end
        if _ends_sentence(line, start, dot, line[next_start]):
            spans.append((offset + start, offset + end))
            start = next_start
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
    spans = [part for span in spans for part in _split_lead_in(answer, span)]
    return [(s, e) for s, e in spans if re.search(r"[A-Za-z0-9]", answer[s:e])]


def _split_lead_in(answer: str, span: tuple[int, int]) -> list[tuple[int, int]]:
    """A meta lead-in and the claim after it are two sentences: the lead-in is
    conversational and must neither be checked nor dilute the claim it introduces."""
    start, end = span
    match = _LEAD_IN.match(answer, start, end)
    if match is None or match.end() >= end:
        return [span]
    colon = answer.rindex(":", start, match.end())
    return [(start, colon + 1), (match.end(), end)]
