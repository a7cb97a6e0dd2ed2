"""Overstatement: a claim stronger than its evidence.

"The drug produced a large benefit" over "the result was not statistically significant"
shares every noun with its source, so word overlap and often NLI call it supported; it
is still a faithfulness failure. Deterministic: a strong word in the claim, a hedge in
an evidence sentence about the same matter (content words shared with the sentence or
its neighbours), and the evidence does not itself use the strong word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from streamproc.contracts.reasons import Reason
from streamproc.judge.text.features import content_words
from streamproc.judge.text.sentences import split_sentences

__all__ = ["OVERSTATED", "OverstatementFinding", "overstated"]

OVERSTATED: Final = "OVERSTATED"

# Strong words and phrases, each with its family: the evidence saying "significantly"
# licenses a claim saying "significant".
_STRONG: Final = {
    "large": "large", "larger": "large", "huge": "large", "massive": "large",
    "substantial": "substantial", "substantially": "substantial",
    "major": "major", "significant": "significant", "significantly": "significant",
    "proven": "proven", "proves": "proven", "prove": "proven", "proof": "proven",
    "always": "always", "never": "never", "all": "all", "every": "all",
    "guaranteed": "guaranteed", "guarantees": "guaranteed", "guarantee": "guaranteed",
    "dramatic": "dramatic", "dramatically": "dramatic",
    "definitely": "definite", "definitive": "definite", "definitively": "definite",
    "conclusively": "conclusive", "conclusive": "conclusive",
    "certainly": "certain", "undoubtedly": "certain", "unquestionably": "certain",
    "clearly shows": "clearly", "clearly demonstrates": "clearly", "clearly proves": "clearly",
    "cures": "cure", "cured": "cure", "cure": "cure", "eliminates": "eliminate",
    "completely": "complete", "entirely": "complete", "strongly": "strong",
    "best": "superlative", "worst": "superlative", "largest": "superlative",
    "biggest": "superlative", "greatest": "superlative", "highest": "superlative",
    "lowest": "superlative", "strongest": "superlative", "most effective": "superlative",
    "most important": "superlative", "safest": "superlative", "fastest": "superlative",
}  # fmt: skip
# Hedges on a *result* stated nearby ("The drug cut risk by half. The result was not
# significant."): they count for the sentence before and after them too. Negated
# significance comes first, so the "significant" inside it is not read as strong.
_RESULT_HEDGES: Final = (
    r"not\s+(?:statistically\s+)?significant(?:ly)?",
    r"(?:no|non)[-\s]+(?:statistically\s+)?significant(?:ly)?",
    r"insignificant",
    r"did\s+not\s+reach\s+(?:statistical\s+)?significance",
    r"inconclusive", r"preliminary", r"consistent\s+with\s+no\s+effect",
    r"mixed\s+(?:results|evidence|findings)", r"not\s+yet\s+(?:confirmed|proven|replicated)",
)  # fmt: skip
# Hedges inside the sentence that makes the point: "may reduce", "a small study".
_WORD_HEDGES: Final = (
    r"may", r"might", r"could", r"possibly", r"potentially",
    r"suggests?", r"suggested", r"suggesting", r"tentative(?:ly)?",
    r"appears?\s+to", r"seems?\s+to", r"unclear", r"uncertain", r"limited\s+evidence",
    r"(?:small|modest|slight|marginal)(?:ly)?\s+(?:\w+\s+)?"
    r"(?:effect|benefit|study|trial|sample|difference|increase|decrease|improvement"
    r"|reduction|change|number|cohort|gain|rise|drop)s?",
    r"associated\s+with", r"linked\s+to", r"correlated\s+with",
    r"in\s+(?:some|certain|rare)\s+cases", r"sometimes", r"occasionally",
    r"early\s+(?:results|data|evidence|findings)", r"pilot\s+study",
    r"trend(?:ed)?\s+toward",
)  # fmt: skip
_RESULT_HEDGE = re.compile(r"\b(?:" + "|".join(_RESULT_HEDGES) + r")\b", re.IGNORECASE)
_HEDGE = re.compile(r"\b(?:" + "|".join(_RESULT_HEDGES + _WORD_HEDGES) + r")\b", re.IGNORECASE)
_P_VALUE = re.compile(r"\bp\s*(?P<op>[=<>≥≤]|>=|<=)\s*(?P<value>0?\.\d+)", re.IGNORECASE)
_INTERVAL = re.compile(
    r"\b(?:CI|confidence\s+interval)\b[^0-9\-]{0,20}"
    r"(?P<low>-?\d+(?:\.\d+)?)\s*(?:-|\u2013|to|,)\s*(?P<high>-?\d+(?:\.\d+)?)",
    re.IGNORECASE,
)
_STRONG_PATTERN = re.compile(
    r"\b(?:" + "|".join(sorted((re.escape(k) for k in _STRONG), key=len, reverse=True)) + r")\b",
    re.IGNORECASE,
)
_NEGATED_BEFORE = re.compile(
    r"(?:\b(?:not|no|nor|without|hardly)|n't)\W+(?:\w+\W+){0,3}$", re.IGNORECASE
)
_MIN_SHARED: Final = 2
_MONTH_MAY = re.compile(r"\bMay\b(?=\s+\d)|(?<=\w\s)May\b")  # "in May 2020", "... May"


@dataclass(frozen=True, slots=True)
class OverstatementFinding:
    """A strong claim over hedged evidence: the words that make it so, and where."""

    strong: tuple[str, ...]
    hedges: tuple[str, ...]
    evidence_sentence: str
    reason: str = OVERSTATED

    @property
    def detail(self) -> str:
        return (
            f"claim says {', '.join(self.strong)}; the evidence hedges "
            f"({', '.join(self.hedges)}): {self.evidence_sentence}"
        )

    @property
    def reason_text(self) -> Reason:
        return Reason(self.reason, self.detail)


def _strong_words(claim: str) -> dict[str, str]:
    """Strong words the claim asserts (not "not significant", not "not all"): word ->
    family."""
    found: dict[str, str] = {}
    for match in _STRONG_PATTERN.finditer(claim):
        word = re.sub(r"\s+", " ", match[0].lower())
        if _NEGATED_BEFORE.search(claim[: match.start()]) and word != "never":
            continue
        if _HEDGE.search(claim):
            hedged = any(h.start() <= match.start() < h.end() for h in _HEDGE.finditer(claim))
            if hedged:
                continue
        found[word] = _STRONG[word]
    return found


@lru_cache(maxsize=4096)
def _hedges(sentence: str) -> tuple[tuple[str, ...], bool]:
    """The sentence's hedges, and whether one of them is about a result (significance,
    a p-value over 0.05, an interval crossing the null), which may sit one sentence away
    from the result it qualifies."""
    text = _MONTH_MAY.sub("", sentence)
    found = [re.sub(r"\s+", " ", m[0].lower()) for m in _HEDGE.finditer(text)]
    about_result = bool(_RESULT_HEDGE.search(text))
    for p in _P_VALUE.finditer(text):
        if p["op"] in (">", ">=", "≥") or (p["op"] == "=" and float(p["value"]) >= 0.05):
            found.append(re.sub(r"\s+", " ", p[0]))
            about_result = True
    for ci in _INTERVAL.finditer(text):
        low, high = float(ci["low"]), float(ci["high"])
        if low < 0 < high or low < 1 < high:
            found.append(f"interval {ci['low']} to {ci['high']} crosses the null")
            about_result = True
    return tuple(dict.fromkeys(found)), about_result


# Memoised, like _hedges and _sentences: every claim of an answer reads the same
# evidence items. Bounded, so a worker's memory is too.
@lru_cache(maxsize=1024)
def _families_used(evidence: str) -> frozenset[str]:
    """Strong words the evidence itself asserts, outside its hedges."""
    return frozenset(_strong_words(_HEDGE.sub(" ", evidence)).values())


@lru_cache(maxsize=1024)
def _sentences(evidence: str) -> tuple[str, ...]:
    return tuple(evidence[s:e] for s, e in split_sentences(evidence))


def _stem(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def _topic(text: str) -> set[str]:
    """Content words, lightly stemmed, without strong or hedge words (they are the
    finding, not the matter)."""
    words = {_stem(w) for w in content_words(text)}
    return words - {_stem(w) for w in _STRONG} - {"significant", "statistically", "result"}


def _hedged_claim(claim: str) -> bool:
    """ "may largely", "would be a significant upgrade": a claim that hedges or predicts
    is no stronger than hedged evidence."""
    rest = _STRONG_PATTERN.sub(" ", claim)
    return bool(_hedges(rest)[0] or re.search(r"\bwould\b", rest, re.IGNORECASE))


def overstated(claim_text: str, evidence_text: str) -> OverstatementFinding | None:
    """``OVERSTATED`` when the claim uses a strong word, an evidence sentence about the
    same matter hedges, and the evidence never uses that strong word itself.

    "About the same matter": the hedged sentence shares at least two content words with
    the claim; a hedge on a result ("not significant", "p = 0.3") qualifies the sentence
    next to it too, so one shared word within those three sentences is enough.
    """
    strong = _strong_words(claim_text)
    if not strong or _hedged_claim(claim_text):
        return None
    used = _families_used(evidence_text)
    strong = {w: f for w, f in strong.items() if f not in used}
    if not strong:
        return None
    topic = _topic(claim_text)
    sentences = _sentences(evidence_text)
    for i, sentence in enumerate(sentences):
        hedges, about_result = _hedges(sentence)
        if not hedges:
            continue
        same_matter = len(topic & _topic(sentence)) >= _MIN_SHARED
        if about_result and not same_matter:
            same_matter = bool(topic & _topic(" ".join(sentences[max(0, i - 1) : i + 2])))
        if same_matter:
            return OverstatementFinding(tuple(strong), tuple(hedges), sentence.strip())
    return None
