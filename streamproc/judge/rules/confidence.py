"""Level 1: token confidence per sentence, from the log-probabilities the model returned.

A model that guesses spreads probability over candidates, so the token it picks has a
low probability: the words of a sentence are sure, the digits of an amount it never saw
are a guess. Grammar words are left out ("the" at p = 0.1 means another phrasing, not a
guess). Confidence is not truth, so this only ever cuts in two cases - a degenerate
sentence, and a shaky specific that no record confirms - and otherwise marks LOW.
Thresholds are per model (instruction-tuned models are not calibrated alike).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Final

from streamproc.contracts.events import ConfidenceMark, TokenLogprob
from streamproc.contracts.reasons import Reason
from streamproc.judge.text.features import STOP_WORDS, word_set

__all__ = [
    "ConfidenceThresholds",
    "Confirmed",
    "SentenceConfidence",
    "sentence_confidence",
    "specific_spans",
]

_GRAMMAR_WORDS: Final = STOP_WORDS | word_set(
    "i me my he him his she her hers us its would could should shall did being am over "
    "about after before under very just here s t ll ve re d m"
)
_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_NUMBER_WORDS = (
    r"(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen"
    r"|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty"
    r"|sixty|seventy|eighty|ninety|hundred|thousand|million|billion)"
)
# Ids, amounts, dates and numbers: what a model makes up when it guesses.
_SPECIFIC = re.compile(
    rf"\b{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"  # March 3, 2024
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTHS}\b(?:\.?\s+\d{{4}})?"  # 3 March 2024
    r"|[$€£¥]\s?\d[\d.,]*\d|[$€£¥]\s?\d"  # $118.84
    r"|#?\b[A-Za-z]*[-_#]?\d[\w./:-]*\w|#?\b[A-Za-z]*[-_#]?\d"  # 4500017311, PRC-112, 1.5
    rf"|\b{_NUMBER_WORDS}\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class ConfidenceThresholds:
    """Per-model thresholds. Defaults from the course: cut a sentence whose content mean
    is under ``cut_mean``; a token under ``shaky_p`` is a guess; mark LOW under
    ``low_mean`` or when more than ``low_share`` of content tokens are guesses."""

    cut_mean: float = 0.5
    shaky_p: float = 0.2
    low_mean: float = 0.6
    low_share: float = 0.25

    def __post_init__(self) -> None:
        for name in ("cut_mean", "shaky_p", "low_mean", "low_share"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if self.cut_mean > self.low_mean:
            raise ValueError("cut_mean must not be above low_mean: a cut is also LOW")

    def as_dict(self) -> dict[str, float]:
        """For the audit trail (``JudgeInfo.thresholds``)."""
        return {
            "confidence_cut_mean": self.cut_mean,
            "confidence_shaky_p": self.shaky_p,
            "confidence_low_mean": self.low_mean,
            "confidence_low_share": self.low_share,
        }


@dataclass(frozen=True, slots=True)
class SentenceConfidence:
    """The sentence's mark and why: ``mean`` is the content tokens' mean probability,
    ``low_share`` the share of them under ``shaky_p``; ``reasons`` are codes with
    detail (``SHAKY_SPECIFIC: 4500017312``)."""

    mark: ConfidenceMark
    mean: float
    low_share: float
    content_tokens: int
    reasons: tuple[Reason, ...] = ()


def specific_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every id, amount, date and number in ``text``."""
    return [(m.start(), m.end()) for m in _SPECIFIC.finditer(text)]


def _overlapping(
    spans: Sequence[tuple[int, int]], ends: Sequence[int], start: int, end: int
) -> list[tuple[int, int]]:
    """The spans (in order, disjoint; ``ends`` their ends) that overlap ``[start, end)``,
    by bisection: a scan per token is tokens x specifics on a long sentence."""
    found = []
    for index in range(bisect_right(ends, start), len(spans)):
        if spans[index][0] >= end:
            break
        found.append(spans[index])
    return found


