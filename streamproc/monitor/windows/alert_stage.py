"""Burn-rate alerts and window metrics, driven by the window loop's reports.

Outcomes are partitioned so that all of one (tenant, assistant) meet in one partition,
so one :class:`~streamproc.monitor.alerts.alert_monitor.AlertMonitor` per partition sees
every pane of its keys. It is fed the per-pane deltas of each :class:`WindowReport` (a pane's counts
when it closes, then ``new - old`` when late answers revise it) and evaluated on event
time, at the end of the newest pane the partition has closed, so a replay decides as the
live stream did. The monitor's snapshots go into ``report.state``, which the window loop
changelogs in the same transaction as the alert events, the aggregates and the input
offsets: after a crash or a rebalance an incident neither fires twice nor is forgotten.

Metrics are set only after the transaction committed (``after_commit``).
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

from streamproc.monitor.alerts.alert_monitor import AlertMonitor
from streamproc.monitor.alerts.alert_state import AlertEvent, StatePolicy
from streamproc.monitor.options import AlertSettings
from streamproc.monitor.windows.report import WindowReport
from streamproc.telemetry.sensors import WindowSensor
from streamproc.verdicts.output_topic import OutputTopic
from streamproc.verdicts.record import OutboundRecord

__all__ = ["ALERT_KEY_PREFIX", "AlertHooks", "PartitionAlerts"]

ALERT_KEY_PREFIX = "alert/"
_CLOCK_KEY = "alert-clock"


class PartitionAlerts:
    """One partition's alerts: pane deltas in, alert events out, state in ``store``."""

    def __init__(self, alerts: AlertSettings, store: MutableMapping[str, Any]) -> None:
        policy = StatePolicy(
            resolve_after_s=alerts.resolve_after_s,
            max_examples=alerts.max_example_ids,
            inhibit_ticket_while_paging=alerts.inhibit_ticket_while_paging,
        )
        self._monitor = AlertMonitor(alerts, policy)
        for key in list(store):
            if key.startswith(ALERT_KEY_PREFIX):
                self._monitor.restore(json.dumps(store[key]))
        clock = store.get(_CLOCK_KEY) or {}
        self._newest_pane_end: float | None = clock.get("newest_pane_end")
        self._evaluated_to: float | None = clock.get("evaluated_to")
        self.seq: int = clock.get("seq", 0)
        """Bumped on every write: a cached copy whose seq differs from the store's is stale
        (another worker owned the partition meanwhile)."""

    def apply(self, report: WindowReport) -> list[AlertEvent]:
        """Count the report's pane deltas in event-time order, evaluating at the end of
        each minute newly closed - a replay closes many minutes in one report, and
        evaluating only at the newest would step over a spike - and write the changed
        state into ``report.state``. A revised older pane is counted and shows in the
        next evaluation."""
        events: list[AlertEvent] = []
        for delta in sorted(report.deltas, key=lambda d: (d.end, d.tenant, d.assistant_id)):
            if self._newest_pane_end is not None and delta.end > self._newest_pane_end:
                # A later minute starts: every pane up to the newest end is counted.
                events += self._evaluate_through(self._newest_pane_end)
            self._monitor.record(
                delta.tenant,
                delta.assistant_id,
                at_s=delta.start,
                answered=delta.answered,
                hallucinated=delta.hallucinated,
                example_answer_ids=delta.example_answer_ids,
            )
            if self._newest_pane_end is None or delta.end > self._newest_pane_end:
                self._newest_pane_end = delta.end
            if self._evaluated_to is None:
                self._evaluated_to = delta.start  # nothing to decide before the first pane
        events += self._evaluate_through(self._newest_pane_end)
        changed = self._monitor.drain_changed()
        for (tenant, assistant), snapshot in changed.items():
            key = ALERT_KEY_PREFIX + json.dumps([tenant, assistant], separators=(",", ":"))
            if snapshot is None:
                report.state.pop(key, None)
            else:
                report.state[key] = json.loads(snapshot)
        if changed or events or report.deltas:
            self.seq += 1
            report.state[_CLOCK_KEY] = {
                "newest_pane_end": self._newest_pane_end,
                "evaluated_to": self._evaluated_to,
                "seq": self.seq,
            }
        return events

    def _evaluate_through(self, as_of: float | None) -> list[AlertEvent]:
        if as_of is None or (self._evaluated_to is not None and as_of <= self._evaluated_to):
            return []
        self._evaluated_to = as_of
        return self._monitor.evaluate(as_of)

    def firing(self) -> list[tuple[str, str, str]]:
        """(tenant, assistant, severity) of every open alert."""
        return [(tenant, assistant, str(sev)) for tenant, assistant, sev in self._monitor.firing()]


class AlertHooks:
    """The window loop's ``in_transaction`` and ``after_commit`` hooks: alert events on
    ``alerts.topic`` (key ``tenant/assistant``) and the window and alert metrics."""

    def __init__(
        self,
        alerts: AlertSettings,
        topic: OutputTopic[AlertEvent],
        metrics: WindowSensor | None = None,
    ) -> None:
        """``topic``: the alerts topic of the output topics (``OutputTopics.alerts``)."""
        self._alerts = alerts
        self._topic = topic
        self._metrics = metrics
        self._partitions: dict[int, PartitionAlerts] = {}
        self._firing: dict[int, set[tuple[str, str, str]]] = {}

    def _for(self, report: WindowReport) -> PartitionAlerts:
        cached = self._partitions.get(report.partition)
        stored_seq = (report.state.get(_CLOCK_KEY) or {}).get("seq", 0)
        if cached is None or cached.seq != stored_seq:
            cached = PartitionAlerts(self._alerts, report.state)
            self._partitions[report.partition] = cached
        return cached

    def in_transaction(self, report: WindowReport) -> list[OutboundRecord]:
        return [self._topic.record(event) for event in self._for(report).apply(report)]

    def after_commit(self, report: WindowReport) -> None:
        metrics = self._metrics
        if metrics is None:
            return
        for aggregate in report.aggregates:
            corrected = aggregate.corrected_rate
            metrics.window_rate(
                aggregate.tenant,
                aggregate.assistant_id,
                aggregate.model,
                aggregate.window,
                aggregate.rate,
                aggregate.rate_low,
                aggregate.rate_high,
                corrected=corrected.estimate if corrected is not None else None,
            )
        for outcome in report.late:
            metrics.late_event(outcome.tenant, outcome.assistant_id, outcome.model)
        alerts = self._partitions.get(report.partition)
        now_firing = set(alerts.firing()) if alerts is not None else set()
        before = self._firing.get(report.partition, set())
        for tenant, assistant, severity in before - now_firing:
            metrics.alert_state(tenant, assistant, severity, firing=False)
        for tenant, assistant, severity in now_firing:
            metrics.alert_state(tenant, assistant, severity, firing=True)
        self._firing[report.partition] = now_firing
