"""An LRU cache in front of a ``PairScorer``.

The same (premise, hypothesis) pair comes back: a streamed answer is checked sentence by
sentence, each check reading the sentences before it again, and its whole-answer check
at the end reads them all once more. The loader runs a model one pair per call unless
it is batch-invariant (:func:`~streamproc.inference.loader.replayable_batch_size`), so a
pair's score never depends on its neighbours and a cached score is exactly what a fresh
call gives: caching changes cost, never a verdict.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from streamproc.judge.protocols import NliScore, PairScorer

__all__ = ["CachedPairScorer"]


class CachedPairScorer:
    """``PairScorer`` that scores only the pairs it has not seen recently.

    Bounded by entry count (a score is a few floats; a key the two texts). Not
    thread-safe: the judge calls it from one executor thread.
    """

    def __init__(self, inner: PairScorer, *, max_entries: int = 20_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._inner = inner
        self._max = max_entries
        self._scores: OrderedDict[tuple[str, str], NliScore] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    @property
    def sha256(self) -> str:
        return self._inner.sha256

    def __len__(self) -> int:
        return len(self._scores)

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[NliScore]:
        """Same contract as the wrapped scorer: one score per pair, in order."""
        missing = [p for p in dict.fromkeys(pairs) if p not in self._scores]
        self.misses += len(missing)
        self.hits += len(pairs) - len(missing)
        found: dict[tuple[str, str], NliScore] = {}
        for pair in pairs:
            cached = self._scores.get(pair)
            if cached is not None:
                self._scores.move_to_end(pair)
                found[pair] = cached
        if missing:
            for pair, fresh in zip(missing, self._inner.score(missing), strict=True):
                found[pair] = fresh
                self._scores[pair] = fresh
                if len(self._scores) > self._max:
                    self._scores.popitem(last=False)
        return [found[p] for p in pairs]
