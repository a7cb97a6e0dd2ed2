"""The loops' changelogged partition state: drained into records, restored on assignment."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiokafka.structs import TopicPartition

from streamproc.config import Settings
from streamproc.kafka import changelog
from streamproc.kafka.changelog import changelog_records, restore_state, restore_states
from streamproc.kafka.store import TrackedStore
from streamproc.verdicts.output_topic import OutputTopic
from streamproc.wiring import kafka_loop_options

TOPIC: OutputTopic[Any] = OutputTopic("app.state-changelog", 10_000)


def test_each_partitions_changes_go_to_its_own_changelog_partition() -> None:
    first, third = TrackedStore({"kept": 1}), TrackedStore()
    first["a"] = {"n": 1}
    del first["kept"]
    third["b"] = 2
    records = changelog_records(TOPIC, [(0, first), (2, third)])
    assert [(r.topic, r.partition, r.key, r.value) for r in records] == [
        ("app.state-changelog", 0, b"a", json.dumps({"n": 1}, separators=(",", ":")).encode()),
        ("app.state-changelog", 0, b"kept", None),  # a deleted key: a tombstone
        ("app.state-changelog", 2, b"b", b"2"),
    ]
    assert changelog_records(TOPIC, [(0, first), (2, third)]) == []  # drained


def test_a_partition_is_restored_from_the_same_partition_of_its_changelog(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[Any, ...]] = []

    async def fake_restore(
        bootstrap: str,
        tp: TopicPartition,
        options: dict[str, Any] | None = None,
        *,
        settle_timeout_s: float = 60.0,
    ) -> dict[str, Any]:
        calls.append((bootstrap, tp, options, settle_timeout_s))
        return {"k": 1}

    monkeypatch.setattr(changelog, "restore_partition", fake_restore)
    settings = Settings(broker_url="kafka://broker:9092", worker={"transaction_timeout_s": 45.0})
    options = {"security_protocol": "SSL"}
    state = asyncio.run(
        restore_state(kafka_loop_options(settings), "app.labels-changelog", 3, options)
    )
    assert state == {"k": 1}
    [(bootstrap, tp, passed, settle)] = calls
    assert (bootstrap, tp) == ("broker:9092", TopicPartition("app.labels-changelog", 3))
    assert passed == options and passed is not options  # a copy: the loop's stays as it was
    assert settle == 75.0  # a previous owner's transaction may stay open that long


def test_several_partitions_are_restored_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each read waits for a fetch: six partitions taken over must not wait six times."""
    running = 0
    most = 0

    async def fake_restore(
        bootstrap: str,
        tp: TopicPartition,
        options: dict[str, Any] | None = None,
        *,
        settle_timeout_s: float = 60.0,
    ) -> dict[str, Any]:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.05)
        running -= 1
        return {"partition": tp.partition}

    monkeypatch.setattr(changelog, "restore_partition", fake_restore)
    states = asyncio.run(
        restore_states(kafka_loop_options(Settings()), "app.state-changelog", [4, 0, 2, 4], {})
    )
    assert states == {p: {"partition": p} for p in (0, 2, 4)}
    assert most == 3
