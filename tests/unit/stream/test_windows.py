"""Window arithmetic: assignment, counting, dedupe, closing, late revisions, expiry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from streamproc.stats import wilson_interval
from streamproc.stream.windows import (
    AnswerOutcome,
    WindowState,
    add_outcome,
    close_window,
    is_due,
    is_expired,
    next_check_at,
    window_key,
    window_start,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def outcome(
    event_id: str,
    *,
    at: datetime = T0,
    hallucinated: bool = False,
    abstained: bool = False,
    faithfulness: float | None = 1.0,
) -> AnswerOutcome:
    return AnswerOutcome(
        event_id=event_id,
        assistant_id="bot",
        tenant="t",
        model="m",
        occurred_at=at,
        hallucinated=hallucinated,
        abstained=abstained,
        contradicted_claims=int(hallucinated),
        unsupported_claims=0,
        faithfulness=faithfulness,
    )


def fill(*outcomes: AnswerOutcome, now: float = 0.0) -> WindowState:
    state: WindowState | None = None
    for item in outcomes:
        state = add_outcome(state, item, partition=1, size_s=60, now=now)
    assert state is not None
    return state


def test_window_start_is_aligned_to_the_size() -> None:
    assert window_start(T0.timestamp() + 59.9, 60) == T0.timestamp()
    assert window_start(T0.timestamp() + 60, 60) == T0.timestamp() + 60
    assert window_key("bot", T0.timestamp()) == f"w|bot|{int(T0.timestamp() * 1000)}"


def test_counts_and_rate() -> None:
    state = fill(
        outcome("a", hallucinated=True, faithfulness=0.5),
        outcome("b"),
        outcome("c", abstained=True, faithfulness=None),
    )
    closed, aggregate = close_window(state, now=T0.timestamp() + 100)
    assert (aggregate.answers, aggregate.answered, aggregate.abstentions) == (3, 2, 1)
    assert aggregate.hallucinated == 1
    assert aggregate.rate == 0.5
    assert (aggregate.rate_low, aggregate.rate_high) == wilson_interval(1, 2)
    assert aggregate.mean_faithfulness == pytest.approx(0.75)
    assert aggregate.contradicted_claims == 1
    assert aggregate.window_end - aggregate.window_start == timedelta(seconds=60)
    assert aggregate.revision == 0 and not closed.dirty


def test_redelivered_event_counts_once() -> None:
    state = fill(outcome("a", hallucinated=True), outcome("a", hallucinated=True))
    assert state.answers == 1 and state.hallucinated == 1


def test_redelivery_of_the_last_counted_event_is_recognised_by_the_window_alone() -> None:
    # Older ids are checked against the seen marks (window_table); the window keeps one id.
    state = fill(outcome("a"), outcome("b"), outcome("b"))
    assert state.answers == 2 and state.last_event_id == "b"


def test_window_state_size_does_not_grow_with_its_answers() -> None:
    def serialized(answers: int) -> int:
        state = fill(
            *(outcome(f"{index:036d}", hallucinated=index % 3 == 0) for index in range(answers))
        )
        return len(state.model_dump_json())

    small, large = serialized(10), serialized(10_000)
    # Only the counters' digits grow (10 -> 10000 in a few fields), never a list of ids.
    assert large - small < 40, (small, large)


def test_next_check_at_follows_the_closing_rules() -> None:
    timing = {"grace_s": 5.0, "idle_s": 3.0, "retain_s": 100.0}
    end = T0.timestamp() + 60
    replayed = fill(outcome("a"), now=end + 1000)  # wall clock far past the end: idle rule
    assert next_check_at(replayed, **timing) == end + 1003
    live = fill(outcome("b"), now=T0.timestamp())  # before the end: end + grace
    assert next_check_at(live, **timing) == end + 5
    closed, _ = close_window(live, now=end + 6)
    assert next_check_at(closed, **timing) == end + 106
    revised = add_outcome(closed, outcome("c"), partition=1, size_s=60, now=end + 7)
    assert next_check_at(revised, **timing) == float("-inf")


def test_no_answers_means_no_rate() -> None:
    _, aggregate = close_window(fill(outcome("a", abstained=True)), now=0)
    assert aggregate.rate is None and aggregate.rate_low is None


def test_due_when_watermark_passes_end_plus_grace() -> None:
    state = fill(outcome("a"), now=T0.timestamp())
    end = T0.timestamp() + 60
    kwargs = {"now": T0.timestamp() + 1, "grace_s": 5, "idle_s": 1000}
    assert not is_due(state, watermark=end + 4.9, **kwargs)
    assert is_due(state, watermark=end + 5, **kwargs)


def test_quiet_window_closes_on_wall_clock_after_idle() -> None:
    state = fill(outcome("a"), now=T0.timestamp() + 61)
    end = T0.timestamp() + 60
    assert not is_due(state, watermark=None, now=end + 3, grace_s=1, idle_s=5)
    assert is_due(state, watermark=None, now=end + 6.5, grace_s=1, idle_s=5)
    # not before the window's end + grace, however idle
    early = fill(outcome("b"), now=T0.timestamp())
    assert not is_due(early, watermark=None, now=T0.timestamp() + 30, grace_s=1, idle_s=5)


def test_late_event_revises_a_closed_window() -> None:
    state = fill(outcome("a"))
    closed, first = close_window(state, now=T0.timestamp() + 70)
    assert not is_due(closed, watermark=None, now=T0.timestamp() + 71, grace_s=1, idle_s=1)
    late = add_outcome(
        closed, outcome("b", hallucinated=True), partition=1, size_s=60, now=T0.timestamp() + 80
    )
    assert is_due(late, watermark=None, now=T0.timestamp() + 80, grace_s=1, idle_s=1000)
    _, second = close_window(late, now=T0.timestamp() + 81)
    assert (first.revision, second.revision) == (0, 1)
    assert second.answers == 2 and second.late_events == 1 and second.hallucinated == 1


def test_closed_windows_expire_after_retention() -> None:
    closed, _ = close_window(fill(outcome("a")), now=1000.0)
    assert not is_expired(closed, now=1000.0 + 59, retain_s=60)
    assert is_expired(closed, now=1000.0 + 60, retain_s=60)
    assert not is_expired(fill(outcome("b")), now=10**9, retain_s=60)
