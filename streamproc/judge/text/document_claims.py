"""Sentences about the document rather than about the world.

Summaries often describe their source: "The article discusses the killing of Walter
Scott", "The author argues that body cameras are only part of the answer". No evidence
sentence entails "the article discusses X" - the article *is* the evidence - so read as
a fact such a sentence looks unsupported and raises a false alarm. Two shapes:

- **topic** ("The article discusses / focuses on / highlights X"): true when X is what
  the evidence is about, so it is checked for topic (X's words and names are the
  evidence's), never for entailment of a fact;
- **report** ("The author notes / argues / concludes that Y", "According to the article,
  Y"): the document's voice around a statement, so Y alone is what the verifier reads.

Pure text patterns; English only, like the rest of the claim splitter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from streamproc.contracts.reasons import Reason
from streamproc.judge.text.features import content_words

__all__ = ["TOPIC_MIN_COVERAGE", "DocumentClaim", "about_document", "topic_reason"]

_SOURCE: Final = (
    r"(?:the|this|that)\s+(?:(?:news|original|given|provided|source|above)\s+)?"
    r"(?:article|story|report|piece|text|passage|document|post|essay|op-ed|editorial"
    r"|column|interview|video|news|author|writer|columnist|reporter|journalist|summary"
    r"|speaker|narrator|blog(?:\s+post)?)"
)
_ALSO: Final = (
    r"(?:,\s+[^,]{1,60},)?"  # "The author, a defense attorney, argues"
    r"(?:\s+(?:also|further|then|briefly|additionally|ultimately|finally|repeatedly))?"
)
_LEAD: Final = (
    r"^\s*(?:(?:overall|however|additionally|moreover|furthermore|finally|also|lastly"
    r"|in\s+(?:conclusion|addition|short|summary)),\s+)?"
)
_TOPIC_VERBS: Final = (
    r"discuss(?:es|ed)?|describ(?:es|ed)|explor(?:es|ed)|examin(?:es|ed)|highlight(?:s|ed)"
    r"|focus(?:es|ed)\s+on|cover(?:s|ed)|detail(?:s|ed)|reflect(?:s|ed)\s+on|touch(?:es|ed)\s+on"
    r"|address(?:es|ed)|deal(?:s|t)\s+with|is\s+about|was\s+about|talk(?:s|ed)\s+about"
    r"|report(?:s|ed)\s+on|provid(?:es|ed)\s+(?:an?\s+)?(?:overview|details?|information)\s+(?:of|on|about)"
    r"|offer(?:s|ed)\s+(?:an?\s+)?(?:overview|insight|look)\s+(?:of|into|at|on)"
    r"|shed(?:s)?\s+light\s+on|delv(?:es|ed)\s+into|mention(?:s|ed)|emphasi[sz](?:es|ed)"
    r"|underscor(?:es|ed)|outlin(?:es|ed)|recount(?:s|ed)|tell(?:s)?\s+(?:the\s+story\s+of|of)"
    r"|express(?:es|ed)|acknowledg(?:es|ed)|question(?:s|ed)|criticiz(?:es|ed)|prais(?:es|ed)"
    r"|present(?:s|ed)|analy[sz](?:es|ed)|reference(?:s|d)|compar(?:es|ed)|recall(?:s|ed)"
)
_REPORT_VERBS: Final = (
    r"not(?:es|ed)|argu(?:es|ed)|conclud(?:es|ed)|suggest(?:s|ed)|explain(?:s|ed)|stat(?:es|ed)"
    r"|claim(?:s|ed)|say(?:s)?|said|writ(?:es)|wrote|report(?:s|ed)|point(?:s|ed)\s+out"
    r"|reveal(?:s|ed)|emphasi[sz](?:es|ed)|highlight(?:s|ed)|mention(?:s|ed)|add(?:s|ed)"
    r"|observ(?:es|ed)|believ(?:es|d)|contend(?:s|ed)|maintain(?:s|ed)|indicat(?:es|ed)"
    r"|asserts?|asserted|warn(?:s|ed)|acknowledg(?:es|ed)|show(?:s|ed)|reflect(?:s|ed)"
    r"|describ(?:es|ed)|underscor(?:es|ed)|stress(?:es|ed)"
)
_REPORT: Final = re.compile(
    rf"{_LEAD}{_SOURCE}{_ALSO}\s+(?:{_REPORT_VERBS}|{_TOPIC_VERBS})\s+(?:that\s+|how\s+)"
    r"(?P<content>.+)$",
    re.IGNORECASE | re.DOTALL,
)
_ACCORDING: Final = re.compile(
    rf"^\s*(?:according\s+to|as\s+(?:reported|stated|noted)\s+(?:in|by))\s+{_SOURCE},\s+"
    r"(?P<content>.+)$",
    re.IGNORECASE | re.DOTALL,
)
_TOPIC: Final = re.compile(
    rf"{_LEAD}{_SOURCE}{_ALSO}\s+(?:{_TOPIC_VERBS})\s+(?P<content>.+)$",
    re.IGNORECASE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class DocumentClaim:
    """What a sentence about the document says: its shape and the part to check."""

    kind: Literal["topic", "report"]
    content: str


def about_document(sentence: str) -> DocumentClaim | None:
    """``topic``/``report`` with the part to check (``X`` of "the article discusses X",
    ``Y`` of "the author argues that Y"), or None for a sentence about the world."""
    for pattern in (_REPORT, _ACCORDING):
        match = pattern.match(sentence)
        if match:
            return DocumentClaim("report", _sentence_case(match.group("content")))
    match = _TOPIC.match(sentence)
    if match:
        return DocumentClaim("topic", match.group("content").strip())
    return None


def _sentence_case(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:]


TOPIC_MIN_COVERAGE: Final = 0.5
"""Share of the topic's content words the evidence must contain."""


def topic_reason(topic: str, evidence_words: frozenset[str], missing_names: int) -> Reason | None:
    """None when ``topic`` is what the evidence is about - at least half its content words
    are the evidence's and it names nothing the evidence does not - else the reason it is
    not. Names are counted by the caller (the judge's name rule)."""
    words = content_words(topic)
    share = len(words & evidence_words) / len(words) if words else 1.0
    if share >= TOPIC_MIN_COVERAGE and not missing_names:
        return None
    named = f", {missing_names} name(s) not in it" if missing_names else ""
    return Reason(
        "TOPIC_NOT_IN_EVIDENCE", f"{share:.0%} of the topic's words in the evidence{named}"
    )
