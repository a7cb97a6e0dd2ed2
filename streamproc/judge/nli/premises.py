"""Composed premises: a claim's best evidence sentences, read together in document order.

An abstractive sentence ("Rescue teams struggle to reach villages cut off by the quake")
often fuses two or three evidence sentences that each state only part of it, so no single
unit entails it while the sentences together do. The judge therefore also asks the
verifier about the claim against the sentences of its top retrieved units, joined in the
order the document has them (so "he" still follows the name it refers to), cut to a word
budget that fits the model's input with the claim.

Pure and shared with the verifier's training pairs (``modelwork/verifier/pairs.py``), so the
model is trained on premises built exactly the way the judge builds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from streamproc.judge.text.evidence import EvidenceUnit

__all__ = ["COMPOSED_WORDS", "ComposedPremise", "compose_premise"]

COMPOSED_WORDS: Final = 120
"""About 160 word pieces: with a claim of up to 60 it fits a 256-token verifier."""


@dataclass(frozen=True, slots=True)
class ComposedPremise:
    """The premise text and the evidence items its sentences come from, in order."""

    text: str
    evidence_ids: tuple[str, ...]
    sentences: int


def compose_premise(
    units: Sequence[EvidenceUnit], ranked: Sequence[int], max_words: int = COMPOSED_WORDS
) -> ComposedPremise | None:
    """The sentences of the units at ``ranked`` (best first), as many as fit in
    ``max_words`` taken in rank order, then put back in document order. None when they
    come to fewer than two sentences: one sentence is a unit the judge already asked.

    A window contributes its sentences; the question never does (it is not evidence).
    The first sentence is always taken, even when it alone exceeds the budget.
    """
    sentence_text = {
        (u.evidence_id, u.first): u.text for u in units if not u.is_window and u.kind != "question"
    }
    item_order = {eid: n for n, eid in enumerate(dict.fromkeys(u.evidence_id for u in units))}
    chosen: list[tuple[str, int]] = []
    words = 0
    for index in ranked:
        unit = units[index]
        for number in range(unit.first, unit.last + 1):
            key = (unit.evidence_id, number)
            if key not in sentence_text or key in chosen:
                continue
            size = len(sentence_text[key].split())
            if chosen and words + size > max_words:
                continue
            chosen.append(key)
            words += size
    if len(chosen) < 2:
        return None
    chosen.sort(key=lambda key: (item_order[key[0]], key[1]))
    return ComposedPremise(
        text=" ".join(sentence_text[key] for key in chosen),
        evidence_ids=tuple(dict.fromkeys(eid for eid, _ in chosen)),
        sentences=len(chosen),
    )
