"""Burn-rate alerts of one outcome partition, kept in that partition's window state.

Outcomes are partitioned so that all of one (tenant, assistant) meet in one partition,
so each partition's :class:`~streamproc.alerting.monitor.AlertMonitor` sees every answer of
its keys. Its snapshots live in the partition's :class:`TrackedStore` under ``alert/``
keys: they are changelogged in the same transaction as the aggregates, the alert events
and the input offsets, and a worker that takes the partition over restores them with the
windows - so an incident fires once and resolves once across restarts.

Evaluation runs on event time: ``as_of`` is the end of the newest whole minute that the
partition's events have passed by more than the window grace, so a replay decides exactly
as the live stream did.
"""

from __future__ import annotations

import json
import math
from collections.abc import MutableMapping
from typing import Any

from streamproc.alerting.alert_state import AlertEvent, StatePolicy
from streamproc.alerting.monitor import AlertMonitor
from streamproc.config import AlertSettings
from streamproc.stream.windows import AnswerOutcome

__all__ = ["ALERT_KEY_PREFIX", "PartitionAlerts"]

ALERT_KEY_PREFIX = "alert/"
_CLOCK_KEY = "alert-clock"
_MINUTE_S = 60.0


class PartitionAlerts:
    """Count outcomes, evaluate once per closed minute of event time, keep the state."""

    def __init__(
        self, alerts: AlertSettings, store: MutableMapping[str, Any], *, grace_s: float
    ) -> None:
        policy = StatePolicy(
            resolve_after_s=alerts.resolve_after_s,
            max_examples=alerts.max_example_ids,
            inhibit_ticket_while_paging=alerts.inhibit_ticket_while_paging,
        )
        self._monitor = AlertMonitor(alerts, policy)
        self._store = store
        self._grace_s = grace_s
        for key, value in list(store.items()):
            if key.startswith(ALERT_KEY_PREFIX):
                self._monitor.restore(json.dumps(value))
        clock = store.get(_CLOCK_KEY) or {}
        self._newest_event_s: float | None = clock.get("newest_event_s")
        self._evaluated_to: float | None = clock.get("evaluated_to")

    def count(self, outcome: AnswerOutcome) -> None:
        """One judged answer into its key's per-minute counts."""
        at_s = outcome.occurred_at.timestamp()
        answered = not outcome.abstained
        hallucinated = answered and outcome.hallucinated
        examples = [outcome.answer_id] if hallucinated and outcome.answer_id else []
        self._monitor.record(
            outcome.tenant,
            outcome.assistant_id,
            at_s=at_s,
            answered=int(answered),
            hallucinated=int(hallucinated),
            example_answer_ids=examples,
        )
        if self._newest_event_s is None or at_s > self._newest_event_s:
            self._newest_event_s = at_s

    def evaluate(self) -> list[AlertEvent]:
        """The alert events of every minute closed since the last call (event time), and
        the changed snapshots written to the store."""
        if self._newest_event_s is None:
            return []
        as_of = math.floor((self._newest_event_s - self._grace_s) / _MINUTE_S) * _MINUTE_S
        events: list[AlertEvent] = []
        if self._evaluated_to is None or as_of > self._evaluated_to:
            events = self._monitor.evaluate(as_of)
            self._evaluated_to = as_of
        for (tenant, assistant), snapshot in self._monitor.drain_changed().items():
            key = ALERT_KEY_PREFIX + json.dumps([tenant, assistant], separators=(",", ":"))
            if snapshot is None:
                self._store.pop(key, None)
            else:
                self._store[key] = json.loads(snapshot)
        clock = {"newest_event_s": self._newest_event_s, "evaluated_to": self._evaluated_to}
        if self._store.get(_CLOCK_KEY) != clock:
            self._store[_CLOCK_KEY] = clock
        return events

    def firing(self) -> list[tuple[str, str, str]]:
        """(tenant, assistant, severity) of every open alert."""
        return [(tenant, assistant, str(sev)) for tenant, assistant, sev in self._monitor.firing()]
