"""Which language an answer is written in: py3langid's naive Bayes model (it ships its
model, BSD-3), loaded once, on first use.

The judge's rules, claim splitter and models were measured on English only; an answer in
another language would be judged by rules that do not read it. Detection is what lets
the judge say *unverified* instead (:mod:`streamproc.judge.language`). What is not
language is taken out first - citation marks, numbers, URLs - so an English answer full
of "[D07]" and figures is not read as something else, and a text with too few letters
left is not guessed at all: short texts are where detectors are wrong.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

__all__ = ["DetectedLanguage", "detect_language", "language_text", "letters_in"]

SAMPLE_CHARS: Final = 2_000
"""Only this much of the cleaned text is read: the model's byte walk is Python code, and
a long answer says no more about its language than its first paragraphs do."""

_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.IGNORECASE)
_EMAIL = re.compile(r"\S+@\S+\.\w+")
_CITATION = re.compile(r"\[[^\[\]\n]{1,80}\]")  # "[1]", "[D07]", "[D1, D2]"
_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
_SPACES = re.compile(r"\s+")
_WIDE: Final = "\u3040"
"""From here on, letters are of scripts written without spaces (kana, CJK, Hangul) or
rarer ones; every alphabet before it (Latin, Greek, Cyrillic, Arabic, Indic) is below."""


@dataclass(frozen=True, slots=True)
class DetectedLanguage:
    """The most probable language, its probability, and every language's (normalised over
    py3langid's 97): related languages split the mass (``zh`` / ``wuu``, ``ru`` / ``uk``),
    so "how likely is this *not* a language we support" is a sum, not the top score."""

    code: str
    """ISO 639-1, as py3langid names it (``en``, ``fr``, ``zh``)."""
    probability: float
    probabilities: Mapping[str, float] = field(repr=False, compare=False)

    def probability_of(self, codes: Collection[str]) -> float:
        """The probability that the text is in one of ``codes``."""
        return min(1.0, sum(self.probabilities.get(code, 0.0) for code in set(codes)))


class _Ranker(Protocol):
    """What is used of py3langid's ``LanguageIdentifier`` (the library has no types)."""

    def rank(self, text: str) -> list[tuple[str, float]]: ...


_lock = threading.Lock()
_identifier: _Ranker | None = None


def _model() -> _Ranker:
    """The identifier, loaded once (about 0.1 s) by whichever thread asks first.
    ``classify`` only reads the model, so one instance serves every thread."""
    global _identifier
    if _identifier is None:
        with _lock:
            if _identifier is None:
                # py3langid ships no type information (no py.typed)
                from py3langid.langid import (
                    MODEL_FILE,
                    LanguageIdentifier,
                )

                _identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    return _identifier


def language_text(text: str) -> str:
    """``text`` without what carries no language: URLs, e-mail addresses, citation marks
    and numbers; runs of white space made one."""
    for pattern in (_URL, _EMAIL, _CITATION, _NUMBER):
        text = pattern.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


def letters_in(text: str) -> int:
    """Letters of any script (``str.isalpha``): what a language is told by. A character
    of a script written without spaces (Han, kana, Hangul) counts twice: it carries a
    syllable or a word, and a 20-character Chinese sentence is no short text."""
    return sum(1 + (ch >= _WIDE) for ch in text if ch.isalpha())


def detect_language(text: str, *, min_letters: int) -> DetectedLanguage | None:
    """The language of ``text``, or None when, once cleaned (:func:`language_text`), it
    has fewer than ``min_letters`` letters: too little to tell."""
    cleaned = language_text(text[: 2 * SAMPLE_CHARS])[:SAMPLE_CHARS]
    if letters_in(cleaned) < min_letters:
        return None
    ranking = _model().rank(cleaned)
    code, probability = ranking[0]
    return DetectedLanguage(str(code), float(probability), {str(c): float(p) for c, p in ranking})
