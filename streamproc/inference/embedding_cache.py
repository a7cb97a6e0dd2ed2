"""An LRU cache in front of a ``TextEmbedder``.

Evidence repeats across answers (the same retrieved document behind many questions, the
same record behind every answer about one business), and embedding the evidence was
about half of the judge's time. The sentence encoder is batch-invariant (the attention
mask keeps padding out of the mean), so a cached vector is exactly the vector a fresh
call would give: caching changes cost, never a verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from streamproc.inference.batch_lru import BatchLru
from streamproc.judge.protocols import TextEmbedder

__all__ = ["CachedEmbedder"]


class CachedEmbedder:
    """``TextEmbedder`` that embeds only the texts it has not seen recently.

    Bounded by entry count (one 384-float vector is 1.5 KiB, so 20,000 entries is about
    30 MiB). Not thread-safe: the judge calls it from one executor thread per worker.
    """

    def __init__(self, inner: TextEmbedder, *, max_entries: int = 20_000) -> None:
        self._inner = inner
        self._vectors: BatchLru[str, NDArray[np.float32]] = BatchLru(max_entries)

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    @property
    def sha256(self) -> str:
        return self._inner.sha256

    @property
    def hits(self) -> int:
        return self._vectors.hits

    @property
    def misses(self) -> int:
        return self._vectors.misses

    def __len__(self) -> int:
        return len(self._vectors)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Same contract as the wrapped embedder: one unit row per text, in order."""
        if not texts:
            return self._inner.embed([])
        rows = self._vectors.get_many(texts, self._fresh)
        return np.stack(rows).astype(np.float32, copy=False)

    def _fresh(self, texts: list[str]) -> list[NDArray[np.float32]]:
        return [vector.copy() for vector in self._inner.embed(texts)]
