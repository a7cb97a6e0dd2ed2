"""The window table and its schedule: ticks look only at due series, each series keeps
its own clocks (a tenant cannot close, revise or seal another's windows), late answers
revise or go to the late topic, quiet keys' last windows close on time, state stays
bounded, and everything is rebuilt from the table after a restart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from streamproc.contracts.events import AnswerOutcome
from streamproc.kafka.store import decode_entry, encode_entry
from streamproc.monitor.options import WindowSettings
from streamproc.monitor.windows.index import PartitionIndex
from streamproc.monitor.windows.spec import SeriesKey
from streamproc.monitor.windows.table import (
    PANE_PREFIX,
    SEEN_PREFIX,
    SERIES_PREFIX,
    Closed,
    Counted,
    close_due,
    count_outcome,
    decode_entries,
    drop_legacy_entries,
    forget_expired_seen,
    pane_key,
    rebuild_index,
    seen_key,
    window_timing,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
START = T0.timestamp()
PARTITION = 1
SETTINGS = WindowSettings(grace_s=5, idle_close_s=3, retain_closed_s=600)
TUMBLING_ONLY = SETTINGS.model_copy(update={"hopping": []})
DAY = 24 * 3600.0


def outcome(
    event_id: str,
    *,
    tenant: str = "t",
    assistant: str = "bot",
    model: str = "m",
    at: float = 0.0,
    hallucinated: bool = False,
) -> AnswerOutcome:
    return AnswerOutcome(
        event_id=event_id,
        answer_id=f"answer-{event_id}",
        assistant_id=assistant,
        tenant=tenant,
        model=model,
        occurred_at=T0 + timedelta(seconds=at),
        hallucinated=hallucinated,
        abstained=False,
        contradicted_claims=int(hallucinated),
        unsupported_claims=0,
        faithfulness=1.0,
        judge_ms=5.0,
    )


class CountingStore(dict[str, Any]):
    """A dict that counts reads, to show a tick touches only what is due."""

    reads = 0

    def __getitem__(self, key: str) -> Any:
        self.reads += 1
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.reads += 1
        return super().get(key, default)

    def __iter__(self) -> Any:
        self.reads += len(self)
        return super().__iter__()


class Table:
    """One partition's table and index, driven like the window loop drives them."""

    def __init__(self, settings: WindowSettings = SETTINGS, store: dict[str, Any] | None = None):
        self.timing = window_timing(settings, max_event_age_s=DAY)
        self.store: dict[str, Any] = {} if store is None else store
        self.index = PartitionIndex(self.timing)

    def count(self, item: AnswerOutcome, now: float) -> Counted:
        return count_outcome(self.store, self.index, item, partition=PARTITION, now=now)

    def tick(self, now: float) -> Closed:
        closed = close_due(self.store, self.index, now)
        forget_expired_seen(self.store, self.index, now)
        return closed

    def keys(self, prefix: str) -> list[str]:
        return [key for key in self.store if key.startswith(prefix)]


def changelog_copy(store: dict[str, Any]) -> dict[str, Any]:
    """The table as a compacted changelog would give it back."""
    records = [encode_entry(key, value) for key, value in store.items()]
    return decode_entries(
        {key.decode(): decode_entry(value) for key, value in records if value is not None}
    )


def windows(closed: Closed, label: str | None = None) -> list[tuple[str, str, float, int, int]]:
    """(tenant, window, start offset s, answers, revision) of each aggregate."""
    return [
        (a.tenant, a.window, a.window_start.timestamp() - START, a.answers, a.revision)
        for _, a in closed.aggregates
        if label is None or a.window == label
    ]


def test_a_tick_touches_only_due_series_and_idle_close_waits_for_quiet() -> None:
    table = Table(TUMBLING_ONLY, CountingStore())
    store = table.store
    assert isinstance(store, CountingStore)
    now = START + 1000  # replayed traffic: windows close by the idle rule
    for number in range(1_000):
        table.count(outcome(f"e{number}", assistant=f"bot{number}"), now)
    store.reads = 0
    assert table.tick(now + 2.9).aggregates == []
    assert store.reads == 0  # nothing due: not one entry read
    table.count(outcome("more-traffic", assistant="bot7"), now + 2)
    store.reads = 0
    closed = table.tick(now + 3)
    assert len(closed.aggregates) == 999
    assert "bot7" not in {a.assistant_id for _, a in closed.aggregates}
    assert store.reads == 2 * 999  # each due pane read to report it and to sum its window
    store.reads = 0
    (bot7,) = [a for _, a in table.tick(now + 5).aggregates]  # its own last event + idle
    assert bot7.assistant_id == "bot7" and bot7.answers == 2
    assert store.reads == 2