def _is_content(token: str, in_specific: bool) -> bool:
    word = token.strip()
    if in_specific and re.search(r"[^\W_]|[$€£¥]", word):
        return True  # a digit, or the currency of an amount: a guess there is a guess
    if not word or not re.search(r"[^\W_]", word):
        return False  # whitespace or punctuation
    return word.lower().strip("'") not in _GRAMMAR_WORDS


Confirmed = Callable[[str], bool] | Collection[str]
"""What a record confirms: a predicate (``records.confirmation.confirmed_by_records``) or a set of
values as written (``records.confirmation.confirmed_values``)."""


def _text_of(tokens: Sequence[TokenLogprob], start: int, end: int) -> str:
    """The answer text between ``start`` and ``end``, rebuilt from the tokens (they are
    the answer, at their offsets); characters no token covers read as spaces."""
    chars = [" "] * (end - start)
    for token in tokens:
        if token.offset >= end or token.offset + len(token.text) <= start:
            continue
        for i, char in enumerate(token.text, start=token.offset):
            if start <= i < end:
                chars[i - start] = char
    return "".join(chars)


def _confirms(confirmed: Confirmed | None, value: str) -> bool:
    if confirmed is None:
        return False
    if callable(confirmed):
        return confirmed(value)
    return value in confirmed


def sentence_confidence(
    tokens: Sequence[TokenLogprob] | None,
    start: int,
    end: int,
    thresholds: ConfidenceThresholds | None = None,
    *,
    confirmed: Confirmed | None = None,
) -> SentenceConfidence | None:
    """Confidence of the answer sentence between offsets ``start`` and ``end``, or None
    when the answer came without tokens or none of its content tokens is in the span.

    A token belongs to the sentence when its visible text starts inside it (" 4500"
    starts at its "4"). ``confirmed`` says which values a record carries; a shaky
    specific it confirms is not cut, but still counts towards the LOW mark.
    """
    if not tokens:
        return None
    limits = thresholds or ConfidenceThresholds()
    text = _text_of(tokens, start, end)
    specifics = [(s + start, e + start) for s, e in specific_spans(text)]
    specific_ends = [e for _, e in specifics]  # in order and disjoint, as finditer's
    probabilities: list[float] = []
    shaky: dict[tuple[int, int], None] = {}
    for token in tokens:
        t_start = token.offset + len(token.text) - len(token.text.lstrip())
        t_end = token.offset + len(token.text.rstrip())
        if not start <= t_start < end:
            continue
        inside = _overlapping(specifics, specific_ends, t_start, t_end)
        if not _is_content(token.text, bool(inside)):
            continue
        p = math.exp(token.logprob)
        probabilities.append(p)
        if p < limits.shaky_p:
            shaky.update(dict.fromkeys(inside))
    if not probabilities:
        return None
    mean = sum(probabilities) / len(probabilities)
    low_share = sum(p < limits.shaky_p for p in probabilities) / len(probabilities)
    reasons: list[Reason] = []
    cut = False
    if mean < limits.cut_mean:
        cut = True
        reasons.append(
            Reason("LOW_CONFIDENCE_SENTENCE", f"content mean {mean:.2f} < {limits.cut_mean}")
        )
    for s, e in shaky:
        value = text[s - start : e - start].rstrip(".,")
        if _confirms(confirmed, value):
            reasons.append(Reason("SHAKY_SPECIFIC_CONFIRMED", value))
        else:
            cut = True
            reasons.append(Reason("SHAKY_SPECIFIC", value))
    if cut:
        mark = ConfidenceMark.CUT
    elif mean < limits.low_mean or low_share > limits.low_share:
        mark = ConfidenceMark.LOW
        reasons.append(
            Reason(
                "LOW_CONFIDENCE",
                f"content mean {mean:.2f}, {low_share:.0%} of content tokens "
                f"under {limits.shaky_p}",
            )
        )
    else:
        mark = ConfidenceMark.OK
    return SentenceConfidence(mark, mean, low_share, len(probabilities), tuple(reasons))
