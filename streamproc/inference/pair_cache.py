"""An LRU cache in front of a ``PairScorer``.

The same (premise, hypothesis) pair comes back: a streamed answer is checked sentence by
sentence, each check reading the sentences before it again, and its whole-answer check
at the end reads them all once more. The loader runs a model one pair per call unless
it is batch-invariant (:func:`~streamproc.inference.loader.replayable_batch_size`), so a
pair's score never depends on its neighbours and a cached score is exactly what a fresh
call gives: caching changes cost, never a verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamproc.inference.batch_lru import BatchLru
from streamproc.judge.protocols import NliScore, PairScorer

__all__ = ["CachedPairScorer"]


class CachedPairScorer:
    """``PairScorer`` that scores only the pairs it has not seen recently, at most
    ``max_entries`` of them (a score is a few floats; a key the two texts)."""

    def __init__(self, inner: PairScorer, *, max_entries: int = 20_000) -> None:
        self._inner = inner
        self._scores: BatchLru[tuple[str, str], NliScore] = BatchLru(max_entries)

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    @property
    def sha256(self) -> str:
        return self._inner.sha256

    @property
    def hits(self) -> int:
        return self._scores.hits

    @property
    def misses(self) -> int:
        return self._scores.misses

    def __len__(self) -> int:
        return len(self._scores)

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[NliScore]:
        """Same contract as the wrapped scorer: one score per pair, in order."""
        return self._scores.get_many(pairs, self._inner.score)