def test_a_tick_can_be_bounded_and_the_rest_waits_for_the_next() -> None:
    table = Table(TUMBLING_ONLY)
    now = START + 1000
    for number in range(1_000):
        table.count(outcome(f"e{number}", assistant=f"bot{number}"), now)
    closed: list[str] = []
    while table.index.more_due(now + 4):
        batch = close_due(table.store, table.index, now + 4, limit=300)
        assert len(batch.aggregates) <= 300
        closed += [a.assistant_id for _, a in batch.aggregates]
    assert sorted(closed) == sorted(f"bot{number}" for number in range(1_000))
    assert close_due(table.store, table.index, now + 4).aggregates == []


def test_two_tenants_with_one_assistant_id_keep_apart_windows_clocks_and_lateness() -> None:
    table = Table(TUMBLING_ONLY)
    now = START + 20  # live traffic
    assert table.count(outcome("a1", tenant="A", at=10), now) is Counted.COUNTED
    assert table.count(outcome("b1", tenant="B", at=10, hallucinated=True), now) is Counted.COUNTED
    # Tenant A's clock jumps an hour ahead (a replay, a skewed producer clock): A's
    # minute closes and is sealed by A's event time ...
    table.count(outcome("a2", tenant="A", at=3700), now + 1)
    assert windows(table.tick(now + 1)) == [("A", "1m", 0, 1, 0)]
    # ... but B's minute is still open: B's late-looking answer is on time for B.
    assert table.count(outcome("b2", tenant="B", at=50), now + 2) is Counted.COUNTED
    assert table.count(outcome("a3", tenant="A", at=50), now + 2) is Counted.TOO_LATE
    closed = table.tick(START + 60 + 5 + 3.5)  # B: end + grace passed, quiet for idle
    assert windows(closed) == [("B", "1m", 0, 2, 0)]
    (b,) = [a for _, a in closed.aggregates]
    assert (b.hallucinated, b.answered, b.example_answer_ids) == (1, 2, ["answer-b1"])


def test_a_late_answer_revises_its_window_and_every_hopping_window_holding_it() -> None:
    table = Table()
    table.count(outcome("a", at=10), START + 10)
    table.count(outcome("b", at=130), START + 130)  # watermark 130 >= 60 + 5: minute 0 closes
    first = table.tick(START + 130)
    # Minute 1 had no answer: no window of its own; the 5-minute ones hold minute 0.
    assert windows(first) == [
        ("t", "1m", 0, 1, 0),
        ("t", "5m", -240, 1, 0),
        ("t", "5m", -180, 1, 0),
    ]
    assert table.count(outcome("late", at=20, hallucinated=True), START + 131) is Counted.COUNTED
    revised = table.tick(START + 131)
    assert windows(revised) == [
        ("t", "1m", 0, 2, 1),
        ("t", "5m", -240, 2, 1),
        ("t", "5m", -180, 2, 1),
    ]
    (delta,) = revised.deltas
    assert (delta.answered, delta.hallucinated, delta.revision) == (1, 1, 1)
    (_, minute), *_ = revised.aggregates
    assert minute.late_events == 1 and minute.example_answer_ids == ["answer-late"]


def test_an_answer_past_the_lateness_goes_to_the_late_topic_once() -> None:
    table = Table(TUMBLING_ONLY)
    table.count(outcome("a", at=10), START + 10)
    table.count(outcome("b", at=700), START + 700)  # 700 - 5 - 600 = 95 > 60: minute 0 sealed
    table.tick(START + 700)
    assert table.count(outcome("old", at=30), START + 701) is Counted.TOO_LATE
    assert table.count(outcome("old", at=30), START + 702) is Counted.REPEATED  # not twice
    assert table.tick(START + 702).aggregates == []
    assert table.count(outcome("recent", at=640), START + 703) is Counted.COUNTED  # still open


