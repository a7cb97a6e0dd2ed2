"""A claim that restates a policy or passage: "Refunds are completed within 7 working
days of initiation" tells how things go, not what was done in this case, so no call and
no record needs to have done it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from streamproc.judge.text.stems import words

__all__ = ["PassageWords"]

_SHARE: Final = 0.8  # of the claim's words one passage must write
_MIN_WORDS: Final = 4  # "It was refunded": too short to be read as a restated rule


def _stems(text: str) -> frozenset[str]:
    return frozenset(w.stem for w in words(text) if len(w.lower) > 2)


class PassageWords:
    """The word stems of each policy or passage text of one answer's evidence."""

    def __init__(self, texts: Iterable[str]) -> None:
        self._passages = [_stems(text) for text in texts]

    def restated(self, claim: str) -> bool:
        said = _stems(claim)
        if len(said) < _MIN_WORDS:
            return False
        return any(len(said & passage) >= _SHARE * len(said) for passage in self._passages)
