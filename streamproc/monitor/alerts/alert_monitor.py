"""All keys' burn-rate alerts in one pure object: what the window loop drives.

Per (tenant, assistant) - never per assistant alone, so one tenant's answers cannot move
another tenant's alerts - it keeps a :class:`RollingCounts`, the :class:`AlertState` and the
newest flagged answer ids. The loop calls :meth:`AlertMonitor.record` for each closed
minute bucket (or answer), :meth:`AlertMonitor.evaluate` once per closed minute of event
time, publishes the events, and changelogs :meth:`AlertMonitor.drain_changed` (a ``None``
value is a tombstone) so :meth:`AlertMonitor.restore` rebuilds everything after a restart.

Memory stays bounded: a key with no open alert and no answer inside its longest window is
forgotten at the next evaluation (and tombstoned).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from streamproc.monitor.alerts.alert_state import AlertEvent, AlertState, StatePolicy, step_alerts
from streamproc.monitor.alerts.burn_rate import (
    SEVERITIES,
    RollingCounts,
    Severity,
    alert_windows,
    evaluate_burn,
)
from streamproc.monitor.options import AlertSettings

__all__ = ["AlertKey", "AlertMonitor"]

AlertKey = tuple[str, str]
"""(tenant, assistant_id)."""

_SNAPSHOT_VERSION: Final = 1


@dataclass(slots=True)
class _KeyAlerts:
    counts: RollingCounts
    state: AlertState
    examples: deque[str] = field(default_factory=deque)


class AlertMonitor:
    """Burn-rate alerts of every (tenant, assistant) seen, evaluated on event time."""

    def __init__(self, alerts: AlertSettings, policy: StatePolicy | None = None) -> None:
        self._alerts = alerts
        self._policy = policy or StatePolicy()
        self._windows = alert_windows(alerts)
        self._longest = max(self._windows)
        pairs = [*alerts.page, *alerts.ticket]
        self._longest_short = max((pair.short_s for pair in pairs), default=0.0)
        self._entries: dict[AlertKey, _KeyAlerts] = {}
        self._changed: set[AlertKey] = set()

    def __len__(self) -> int:
        return len(self._entries)

    def _entry(self, key: AlertKey) -> _KeyAlerts:
        entry = self._entries.get(key)
        if entry is None:
            entry = _KeyAlerts(
                RollingCounts(self._windows),
                AlertState(tenant=key[0], assistant_id=key[1]),
                deque(maxlen=self._policy.max_examples),
            )
            self._entries[key] = entry
        return entry

    def record(
        self,
        tenant: str,
        assistant_id: str,
        *,
        at_s: float,
        answered: int,
        hallucinated: int,
        example_answer_ids: Sequence[str] = (),
    ) -> bool:
        """Count one minute bucket's (or one answer's) answered and hallucinated answers;
        ``example_answer_ids``: its flagged answers. False when too old to matter."""
        key = (tenant, assistant_id)
        entry = self._entry(key)
        counted = entry.counts.add(at_s, answered, hallucinated)
        for example in example_answer_ids:
            if example not in entry.examples:
                entry.examples.append(example)
        self._changed.add(key)
        return counted

    def evaluate(self, as_of: float) -> list[AlertEvent]:
        """Evaluate every key at event time ``as_of`` (the end of the newest closed minute);
        the events to publish, in key order."""
        events: list[AlertEvent] = []
        for key in sorted(self._entries):
            entry = self._entries[key]
            newest = entry.counts.newest_s
            quiet = newest is None or as_of - newest >= self._longest_short
            if not (entry.state.idle and quiet):
                # (every condition needs its short window burning: a quiet idle key cannot fire)
                decision = evaluate_burn(entry.counts, self._alerts, as_of=as_of)
                newest_first = list(reversed(entry.examples))
                state, key_events = step_alerts(
                    entry.state, decision, examples=newest_first, policy=self._policy
                )
                if state is not entry.state:
                    entry.state = state
                    self._changed.add(key)
                events.extend(key_events)
            state = entry.state
            if state.idle and (newest is None or as_of - newest >= self._longest):
                del self._entries[key]
                self._changed.add(key)
        return events

    def firing(self) -> list[tuple[str, str, Severity]]:
        """(tenant, assistant, severity) of every open alert, for the firing gauge."""
        return [
            (key[0], key[1], severity)
            for key, entry in sorted(self._entries.items())
            for severity in SEVERITIES
            if entry.state.open_alert(severity) is not None
        ]

    def state(self, tenant: str, assistant_id: str) -> AlertState | None:
        entry = self._entries.get((tenant, assistant_id))
        return entry.state if entry else None

    def snapshot(self, tenant: str, assistant_id: str) -> str | None:
        """One key as JSON for the changelog; None when the key is forgotten (tombstone)."""
        entry = self._entries.get((tenant, assistant_id))
        if entry is None:
            return None
        return json.dumps(
            {
                "v": _SNAPSHOT_VERSION,
                "state": entry.state.model_dump(mode="json", exclude_none=True),
                "counts": entry.counts.to_dict(),
                "examples": list(entry.examples),
            },
            separators=(",", ":"),
        )

    def drain_changed(self) -> dict[AlertKey, str | None]:
        """Snapshots of the keys changed since the last call (None: tombstone)."""
        changed = {key: self.snapshot(*key) for key in sorted(self._changed)}
        self._changed.clear()
        return changed

    def restore(self, text: str | bytes) -> AlertKey:
        """Load one key's snapshot (changelog recovery). Counts kept under other windows
        than the current policy's are dropped: the alert state is kept, history restarts."""
        data = json.loads(text)
        if data.get("v") != _SNAPSHOT_VERSION:
            raise ValueError(f"unknown alert snapshot version {data.get('v')!r}")
        state = AlertState.model_validate(data["state"])
        counts = RollingCounts.from_dict(data["counts"])
        if counts.windows_s != RollingCounts(self._windows).windows_s:
            counts = RollingCounts(self._windows)
        examples: deque[str] = deque(data["examples"], maxlen=self._policy.max_examples)
        key = (state.tenant, state.assistant_id)
        self._entries[key] = _KeyAlerts(counts, state, examples)
        return key
