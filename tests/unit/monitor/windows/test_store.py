"""The window loop's in-memory store: every change is remembered once until drained, in
the order of its first change (a pane before the seen mark written after it), and a
changelog record round-trips (a deleted key is a tombstone)."""

from __future__ import annotations

import pytest

from streamproc.kafka.store import TrackedStore, decode_entry, encode_entry
from streamproc.monitor.windows.panes import Pane


def test_changes_are_drained_once_in_first_change_order_with_deletions_as_none() -> None:
    store = TrackedStore({"p|a|0": {"answers": 1}, "s|old": [0, 1.0]})
    store["p|a|0"] = {"answers": 2}
    store["s|new"] = [0, 2.0]
    store["p|a|0"] = {"answers": 3}  # rewritten: keeps its place, carries its last value
    del store["s|old"]
    assert store.drain() == [("p|a|0", {"answers": 3}), ("s|new", [0, 2.0]), ("s|old", None)]
    assert store.drain() == []
    assert dict(store) == {"p|a|0": {"answers": 3}, "s|new": [0, 2.0]}
    assert "s|new" in store and "s|old" not in store


def test_a_key_written_then_deleted_before_a_drain_is_a_tombstone() -> None:
    store = TrackedStore()
    store["k|x"] = {"closed_through": None}
    del store["k|x"]
    assert store.drain() == [("k|x", None)]


def test_changelog_records_round_trip() -> None:
    key, value = encode_entry('k|["t","bot","m"]', {"closed_through": 60000, "watermark": None})
    assert key == b'k|["t","bot","m"]'
    assert value is not None
    assert decode_entry(value) == {"closed_through": 60000, "watermark": None}
    assert encode_entry("s|e1", None) == (b"s|e1", None)
    pane = Pane(60_000)
    assert decode_entry(encode_entry("p|x|60000", pane)[1] or b"") == pane.to_json()
    with pytest.raises(TypeError):
        encode_entry("x|y", object())
