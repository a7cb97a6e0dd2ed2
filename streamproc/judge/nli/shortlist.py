"""Which evidence sentences are worth embedding for an answer's claims.

Retrieval embeds every evidence sentence of an answer, and on long evidence most of
them share few or none of the words of any claim: a RAGTruth source of 36 sentences
with 7 claims spends more time in the embedder than in NLI. A claim's top units by
retrieval's blend of cosine and word overlap are, almost always, among its top units
by word overlap alone, so each claim keeps its best ``keep`` sentences by overlap
(rare words weigh more, words meet on their first five letters, and a sentence naming
one of its numbers or names counts extra), and only the union is embedded and ranked.
Short evidence (at most ``keep`` sentences) is embedded whole.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Sequence

from streamproc.judge.nli.retrieval import mentions_any, names
from streamproc.judge.nli.units import window_members
from streamproc.judge.text.evidence import EvidenceUnit
from streamproc.judge.text.features import content_words, numbers

__all__ = ["lexical_shortlist"]

_EXACT_BONUS = 0.5
_STEM = 5


def _stems(words: Iterable[str]) -> frozenset[str]:
    """Words cut to their first five letters: "announced" and "announcement" meet."""
    return frozenset(w[:_STEM] for w in words)


def _idf(documents: Iterable[frozenset[str]], count: int) -> dict[str, float]:
    """log(1 + n / df) per stem over the answer's own sentences ("" = unseen: df 1)."""
    frequency = Counter(stem for stems in documents for stem in stems)
    rarity = {stem: math.log(1 + count / df) for stem, df in frequency.items()}
    rarity[""] = math.log(1 + count)
    return rarity


def lexical_shortlist(
    units: Sequence[EvidenceUnit],
    hypotheses: Sequence[str],
    keep: int,
    always: Collection[int] = (),
) -> list[int] | None:
    """Indices of the units to embed and rank, in order, or None for all of them.

    Sentences: each hypothesis's best ``keep`` by word overlap, plus ``always`` (the
    units of cited evidence, whose own ranking needs them). A window is kept when all
    its sentences are; a window whose sentences are not units of their own is kept."""
    members = window_members(units)
    sentences = [i for i, u in enumerate(units) if i not in members]
    if len(sentences) <= keep:
        return None
    words = {i: _stems(content_words(units[i].text)) for i in sentences}
    rarity = _idf(words.values(), len(sentences))
    chosen = set(always)
    for hypothesis in hypotheses:
        claim_words = _stems(content_words(hypothesis))
        weight = sum(rarity.get(w, rarity[""]) for w in claim_words) or 1.0
        specifics = numbers(hypothesis) | names(hypothesis)
        overlap = {
            i: sum(rarity[w] for w in claim_words & words[i]) / weight
            + _EXACT_BONUS * (bool(specifics) and mentions_any(units[i].text, specifics))
            for i in sentences
        }
        chosen.update(sorted(sentences, key=overlap.__getitem__, reverse=True)[:keep])
    windows = {w for w, parts in members.items() if all(p in chosen for p in parts)}
    return sorted(chosen | windows)
