"""A bounded LRU map filled a batch at a time: the model caches' common part."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

__all__ = ["BatchLru"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BatchLru(Generic[K, V]):
    """Values by key, the least recently used dropped past ``max_entries``; the keys of a
    batch not held are computed in one call. Not thread-safe: each cache is called from
    one executor thread."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max = max_entries
        self._values: OrderedDict[K, V] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._values)

    def get_many(self, keys: Sequence[K], compute: Callable[[list[K]], Sequence[V]]) -> list[V]:
        """The value of each key, in order; ``compute`` gets the missing ones (each once,
        in first-seen order) and returns their values in that order."""
        missing = [k for k in dict.fromkeys(keys) if k not in self._values]
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        found: dict[K, V] = {}
        for key in keys:
            if key in self._values:
                self._values.move_to_end(key)
                found[key] = self._values[key]
        if missing:
            for key, value in zip(missing, compute(missing), strict=True):
                found[key] = value
                self._values[key] = value
                if len(self._values) > self._max:
                    self._values.popitem(last=False)
        return [found[key] for key in keys]
