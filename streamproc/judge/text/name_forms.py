"""Is a claim's name one the evidence writes, allowing for how it is spelt?

"NAME_NOT_IN_EVIDENCE: un security council" beside evidence that says "U.N. Security
Council" is a false alarm an auditor sees at once. Only spelling is forgiven here - dots
in acronyms ("U.S.-led" is "US-led"), accents ("Chávez" is "Chavez") and a title in front
of a name the evidence has ("President Obama" beside "President Barack Obama"). Other
names for the same thing ("Britain" for "British", "America" for "United States") are
not: on the calibrate split such changes are as often the labelled hallucination as not.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = ["fold", "known_name"]

_DOTTED_ACRONYM: Final = re.compile(r"\b(?:[^\W\d_]\.){2,}")
_TITLE: Final = re.compile(
    r"^(?:president|vice president|prime minister|chancellor|king|queen|prince|princess"
    r"|pope|senator|sen\.|governor|gov\.|mayor|sir|dame|lord|lady|dr\.?|mr\.?|mrs\.?|ms\.?)"
    r"\s+(?=\S)"
)


def fold(text: str) -> str:
    """Lower case, accents dropped, acronyms undotted: the form names are compared in.
    Apply it to the evidence once and to each name."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _DOTTED_ACRONYM.sub(lambda m: m.group().replace(".", ""), plain)


def known_name(name: str, folded_evidence: str) -> bool:
    """Does the evidence (already :func:`fold`-ed) write ``name``, up to spelling?"""
    folded = fold(name)
    if folded in folded_evidence:
        return True
    untitled = _TITLE.sub("", folded)
    if untitled == folded:
        return False
    # The title must be the evidence's for this name: "President Barack Obama" knows
    # "President Obama"; a president elsewhere and an Obama elsewhere do not.
    title = folded[: len(folded) - len(untitled)].strip()
    titled = rf"(?<!\w){re.escape(title)}\s+(?:[\w'-]+\s+){{0,2}}{re.escape(untitled)}(?!\w)"
    return untitled in folded_evidence and re.search(titled, folded_evidence) is not None
