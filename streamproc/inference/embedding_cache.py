"""An LRU cache in front of a ``TextEmbedder``.

Evidence repeats across answers (the same retrieved document behind many questions, the
same record behind every answer about one business), and embedding the evidence was
about half of the judge's time. The sentence encoder is batch-invariant (the attention
mask keeps padding out of the mean), so a cached vector is exactly the vector a fresh
call would give: caching changes cost, never a verdict.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from streamproc.judge.protocols import TextEmbedder

__all__ = ["CachedEmbedder"]


class CachedEmbedder:
    """``TextEmbedder`` that embeds only the texts it has not seen recently.

    Bounded by entry count (one 384-float vector is 1.5 KiB, so 20,000 entries is about
    30 MiB). Not thread-safe: the judge calls it from one executor thread per worker.
    """

    def __init__(self, inner: TextEmbedder, *, max_entries: int = 20_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._inner = inner
        self._max = max_entries
        self._vectors: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    @property
    def sha256(self) -> str:
        return self._inner.sha256

    def __len__(self) -> int:
        return len(self._vectors)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Same contract as the wrapped embedder: one unit row per text, in order."""
        if not texts:
            return self._inner.embed([])
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        fresh = self._inner.embed(missing) if missing else None
        found: dict[str, NDArray[np.float32]] = {}
        for text in texts:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
                found[text] = vector
        if fresh is not None:
            for text, vector in zip(missing, fresh, strict=True):
                found[text] = vector
                self._remember(text, vector)
        return np.stack([found[t] for t in texts]).astype(np.float32, copy=False)

    def _remember(self, text: str, vector: NDArray[np.float32]) -> None:
        self._vectors[text] = vector.copy()
        if len(self._vectors) > self._max:
            self._vectors.popitem(last=False)
