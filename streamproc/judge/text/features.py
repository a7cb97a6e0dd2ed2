"""Word and number features of claims and evidence, exactly as the course's lab computes them.

Kept byte-for-byte compatible with ``groundedness_lab.py`` (``words()`` / ``numbers()``)
so that the rules judge reproduces the course's published numbers; change this module
and the seed-lab acceptance test tells you what moved.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["STOP_WORDS", "content_words", "numbers", "word_set"]

# The course's stop list, kept as its one string so it compares word for word.
_COURSE_STOP_LIST = (
    "a an the and or but of to in on for from by with at as is are was were be been it its this "
    "that these those there their they them we our you your if then than so may can will "
    "has have had do does not no yes once when while which who what why how all every each "
    "most also into out up"
)


def word_set(listed: str) -> frozenset[str]:
    """A word set from a readable, space-separated string (word lists stay diffable)."""
    return frozenset(listed.split())


STOP_WORDS: frozenset[str] = word_set(_COURSE_STOP_LIST)

# Starts only where a run of letters starts: tried inside one, a long word without a digit
# would be rescanned from each of its letters (a run start fails exactly when they do).
_NUMBER = re.compile(r"(?<![A-Za-z])[A-Za-z]*-?\d[\d.,-]*")
_WORD = re.compile(r"[a-z][a-z'-]+")


def numbers(text: str) -> frozenset[str]:
    """Numbers and codes that contain a digit: 90, 1.5, 4500017311, PRC-112, RM-4711.

    Lower-cased, trailing sentence punctuation removed, so "RM-4711." matches "rm-4711".
    """
    return frozenset(match.rstrip(".,").lower() for match in _NUMBER.findall(text))


# Memoised: the judge asks for the same evidence unit's words once per claim it ranks
# the unit for. Bounded, so a worker's memory is too.
@lru_cache(maxsize=16_384)
def content_words(text: str) -> frozenset[str]:
    """Lower-case content words: stop words and words under 3 letters dropped, "'s" removed,
    a plural "-s" folded to the singular (but not "-ss": "process" stays "process")."""
    out: set[str] = set()
    for word in _WORD.findall(text.lower()):
        word = word.replace("'s", "")
        if word in STOP_WORDS or len(word) < 3:
            continue
        out.add(word[:-1] if word.endswith("s") and not word.endswith("ss") else word)
    return frozenset(out)
