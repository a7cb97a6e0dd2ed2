"""Words as stems, so that a claim and a record meet whatever the inflection.

"cancelled", "canceled", "cancel" and "cancellation" are one word to a reader and must be
one to the record checks: a call named ``cancel_booking``, a state ``CANCELLED`` and a
claim "your booking was cancelled" all say *cancel*. Stems come from the Snowball English
stemmer (the ``snowballstemmer`` package: the field's own, pure Python, BSD-3) with the
common irregular past forms mapped to their verb first (it leaves "paid" and "sent" as
they are). Words are runs of letters and digits; anything else separates them, so
``queued_for_review``, ``queuedForReview`` and "queued for review" read alike. Linear in the text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

import snowballstemmer

__all__ = ["SKIPPED_WORDS", "Word", "phrase_key", "stem", "words"]

_STEMMER: Final = snowballstemmer.stemmer("english")

# Irregular past forms the stemmer keeps apart from their verb: what agents write when
# they report an action ("I have sent", "it was paid").
_IRREGULAR: Final = {
    "paid": "pay", "sent": "send", "made": "make", "done": "do", "did": "do",
    "given": "give", "gave": "give", "taken": "take", "took": "take", "held": "hold",
    "kept": "keep", "left": "leave", "found": "find", "bought": "buy", "sold": "sell",
    "told": "tell", "brought": "bring", "got": "get", "gotten": "get", "written": "write",
    "wrote": "write", "chosen": "choose", "chose": "choose", "frozen": "freeze",
    "froze": "freeze", "withdrawn": "withdraw", "withdrew": "withdraw", "spent": "spend",
    "lost": "lose", "met": "meet", "rebuilt": "rebuild", "built": "build", "won": "win",
    "begun": "begin", "began": "begin", "gone": "go", "went": "go", "seen": "see",
    "saw": "see", "flown": "fly", "flew": "fly", "shown": "show", "drawn": "draw",
    "undone": "undo", "overpaid": "overpay", "prepaid": "prepay", "repaid": "repay",
    "resent": "resend", "rerun": "rerun", "arisen": "arise", "fallen": "fall",
    "fell": "fall", "driven": "drive", "drove": "drive", "ridden": "ride", "broken": "break",
    "broke": "break", "stolen": "steal", "forgotten": "forget", "forgot": "forget",
    "hidden": "hide", "woken": "wake", "rung": "ring", "sunk": "sink", "thrown": "throw",
    "threw": "throw", "worn": "wear", "torn": "tear", "dealt": "deal", "meant": "mean",
    "heard": "hear", "understood": "understand", "stood": "stand", "sat": "sit",
    "lent": "lend", "bent": "bend", "felt": "feel", "led": "lead", "fed": "feed",
    "fled": "flee", "sped": "speed", "slept": "sleep", "swept": "sweep",
}  # fmt: skip
# Words a phrase does without: "waiting for a review" is "waiting for review", "your
# order" is "order".
SKIPPED_WORDS: Final = frozenset(
    {"a", "an", "the", "your", "you're", "yours", "my", "our", "ours", "its", "their", "his"}
    | {"her", "this", "that", "these", "those"}
)


@lru_cache(maxsize=32_768)
def stem(word: str) -> str:
    """The stem of one lower-case word ("cancelled" -> "cancel", "paid" -> "pay")."""
    return str(_STEMMER.stemWord(_IRREGULAR.get(word, word)))


@dataclass(frozen=True, slots=True)
class Word:
    """One word of a text: where it is, as written, lower-cased and stemmed."""

    start: int
    end: int
    text: str

    @property
    def lower(self) -> str:
        return self.text.lower()

    @property
    def stem(self) -> str:
        return stem(self.text.lower())


def words(text: str) -> Iterator[Word]:
    """The runs of letters and digits of ``text``, in order; a camelCase run is split at
    its humps ("issueRefund" is "issue", "Refund")."""
    start = -1
    for index, char in enumerate(text):
        if char.isalnum():
            if start < 0:
                start = index
            elif char.isupper() and text[index - 1].islower():
                yield Word(start, index, text[start:index])
                start = index
        elif start >= 0:
            yield Word(start, index, text[start:index])
            start = -1
    if start >= 0:
        yield Word(start, len(text), text[start:])


@lru_cache(maxsize=16_384)
def phrase_key(phrase: str) -> tuple[str, ...]:
    """A phrase as the stems of its words, articles and possessives left out:
    "Waiting for a review" and ``waiting_for_review`` give ("wait", "for", "review")."""
    return tuple(w.stem for w in words(phrase) if w.lower not in SKIPPED_WORDS)
