"""The embedding cache returns exactly what the wrapped embedder would, and embeds less."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from streamproc.inference.embedding_cache import CachedEmbedder


class _CountingEmbedder:
    """Deterministic vectors from the text's characters; records every text it embeds."""

    model_name = "counting"
    sha256 = "0" * 64

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.seen.extend(texts)
        rows = np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32)
        if not texts:
            return np.zeros((0, 3), dtype=np.float32)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        out: NDArray[np.float32] = rows / norms
        return out


def test_cached_vectors_equal_fresh_ones_and_repeats_are_not_embedded() -> None:
    inner = _CountingEmbedder()
    cached = CachedEmbedder(inner)
    first = cached.embed(["alpha", "beta", "alpha"])
    second = cached.embed(["beta", "gamma"])
    fresh = _CountingEmbedder().embed(["alpha", "beta", "alpha", "beta", "gamma"])
    np.testing.assert_array_equal(np.vstack([first, second]), fresh)
    assert inner.seen == ["alpha", "beta", "gamma"]
    assert (cached.hits, cached.misses) == (2, 3)


def test_least_recently_used_text_is_evicted_first() -> None:
    inner = _CountingEmbedder()
    cached = CachedEmbedder(inner, max_entries=2)
    cached.embed(["a1", "b22"])
    cached.embed(["a1"])  # a1 is now the most recent
    cached.embed(["c333"])  # evicts b22
    inner.seen.clear()
    cached.embed(["a1", "b22", "c333"])
    assert inner.seen == ["b22"]
    assert len(cached) == 2


def test_empty_input_keeps_the_wrapped_shape() -> None:
    assert CachedEmbedder(_CountingEmbedder()).embed([]).shape == (0, 3)


def test_zero_entries_is_refused() -> None:
    with pytest.raises(ValueError):
        CachedEmbedder(_CountingEmbedder(), max_entries=0)
