"""The window loop's in-memory store: every change is remembered once until drained, and
a changelog record round-trips (a deleted key is a tombstone)."""

from __future__ import annotations

from streamproc.stream.window_store import TrackedStore, decode_entry, encode_entry


def test_changes_are_drained_once_with_deletions_as_none() -> None:
    store = TrackedStore({"w|a|0": {"answers": 1}, "s|old": [0, 1.0]})
    store["w|a|0"] = {"answers": 2}
    store["s|new"] = [0, 2.0]
    del store["s|old"]
    assert store.drain() == [("s|new", [0, 2.0]), ("s|old", None), ("w|a|0", {"answers": 2})]
    assert store.drain() == []
    assert dict(store) == {"w|a|0": {"answers": 2}, "s|new": [0, 2.0]}


def test_a_key_written_then_deleted_before_a_drain_is_a_tombstone() -> None:
    store = TrackedStore()
    store["m|3"] = 12.5
    del store["m|3"]
    assert store.drain() == [("m|3", None)]


def test_changelog_records_round_trip() -> None:
    key, value = encode_entry("w|assistant-1|60000", {"answers": 3, "closed_at": None})
    assert key == b"w|assistant-1|60000"
    assert value is not None and decode_entry(value) == {"answers": 3, "closed_at": None}
    assert encode_entry("s|e1", None) == (b"s|e1", None)
