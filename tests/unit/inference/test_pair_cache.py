"""The NLI pair cache: a cached score is the fresh one, only unseen pairs reach the model,
and the cache stays within its bound."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from streamproc.inference.pair_cache import CachedPairScorer
from streamproc.judge.protocols import NliScore
from tests.unit.judge.nli_fakes import OverlapScorer


class CountingScorer(OverlapScorer):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, str]] = []

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[NliScore]:
        self.asked.extend(pairs)
        return super().score(pairs)


PAIRS = [("The parcel weighed 4 kg.", "It weighed 4 kg."), ("Order 7 left Leeds.", "It left York.")]


def test_cached_scores_are_the_fresh_scores_and_repeats_skip_the_model() -> None:
    inner = CountingScorer()
    cached = CachedPairScorer(inner, max_entries=10)
    first = cached.score([*PAIRS, PAIRS[0]])
    again = cached.score(list(reversed(PAIRS)))
    assert first == [*OverlapScorer().score(PAIRS), OverlapScorer().score(PAIRS[:1])[0]]
    assert again == list(reversed(first[:2]))
    assert inner.asked == PAIRS  # each pair asked once, duplicates within a call included
    assert (cached.hits, cached.misses) == (3, 2)
    assert (cached.model_name, cached.sha256) == (inner.model_name, inner.sha256)


def test_the_cache_keeps_at_most_its_bound_evicting_the_least_recent() -> None:
    inner = CountingScorer()
    cached = CachedPairScorer(inner, max_entries=2)
    pairs = [(f"premise {i}", f"claim {i}") for i in range(3)]
    cached.score(pairs[:2])
    cached.score(pairs[:1])  # pair 0 is now the most recent
    cached.score(pairs[2:])
    assert len(cached) == 2
    inner.asked.clear()
    cached.score([pairs[0], pairs[1]])
    assert inner.asked == [pairs[1]]  # pair 1 was evicted, pair 0 kept


def test_an_empty_cache_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        CachedPairScorer(CountingScorer(), max_entries=0)
