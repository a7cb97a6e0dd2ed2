"""How a claim's words tie it to the evidence beyond its values: a claim that restates a
policy or passage ("Refunds are completed within 7 working days of initiation") tells how
things go, not what was done in this case, so no call and no record needs to have done
it; a claim that names a recorded date by its key ("its due date is tomorrow") says
which day it means."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from streamproc.judge.records._value_findings import own_keys
from streamproc.judge.records.case_facts import CaseFacts
from streamproc.judge.text.features import word_set
from streamproc.judge.text.stems import stem, words

__all__ = ["PassageWords", "names_a_date_key"]

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


# Keys every date field has: they name no particular date.
_DATE_WORDS: Final = frozenset(stem(w) for w in word_set("date time at on day ts timestamp"))
_PREFIX: Final = 5  # "deliver" and "delivery" stem apart; their first letters agree


def names_a_date_key(stems: frozenset[str], facts: CaseFacts) -> bool:
    keys = {k for _, typed in facts.times for k in own_keys(typed.ref)} - _DATE_WORDS
    return any(
        said == key or (min(len(said), len(key)) >= _PREFIX and said[:_PREFIX] == key[:_PREFIX])
        for said in stems
        for key in keys
    )