def test_too_late_does_not_depend_on_when_the_last_tick_was() -> None:
    for tick_between in (False, True):
        table = Table(TUMBLING_ONLY)
        table.count(outcome("a", at=10), START + 10)
        table.count(outcome("b", at=700), START + 11)  # 700 - 5 - 600 = 95 >= 60
        if tick_between:
            table.tick(START + 11)
        assert table.count(outcome("old", at=30), START + 12) is Counted.TOO_LATE
        assert table.count(outcome("fine", at=100), START + 13) is Counted.COUNTED
    quiet = Table(TUMBLING_ONLY)
    quiet.count(outcome("a", at=10), START + 10)
    quiet.tick(START + 100)  # closed and published by the idle rule
    assert quiet.count(outcome("late", at=20), START + 10 + 599) is Counted.COUNTED
    # Quiet for the whole lateness: sealed, whether or not a tick has seen it yet.
    assert quiet.count(outcome("too-late", at=20), START + 20 + 599 + 600) is Counted.TOO_LATE


def test_a_quiet_key_closes_its_last_windows_on_time_then_leaves_no_state() -> None:
    table = Table()
    table.count(outcome("only", at=30), START + 30)
    emitted: dict[tuple[str, float], list[float]] = {}
    now = START + 30
    while now < START + 3 * 3600:
        now += 10
        for _, aggregate in table.tick(now).aggregates:
            key = (aggregate.window, aggregate.window_end.timestamp())
            emitted.setdefault(key, []).append(now)
    expected = {("1m", START + 60)}
    expected |= {("5m", START + 60 * m) for m in range(1, 6)}
    expected |= {("1h", START + 300 * k) for k in range(1, 13)}
    assert set(emitted) == expected
    for (label, end), times in emitted.items():
        assert len(times) == 1, (label, end, times)  # each window once
        assert 5 <= times[0] - end <= 5 + 10, (label, end, times)  # at end + grace (+ tick)
    # Sealed after a quiet lateness, panes deleted; the series record goes after a day.
    assert table.keys(PANE_PREFIX) == [] and table.keys(SEEN_PREFIX) == []
    assert len(table.keys(SERIES_PREFIX)) == 1
    table.tick(START + 30 + DAY + 600)
    assert table.store == {} and table.index.sizes() == (0, 0, 0)


