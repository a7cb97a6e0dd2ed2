"""Window state of one outcome partition, kept in memory and changelogged to Kafka.

The state is the key/value layout of :mod:`streamproc.monitor.windows.table` (windows,
seen marks, the watermark). Every change is remembered until it is flushed: the window
loop sends the changed keys to a compacted changelog topic (a deleted key as a
tombstone) in the same Kafka transaction as the aggregates and the input offsets, so the
changelog and the offsets always agree. A worker that takes a partition over restores it
by reading that changelog partition from the beginning (``read_committed``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, MutableMapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.structs import TopicPartition

__all__ = ["TrackedStore", "decode_entry", "encode_entry", "restore_partition"]


class TrackedStore(MutableMapping[str, Any]):
    """A dict that remembers which keys changed since :meth:`drain`, in the order of
    their first change (with their latest value): a pane reaches the changelog before
    the seen mark written after it (see ``window_table``), so on a broker without
    transactions a crash that cuts a flush short never keeps a mark without its count.
    (With several events of one pane in a flush, a cut between the pane and the earlier
    events' marks counts those again on redelivery: the pane remembers its last event
    id only. On Kafka the flush is one transaction.)"""

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = data or {}
        self._changed: dict[str, None] = {}

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._data[key] = value
        self._touch(key)

    def __delitem__(self, key: str) -> None:
        del self._data[key]
        self._touch(key)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def _touch(self, key: str) -> None:
        self._changed.setdefault(key, None)  # keeps its first place

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def drain(self) -> list[tuple[str, Any | None]]:
        """The changes since the last drain, in the order of their first change: (key,
        latest value), value None for a deleted key."""
        changes = [(key, self._data.get(key)) for key in self._changed]
        self._changed.clear()
        return changes


def encode_entry(key: str, value: Any | None) -> tuple[bytes, bytes | None]:
    """A changelog record: the key, and the value as JSON or None (tombstone). A value
    with a ``to_json()`` (a pane) is written as what that returns."""
    if value is None:
        return key.encode(), None
    return key.encode(), json.dumps(value, separators=(",", ":"), default=_to_json).encode()


def _to_json(value: Any) -> Any:
    to_json = getattr(value, "to_json", None)
    if to_json is None:
        raise TypeError(f"{type(value).__name__} is not JSON serialisable")
    return to_json()


def decode_entry(value: bytes) -> Any:
    return json.loads(value)


async def restore_partition(
    bootstrap_servers: str,
    changelog: TopicPartition,
    client_options: dict[str, Any] | None = None,
    *,
    settle_timeout_s: float = 60.0,
) -> dict[str, Any]:
    """The committed state of one partition: its changelog read to the end.

    "The end" is taken only once no transaction is open on the partition (last stable
    offset = high watermark): the previous owner's last transaction may be half-way
    through committing (its offsets already committed, its changelog marker not yet
    written), and stopping before it would lose what it counted. A dead owner's open
    transaction is aborted by the broker within its transaction timeout, or at once when
    its slot restarts; ``settle_timeout_s`` bounds the wait.
    """
    reader = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        **(client_options or {}),
    )
    await reader.start()
    try:
        reader.assign([changelog])
        await reader.seek_to_beginning(changelog)
        state: dict[str, Any] = {}
        deadline = time.monotonic() + settle_timeout_s
        while True:
            _apply(state, await reader.getmany(changelog, timeout_ms=500), changelog)
            stable = (await reader.end_offsets([changelog]))[changelog]
            position = await reader.position(changelog)
            high = reader.highwater(changelog)
            # ``high`` comes with the first fetch response; until then nothing is known.
            if high is not None and position >= stable and stable >= high:
                return state
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"restoring {changelog}: at {position}, stable {stable}, high {high} "
                    f"after {settle_timeout_s:g} s (a transaction that never ends?)"
                )
    finally:
        await reader.stop()


def _apply(
    state: dict[str, Any],
    batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]],
    changelog: TopicPartition,
) -> None:
    for record in batch.get(changelog, []):
        key = (record.key or b"").decode()
        if record.value is None:
            state.pop(key, None)
        else:
            state[key] = decode_entry(record.value)
