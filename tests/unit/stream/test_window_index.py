"""The window schedule and table layout: ticks look only at due keys, seen marks dedupe
and expire, the watermark and the schedule survive a restart (rebuilt from the table)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from streamproc.config import WindowSettings
from streamproc.stream.window_index import IndexTiming, PartitionIndex
from streamproc.stream.window_table import (
    count_outcome,
    forget_expired_seen,
    index_timing,
    mark_closed,
    persist_watermark,
    rebuild_index,
    seen_key,
    watermark_key,
    windows_to_close,
)
from streamproc.stream.windows import (
    AnswerOutcome,
    WindowState,
    add_outcome,
    close_window,
    window_key,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
START = T0.timestamp()
SETTINGS = WindowSettings(size_s=60, grace_s=5, idle_close_s=3, retain_closed_s=100)
TIMING = index_timing(SETTINGS)
PARTITION = 1


def outcome(event_id: str, *, assistant: str = "bot", at: float = 0.0) -> AnswerOutcome:
    return AnswerOutcome(
        event_id=event_id,
        assistant_id=assistant,
        tenant="t",
        model="m",
        occurred_at=T0 + timedelta(seconds=at),
        hallucinated=False,
        abstained=False,
        contradicted_claims=0,
        unsupported_claims=0,
        faithfulness=1.0,
    )


class CountingStore(dict[str, Any]):
    """A dict that counts lookups, to show a tick touches only what is due."""

    lookups = 0

    def get(self, key: str, default: Any = None) -> Any:
        self.lookups += 1
        return super().get(key, default)

    def items(self) -> Any:
        self.lookups += len(self)
        return super().items()

    def __iter__(self) -> Iterator[str]:
        self.lookups += len(self)
        return super().__iter__()


def count(store: dict[str, Any], index: PartitionIndex, item: AnswerOutcome, now: float) -> None:
    count_outcome(store, index, item, partition=PARTITION, size_s=SETTINGS.size_s, now=now)


def tick(store: dict[str, Any], index: PartitionIndex, now: float) -> list[WindowState]:
    """What the agent does on a tick, without the broker."""
    closed_now = []
    for key, state in windows_to_close(store, index, now):
        closed, _ = close_window(state, now=now)
        mark_closed(store, index, key, closed)
        closed_now.append(closed)
    forget_expired_seen(store, index, now)
    persist_watermark(store, index, PARTITION)
    return closed_now


def state_of(store: dict[str, Any], assistant: str = "bot", start: float = START) -> WindowState:
    return WindowState.model_validate(store[window_key(assistant, start)])


def test_index_pops_by_time_each_key_once_and_skips_superseded_entries() -> None:
    index = PartitionIndex(IndexTiming(grace_s=5, idle_s=3, retain_s=100, seen_retain_s=10))
    states = {
        name: WindowState(assistant_id=name, start=start, end=start + 60, partition=1)
        for name, start in (("a", 0.0), ("b", 60.0), ("c", 120.0))
    }
    for name, state in states.items():
        index.track_window(name, state)  # event time end + 5; wall clock max(end + 5, 0 + 3)
    index.observe_event_time(130.0)
    assert index.window_candidates(now=0.0) == ["a", "b"]  # watermark 130 >= 65, 125
    assert index.window_candidates(now=0.0) == []
    # "c" is re-armed later by the wall clock (closed at 200: expires at 300) ...
    closed, _ = close_window(states["c"], now=200.0)
    index.track_window("c", closed)
    # ... so its older wall-clock time (185) is superseded and yields nothing.
    assert index.window_candidates(now=299.0) == ["a", "b"]  # their wall-clock turn
    assert index.window_candidates(now=300.0) == ["c"]
    index.track_seen("s1", 1.0)
    index.track_seen("s2", 2.0)
    assert index.expired_seen(now=11.5) == [("s1", 1.0)]
    assert index.expired_seen(now=100.0) == [("s2", 2.0)]


def test_redelivered_events_count_once_even_when_not_consecutive() -> None:
    store: dict[str, Any] = {}
    index = PartitionIndex(TIMING)
    for event_id in ("a", "b", "a", "c", "b", "a"):
        count(store, index, outcome(event_id), now=START)
    assert state_of(store).answers == 3
    assert {key for key in store if key.startswith("s|")} == {seen_key(e) for e in "abc"}


def test_window_value_holds_counters_only_however_many_answers() -> None:
    store: dict[str, Any] = {}
    index = PartitionIndex(TIMING)
    for number in range(2_000):
        count(store, index, outcome(f"e{number}", at=number % 60), now=START)
        if number == 9:
            small = len(str(store[window_key("bot", START)]))
    assert state_of(store).answers == 2_000
    assert len(str(store[window_key("bot", START)])) - small < 40


def test_a_crash_between_the_window_record_and_its_seen_mark_still_counts_once() -> None:
    store: dict[str, Any] = {}
    index = PartitionIndex(TIMING)
    count(store, index, outcome("a"), now=START)
    count(store, index, outcome("b"), now=START)
    del store[seen_key("b")]  # the changelog kept the window record but not the mark after it
    recovered = rebuild_index(list(store.items()), PARTITION, TIMING)
    count(store, recovered, outcome("b"), now=START + 1)
    assert state_of(store).answers == 2
    assert seen_key("b") in store  # the missing mark is written now


def test_a_tick_touches_only_due_windows_and_idle_close_waits_for_quiet() -> None:
    store = CountingStore()
    index = PartitionIndex(TIMING)
    now = START + 1000  # replayed traffic: windows close by the idle rule
    for number in range(1_000):
        count(store, index, outcome(f"e{number}", assistant=f"bot{number}"), now=now)
    store.lookups = 0
    assert tick(store, index, now + 2.9) == []
    assert store.lookups == 0  # nothing due: not one window read
    count(store, index, outcome("late-traffic", assistant="bot7"), now=now + 2)
    store.lookups = 0
    closed = tick(store, index, now + 3)
    assert len(closed) == 999 and "bot7" not in {c.assistant_id for c in closed}
    assert store.lookups == 1_000  # each candidate read once; no seen mark is due yet
    store.lookups = 0
    (bot7,) = tick(store, index, now + 5)  # re-armed at its new last_update + idle
    assert bot7.assistant_id == "bot7" and bot7.answers == 2
    assert store.lookups == 1


def test_watermark_closes_windows_and_survives_a_restart() -> None:
    store: dict[str, Any] = {}
    index = PartitionIndex(TIMING)
    count(store, index, outcome("a", at=10), now=START)
    count(store, index, outcome("b", at=64), now=START)  # next window; watermark 64 < 65
    assert tick(store, index, START + 1) == []
    assert store[watermark_key(PARTITION)] == START + 64

    restarted = rebuild_index(list(store.items()), PARTITION, TIMING)
    assert restarted.watermark == START + 64
    count(store, restarted, outcome("c", at=66), now=START + 2)
    (closed,) = tick(store, restarted, START + 2)  # by event time, long before idle
    assert (closed.start, closed.answers) == (START, 1)
    assert store[watermark_key(PARTITION)] == START + 66


def test_revised_window_is_due_at_once_and_expired_state_is_deleted() -> None:
    store: dict[str, Any] = {}
    index = PartitionIndex(TIMING)
    count(store, index, outcome("a"), now=START)
    (first,) = tick(store, index, START + 65)
    count(store, index, outcome("late"), now=START + 70)
    (second,) = tick(store, index, START + 70)
    assert (first.revision, second.revision, second.late_events) == (0, 1, 1)
    assert tick(store, index, START + 169) == []
    assert window_key("bot", START) in store
    tick(store, index, START + 170)  # closed at 70, retained 100
    assert window_key("bot", START) not in store
    # The seen marks outlive the window's ordinary life (size+grace+idle+retain = 168 s).
    assert seen_key("late") in store
    tick(store, index, START + 70 + TIMING.seen_retain_s)
    assert not any(key.startswith("s|") for key in store)
    assert set(store) == {watermark_key(PARTITION)}


def test_a_mark_written_again_after_expiry_is_not_deleted_by_the_old_one() -> None:
    store: dict[str, Any] = {}
    index = PartitionIndex(TIMING)
    count(store, index, outcome("a"), now=START)
    del store[seen_key("a")]
    count(store, index, outcome("a", at=61), now=START + 1)  # "a" again, another window
    assert forget_expired_seen(store, index, START + TIMING.seen_retain_s) == 0
    assert seen_key("a") in store
    assert forget_expired_seen(store, index, START + 1 + TIMING.seen_retain_s) == 1


def test_rebuilt_index_keeps_to_its_partition_and_matches_the_live_one() -> None:
    store: dict[str, Any] = {}
    live = PartitionIndex(TIMING)
    other = PartitionIndex(TIMING)
    for number in range(50):
        count(store, live, outcome(f"e{number}", assistant=f"bot{number % 5}"), now=START)
        count_outcome(
            store,
            other,
            outcome(f"x{number}", assistant="other"),
            partition=2,
            size_s=60,
            now=START,
        )
    rebuilt = rebuild_index(list(store.items()), PARTITION, TIMING)
    assert rebuilt.sizes() == live.sizes() == (5, 5, 50)
    due_live = [key for key, _ in windows_to_close(dict(store), live, START + 65)]
    due_rebuilt = [key for key, _ in windows_to_close(dict(store), rebuilt, START + 65)]
    assert sorted(due_live) == sorted(due_rebuilt) and len(due_live) == 5


def test_add_outcome_keeps_its_input_unchanged() -> None:
    state = add_outcome(None, outcome("a"), partition=1, size_s=60, now=0)
    again = add_outcome(state, outcome("b"), partition=1, size_s=60, now=0)
    assert (state.answers, state.last_event_id) == (1, "a")
    assert (again.answers, again.last_event_id) == (2, "b")