def test_state_stays_bounded_under_steady_traffic() -> None:
    table = Table()
    most_panes = most_seen = 0
    for step in range(4 * 3600 // 20):  # one answer every 20 s for four hours, live
        at = step * 20.0
        table.count(outcome(f"e{step}", at=at), START + at + 0.5)
        if step % 3 == 0:
            table.tick(START + at + 1)
        most_panes = max(most_panes, len(table.keys(PANE_PREFIX)))
        most_seen = max(most_seen, len(table.keys(SEEN_PREFIX)))
    # Panes live for the lateness (600 s) plus the longest window (1 h) plus a minute or
    # two open; seen marks for a pane's life (60 + 5 + 3 + 600 s) plus a tick (60 s).
    assert most_panes <= (600 + 3600) // 60 + 3, most_panes
    assert most_seen <= (60 + 5 + 3 + 600 + 60) // 20 + 1, most_seen
    assert table.index.sizes()[0] == 1


def test_redelivered_events_count_once_even_when_not_consecutive() -> None:
    table = Table()
    results = [table.count(outcome(e), START) for e in ("a", "b", "a", "c", "b", "a")]
    assert results.count(Counted.COUNTED) == 3
    (pane,) = [table.store[key] for key in table.keys(PANE_PREFIX)]
    assert pane.answers == 3
    assert set(table.keys(SEEN_PREFIX)) == {seen_key("t", e) for e in "abc"}


def test_another_tenants_event_of_the_same_id_is_counted_with_its_own_example() -> None:
    """Event ids are each tenant's own: B's event sharing A's id is not a redelivery."""
    table = Table(TUMBLING_ONLY)
    assert table.count(outcome("e1", tenant="A", hallucinated=True), START) is Counted.COUNTED
    assert table.count(outcome("e1", tenant="B", hallucinated=True), START) is Counted.COUNTED
    assert table.count(outcome("e1", tenant="B", hallucinated=True), START) is Counted.REPEATED
    assert set(table.keys(SEEN_PREFIX)) == {seen_key("A", "e1"), seen_key("B", "e1")}
    closed = table.tick(START + 3600)
    examples = {a.tenant: (a.answers, a.example_answer_ids) for _, a in closed.aggregates}
    assert examples == {"A": (1, ["answer-e1"]), "B": (1, ["answer-e1"])}


def test_a_crash_between_the_pane_record_and_its_seen_mark_still_counts_once() -> None:
    table = Table()
    table.count(outcome("a"), START)
    table.count(outcome("b"), START)
    del table.store[seen_key("t", "b")]  # the changelog kept the pane but not the mark after it
    table.store = changelog_copy(table.store)
    table.index = rebuild_index(list(table.store.items()), PARTITION, table.timing)
    assert table.count(outcome("b"), START + 1) is Counted.REPEATED
    (pane,) = [table.store[key] for key in table.keys(PANE_PREFIX)]
    assert pane.answers == 2
    assert seen_key("t", "b") in table.store  # the missing mark is written now


def test_a_rebuilt_index_decides_what_the_live_one_decides() -> None:
    live = Table()
    for number in range(300):
        at = number * 7.0
        tenant = "A" if number % 2 else "B"
        live.count(
            outcome(f"e{number}", tenant=tenant, assistant=f"bot{number % 3}", at=at), START + at
        )
        if number % 20 == 0:
            live.tick(START + at)
    live.count(outcome("late", tenant="A", assistant="bot1", at=100), START + 2101)
    rebuilt = Table(store=changelog_copy(live.store))  # as a restoring worker reads it
    rebuilt.index = rebuild_index(list(rebuilt.store.items()), PARTITION, rebuilt.timing)
    assert rebuilt.index.sizes()[0] == live.index.sizes()[0] == 6
    for name in live.index.series:
        mine, theirs = live.index.series[name], rebuilt.index.series[name]
        assert (mine.watermark, mine.closed_through, mine.sealed_through, mine.panes) == (
            theirs.watermark,
            theirs.closed_through,
            theirs.sealed_through,
            theirs.panes,
        )
    for now in (START + 2102, START + 2200, START + 6000):
        ours, its = live.tick(now), rebuilt.tick(now)  # the same, maybe in another order
        assert sorted(a.model_dump_json() for _, a in ours.aggregates) == sorted(
            a.model_dump_json() for _, a in its.aggregates
        )
        assert sorted(map(repr, ours.deltas)) == sorted(map(repr, its.deltas))
    assert live.store == rebuilt.store


def test_revisions_only_grow_and_deltas_add_up_to_the_counts() -> None:
    table = Table(SETTINGS.model_copy(update={"retain_closed_s": 3600}))
    latest: dict[tuple[str, float], int] = {}
    answered: dict[float, int] = {}
    for number in range(400):
        at = number * 9.0 if number % 5 else number * 9.0 - 400  # every fifth one late
        table.count(
            outcome(f"e{number}", at=at, hallucinated=number % 4 == 0), START + number * 9.0
        )
        closed = table.tick(START + number * 9.0)
        for _, aggregate in closed.aggregates:
            window = (aggregate.window, aggregate.window_start.timestamp())
            assert aggregate.revision > latest.get(window, -1), window
            latest[window] = aggregate.revision
        for delta in closed.deltas:
            answered[delta.start] = answered.get(delta.start, 0) + delta.answered
    for delta in table.tick(START + 400 * 9.0 + 100).deltas:  # all closed, none sealed yet
        answered[delta.start] = answered.get(delta.start, 0) + delta.answered
    panes = {key: value for key, value in table.store.items() if key.startswith(PANE_PREFIX)}
    assert len(panes) > 60
    sid = SeriesKey("t", "bot", "m").text()
    for key, pane in panes.items():
        assert answered[pane.start / 1000] == pane.answered, key
        assert key == pane_key(sid, pane.start)
    assert max(latest.values()) > 0  # late answers did revise windows


def test_entries_of_the_layout_before_series_are_dropped() -> None:
    store: dict[str, Any] = {
        "w|bot|1000": {"answers": 4, "closed_at": None},
        "w|bot|0": {"answers": 9, "closed_at": 5.0},
        "m|1": 12.0,
        "s|e1": [1, 3.0],
        "x|alert": {"firing": True},
    }
    assert drop_legacy_entries(store) == (3, 4)
    assert store == {"s|e1": [1, 3.0], "x|alert": {"firing": True}}
