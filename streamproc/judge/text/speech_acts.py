"""Sentences that are not claims: abstentions ("I can't find that in the notes") and
conversation ("Thanks for reaching out", "Here is a summary:")."""

from __future__ import annotations

import re

__all__ = ["is_abstention", "is_conversational", "normalise_quotes"]

_ABSTAIN = re.compile(
    r"\b(?:i can't find|i cannot find|i don't know|not in the retrieved|no information"
    r"|i (?:can not|could not|couldn't|was unable to|am unable to|'m unable to|am not able to"
    r"|'m not able to) find"
    r"|i do not know|i (?:don't|do not) have (?:enough |any )?information"
    r"|not (?:mentioned |found |included |covered |provided |available )?in the"
    r" (?:retrieved|provided|given|available|supplied) (?:notes?|documents?|context|sources?"
    r"|passages?|information|data|text|articles?|records?)"
    r"|(?:notes|documents|context|sources|passages) (?:do|does) not (?:say|mention|contain|specify"
    r"|state|provide))\b",
    re.IGNORECASE,
)
_GREETING = re.compile(
    r"^(?:hi|hello|hey|dear|greetings|good (?:morning|afternoon|evening))\b", re.IGNORECASE
)
_THANKS = re.compile(r"^(?:thanks|thank you|many thanks)\b", re.IGNORECASE)
_CLOSING = re.compile(
    r"\b(?:let me know|feel free to|i hope (?:this|that|it) helps|hope (?:this|that) helps"
    r"|happy to help|glad to help|glad i could help|(?:don't|do not) hesitate to"
    r"|have a (?:great|nice|good) day)\b",
    re.IGNORECASE,
)
_FILLER = re.compile(
    r"^(?:sure|certainly|of course|absolutely|okay|ok|great|no problem|yes, of course)[.!]*$",
    re.IGNORECASE,
)
_LEAD_IN = re.compile(r"^(?:here is|here are|here's|below is|below are)\b[^:]*[:.!]?$", re.I)
_HEADING = re.compile(r"^(?:#{1,6}\s.*|\*\*[^*]+\*\*:?)$")


def normalise_quotes(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'")


def is_abstention(sentence: str) -> bool:
    """ "I can't find that in the retrieved notes": a refusal to answer, not a claim."""
    return bool(_ABSTAIN.search(normalise_quotes(sentence)))


def is_conversational(sentence: str) -> bool:
    """Greetings, thanks, closings, questions and meta lead-ins ("Here is a summary:")
    assert nothing the evidence could support or refute."""
    text = normalise_quotes(sentence).strip()
    if _GREETING.match(text) and len(text.split()) <= 4:
        return True
    return bool(
        _THANKS.match(text)
        or _CLOSING.search(text)
        or _FILLER.match(text)
        or _LEAD_IN.match(text)
        or _HEADING.match(text)
        or text.endswith((":", "?"))  # a lead-in line, or a question back to the user
    )
