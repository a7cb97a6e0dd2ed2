"""Alert lifecycle on replayed minute-by-minute streams: one firing and one resolved event
per incident, tenants kept apart, state that survives a restart."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from streamproc.monitor.alerts.alert_monitor import AlertMonitor
from streamproc.monitor.alerts.alert_state import AlertEvent, AlertState, StatePolicy, alert_id
from streamproc.monitor.options import AlertSettings, BurnRateWindow

T0 = 1_800_000_000
MINUTE = 60
HOUR = 3600
DAY = 24 * HOUR

# Fast pages for a replay: 12.5 % over 10 min and over 5 min (burn > 2.5x a 5 % objective).
# A step from 2 % to 30 % crosses it after 10 min x (12.5 - 2) / (30 - 2) = 3.75 min: inside
# the 5-minute short window. The default slow-burn ticket (3 d / 6 h, 1x) stays on.
FAST = AlertSettings(page=[BurnRateWindow(long_s=600, short_s=300, factor=2.5)])
PAGE_ONLY = FAST.model_copy(update={"ticket": []})
"""For streams too young for the 3-day ticket window to mean anything."""

Rate = Callable[[int], int]  # minute index -> hallucinated answers of 100


def replay(
    monitor: AlertMonitor,
    minutes: range,
    hallucinated: Rate,
    *,
    tenant: str = "acme",
    assistant: str = "helpdesk",
    answered: int = 100,
) -> list[tuple[int, AlertEvent]]:
    """Feed one closed minute at a time and evaluate at its end, like the window loop."""
    out: list[tuple[int, AlertEvent]] = []
    for minute in minutes:
        bad = hallucinated(minute)
        examples = [f"{tenant}-{minute}-{i}" for i in range(min(bad, 2))]
        monitor.record(
            tenant,
            assistant,
            at_s=T0 + minute * MINUTE,
            answered=answered,
            hallucinated=bad,
            example_answer_ids=examples,
        )
        out.extend((minute, event) for event in monitor.evaluate(T0 + (minute + 1) * MINUTE))
    return out


def spike(start: int, end: int, *, base: int = 2, high: int = 30) -> Rate:
    return lambda minute: high if start <= minute < end else base


def test_a_spike_pages_within_the_short_window_and_resolves_once_after_it_ends() -> None:
    monitor = AlertMonitor(FAST)
    baseline = 3 * DAY // MINUTE  # a full ticket window of 2 % first
    spike_end = baseline + 30
    events = replay(monitor, range(baseline + 120), spike(baseline, spike_end))
    assert [(e.state, e.severity) for _, e in events] == [("firing", "page"), ("resolved", "page")]
    (fired_minute, fired), (resolved_minute, resolved) = events
    # pages within the short window (5 min) of the spike's first minute
    assert baseline <= fired_minute < baseline + 5
    assert fired.condition is not None and fired.condition.met
    assert fired.condition.long_window_s == 600 and fired.condition.short_window_s == 300
    assert fired.condition.long_wilson_low is not None and fired.condition.long_wilson_low > 0.05
    assert fired.example_answer_ids and fired.example_answer_ids[0].startswith("acme-")
    assert fired.started_at == datetime.fromtimestamp(T0 + (fired_minute + 1) * 60, UTC)
    # resolves after the spike ends: short window drained, then the 5-minute hold
    assert spike_end <= resolved_minute <= spike_end + 5 + 5
    assert resolved.alert_id == fired.alert_id
    assert resolved.resolved_at == resolved.event_time
    assert resolved.condition is not None and not resolved.condition.met
    assert monitor.firing() == []


def test_default_factors_need_72_percent_to_page_so_a_30_percent_spike_only_tickets() -> None:
    """The workbook's 14.4x / 6x are fractions of a 0.1 % budget; of a 5 % objective they
    mean 72 % over 1 h or 30 % held for 6 h. A 30 % spike is exactly 6x: never above it."""
    monitor = AlertMonitor(AlertSettings())
    baseline = 3 * DAY // MINUTE
    events = replay(monitor, range(baseline + 12 * 60), spike(baseline, baseline + 12 * 60))
    assert [(e.state, e.severity) for _, e in events] == [("firing", "ticket")]
    ticket_minute = events[0][0] - baseline
    # 3 d rate > 5 % needs (5 - 2) / (30 - 2) of 72 h = 7.7 h of spike
    assert 7 * 60 < ticket_minute < 8 * 60


def test_three_of_four_answers_in_a_quiet_hour_do_not_page() -> None:
    monitor = AlertMonitor(AlertSettings())
    for minute in range(60):
        if minute in (50, 51, 52, 53):
            monitor.record(
                "acme", "helpdesk", at_s=T0 + minute * 60, answered=1, hallucinated=minute < 53
            )
        assert monitor.evaluate(T0 + (minute + 1) * 60) == []
    # the same answers with the sample guard off would page (the guard decides)
    unguarded = AlertMonitor(AlertSettings(min_answered=1))
    for minute in (50, 51, 52, 53):
        unguarded.record(
            "acme", "helpdesk", at_s=T0 + minute * 60, answered=1, hallucinated=minute < 53
        )
    fired = unguarded.evaluate(T0 + 54 * 60)
    assert [(e.state, e.severity) for e in fired] == [("firing", "page")]


def test_two_tenants_with_the_same_assistant_id_are_independent() -> None:
    monitor = AlertMonitor(PAGE_ONLY)
    acme = spike(60, 90)
    events = []
    for minute in range(120):
        # acme spikes; globex, ten times busier, stays at 2 %: pooled per assistant the
        # spike would read (30 + 20) / 1100 = 4.5 % and never page
        at_s = T0 + minute * 60
        monitor.record("acme", "helpdesk", at_s=at_s, answered=100, hallucinated=acme(minute))
        monitor.record("globex", "helpdesk", at_s=at_s, answered=1000, hallucinated=20)
        events.extend(monitor.evaluate(T0 + (minute + 1) * 60))
    assert [(e.tenant, e.state) for e in events] == [("acme", "firing"), ("acme", "resolved")]
    assert {e.assistant_id for e in events} == {"helpdesk"}
    globex = monitor.state("globex", "helpdesk")
    assert globex is not None and globex.idle
    # and the other way round: globex spiking does not touch acme's open page
    both = AlertMonitor(PAGE_ONLY)
    for minute in range(10):
        both.record("acme", "helpdesk", at_s=T0 + minute * 60, answered=100, hallucinated=40)
        both.record("globex", "helpdesk", at_s=T0 + minute * 60, answered=100, hallucinated=40)
        both.evaluate(T0 + (minute + 1) * 60)
    assert both.firing() == [("acme", "helpdesk", "page"), ("globex", "helpdesk", "page")]
    ids = {both.state(t, "helpdesk").page.alert_id for t in ("acme", "globex")}  # type: ignore[union-attr]
    assert len(ids) == 2


def test_a_slow_burn_opens_a_ticket_not_a_page_and_resolves_once() -> None:
    monitor = AlertMonitor(AlertSettings())
    baseline = 3 * DAY // MINUTE
    burn_end = baseline + 48 * 60
    events = replay(monitor, range(burn_end + 8 * 60), spike(baseline, burn_end, base=2, high=8))
    assert [(e.state, e.severity) for _, e in events] == [
        ("firing", "ticket"),
        ("resolved", "ticket"),
    ]
    (fired_minute, fired), (resolved_minute, resolved) = events
    # 3 d rate above 5 % after (5 - 2) / (8 - 2) of 72 h = 36 h, a little more for Wilson
    assert 36 * 60 <= fired_minute - baseline <= 38 * 60
    assert fired.condition is not None and fired.condition.long_window_s == 3 * DAY
    # the 6 h short window falls under 5 % after (8 - 5) / (8 - 2) of 6 h = 3 h
    assert 3 * 60 <= resolved_minute - burn_end <= 3 * 60 + 10
    assert resolved.alert_id == fired.alert_id


def test_escalation_from_ticket_to_page_is_one_new_event() -> None:
    monitor = AlertMonitor(FAST)
    baseline = 3 * DAY // MINUTE
    slow_end = baseline + 48 * 60
    rate = spike(baseline, slow_end, base=2, high=8)

    def with_spike(minute: int) -> int:
        return 40 if slow_end - 60 <= minute < slow_end - 30 else rate(minute)

    events = replay(monitor, range(slow_end + 8 * 60), with_spike)
    kinds = [(e.state, e.severity) for _, e in events]
    assert kinds == [
        ("firing", "ticket"),
        ("firing", "page"),
        ("resolved", "page"),
        ("resolved", "ticket"),
    ]
    ticket_id = events[0][1].alert_id
    assert events[3][1].alert_id == ticket_id
    assert events[1][1].alert_id == events[2][1].alert_id != ticket_id


def test_no_ticket_opens_under_a_page_but_one_opens_when_the_page_resolves() -> None:
    # a young stream (3 d window holds 2 h) so a long page leaves the slow burn behind
    events = replay(AlertMonitor(FAST), range(240), spike(60, 150))
    kinds = [(e.state, e.severity) for _, e in events]
    assert kinds[:3] == [("firing", "page"), ("resolved", "page"), ("firing", "ticket")]
    uninhibited = AlertMonitor(FAST, StatePolicy(inhibit_ticket_while_paging=False))
    kinds = [(e.state, e.severity) for _, e in replay(uninhibited, range(240), spike(60, 150))]
    assert kinds[:2] == [("firing", "page"), ("firing", "ticket")]


def test_the_hold_keeps_a_flickering_burn_one_incident() -> None:
    def flicker(minute: int) -> int:
        if 60 <= minute < 120:
            return 2 if 80 <= minute < 84 else 40  # the short window dips for 2 minutes
        return 2

    held = replay(AlertMonitor(PAGE_ONLY), range(200), flicker)
    assert [(e.state, e.severity) for _, e in held] == [("firing", "page"), ("resolved", "page")]
    unheld = replay(AlertMonitor(PAGE_ONLY, StatePolicy(resolve_after_s=0)), range(200), flicker)
    assert [e.state for _, e in unheld] == ["firing", "resolved", "firing", "resolved"]


def test_a_replay_gives_the_same_alert_ids() -> None:
    first = replay(AlertMonitor(FAST), range(200), spike(60, 90))
    second = replay(AlertMonitor(FAST), range(200), spike(60, 90))
    assert [e.alert_id for _, e in first] == [e.alert_id for _, e in second]
    fired = first[0][1]
    assert fired.alert_id == alert_id("acme", "helpdesk", "page", fired.started_at.timestamp())
    assert alert_id("acme", "helpdesk", "page", 1.0) != alert_id("acme", "helpdesk", "ticket", 1.0)
    assert alert_id("a|b", "c", "page", 1.0) != alert_id("a", "b|c", "page", 1.0)


def test_alert_state_json_round_trip() -> None:
    monitor = AlertMonitor(FAST)
    replay(monitor, range(65), spike(60, 90))
    state = monitor.state("acme", "helpdesk")
    assert state is not None and state.page is not None
    text = state.to_json()
    assert AlertState.from_json(text) == state
    assert len(text) < 600
    assert AlertState.from_json(AlertState(tenant="t", assistant_id="a").to_json()).idle
    with pytest.raises(ValueError):
        AlertState.from_json('{"v": 2, "tenant": "t", "assistant_id": "a"}')


def test_a_restart_mid_incident_neither_refires_nor_forgets_to_resolve() -> None:
    uninterrupted = replay(AlertMonitor(FAST), range(200), spike(60, 90))
    before = AlertMonitor(FAST)
    first_half = replay(before, range(75), spike(60, 90))
    changelog = before.drain_changed()
    assert set(changelog) == {("acme", "helpdesk")}
    after = AlertMonitor(FAST)
    for snapshot in changelog.values():
        assert snapshot is not None
        after.restore(snapshot)
    second_half = replay(after, range(75, 200), spike(60, 90))
    assert [e for _, e in first_half + second_half] == [e for _, e in uninterrupted]


def test_idle_keys_are_forgotten_and_tombstoned() -> None:
    monitor = AlertMonitor(FAST)
    monitor.record("acme", "helpdesk", at_s=T0, answered=10, hallucinated=0)
    monitor.evaluate(T0 + 60)
    assert len(monitor) == 1
    monitor.drain_changed()
    monitor.evaluate(T0 + 3 * DAY + 60)
    assert len(monitor) == 0
    assert monitor.drain_changed() == {("acme", "helpdesk"): None}


def test_alert_events_round_trip_through_json_with_their_numbers() -> None:
    events = replay(AlertMonitor(PAGE_ONLY), range(100), spike(60, 80))
    for _, event in events:
        assert AlertEvent.model_validate_json(event.model_dump_json()) == event
    fired = events[0][1].model_dump(mode="json")
    assert fired["condition"]["long_hallucinated"] > 0
    assert fired["condition"]["unmet"] == []
    assert fired["resolved_at"] is None


def test_an_open_page_resolves_when_its_key_falls_silent() -> None:
    monitor = AlertMonitor(PAGE_ONLY)
    fired = replay(monitor, range(70), spike(60, 200))
    assert [e.state for _, e in fired] == ["firing"]
    resolved = [e for minute in range(70, 90) for e in monitor.evaluate(T0 + (minute + 1) * 60)]
    assert [(e.state, e.alert_id) for e in resolved] == [("resolved", fired[0][1].alert_id)]
    assert resolved[0].condition is not None and resolved[0].condition.short_answered == 0
