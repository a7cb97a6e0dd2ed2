"""Alert lifecycle per (tenant, assistant): one ``firing`` and one ``resolved`` event per
incident, whatever the evaluation cadence - pure, so a changelog can carry it.

Rules (each tested):

- **Severities are separate alerts**, like the page and ticket alerts Sloth / Pyrra
  generate: each has its own id and its own firing/resolved pair. An escalation from
  ticket to page is therefore one new event (``firing``, severity ``page``); the ticket
  stays open and resolves on its own.
- **No ticket under a page** (``inhibit_ticket_while_paging``, on by default): a ticket does
  not open while a page for the same key is firing - the page already has someone looking;
  if the slow burn still holds once the page resolves, the ticket opens then.
- **Firing** opens an incident at the first evaluation where a condition of that severity is
  met; further evaluations while it holds emit nothing.
- **Clearing**: an open alert resolves at the first evaluation where no condition of its
  severity is met *and* none has been met for ``resolve_after_s`` of event time (hysteresis:
  a burn that dips under the factor for a minute and comes back is the same incident). The
  multi-window rule already makes clearing quick: the short window stops burning within
  its length after the spike ends.
- **Alert id**: sha256 of (tenant, assistant, severity, incident start), so a replay of the
  same stream gives the same ids and a consumer can de-duplicate.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from streamproc.contracts.alert_events import SEVERITIES, AlertEvent, BurnCondition, Severity
from streamproc.monitor.alerts.burn_rate import BurnDecision

__all__ = [
    "AlertEvent",
    "AlertState",
    "OpenAlert",
    "StatePolicy",
    "alert_id",
    "step_alerts",
]


class OpenAlert(BaseModel):
    """What is remembered of a firing alert between evaluations."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    alert_id: str
    started_at: float
    last_met_at: float
    objective: float
    long_window_s: float
    short_window_s: float
    example_answer_ids: tuple[str, ...] = ()


class AlertState(BaseModel):
    """Open alerts of one (tenant, assistant); a few hundred bytes of JSON."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    v: Literal[1] = 1
    tenant: str
    assistant_id: str
    page: OpenAlert | None = None
    ticket: OpenAlert | None = None

    def open_alert(self, severity: Severity) -> OpenAlert | None:
        return self.page if severity == "page" else self.ticket

    @property
    def idle(self) -> bool:
        """Nothing open: the state can be forgotten (a changelog tombstone)."""
        return self.page is None and self.ticket is None

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> AlertState:
        return cls.model_validate_json(text)


@dataclass(frozen=True, slots=True)
class StatePolicy:
    """How alerts open and clear (not in ``AlertSettings`` yet; defaults documented above)."""

    resolve_after_s: float = 300.0
    max_examples: int = 5
    inhibit_ticket_while_paging: bool = True


def alert_id(tenant: str, assistant_id: str, severity: Severity, started_at: float) -> str:
    """Stable id of one incident: the same stream replayed gives the same id."""
    key = json.dumps([tenant, assistant_id, severity, round(started_at * 1000)])
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def step_alerts(
    state: AlertState,
    decision: BurnDecision,
    *,
    examples: Sequence[str] = (),
    policy: StatePolicy = StatePolicy(),
) -> tuple[AlertState, list[AlertEvent]]:
    """Advance one key's alerts by one evaluation; returns the new state and 0-2 events
    per severity (never two of the same alert). ``examples``: flagged answer ids of this
    key, most relevant first (the caller's recent ones)."""
    if state.idle and decision.severity is None:
        return state, []  # the common case, kept cheap: most keys are quiet
    events: list[AlertEvent] = []
    open_alerts: dict[Severity, OpenAlert | None] = {
        severity: state.open_alert(severity) for severity in SEVERITIES
    }
    for severity in SEVERITIES:
        current = open_alerts[severity]
        met = decision.triggering(severity)
        if current is None:
            if met is None:
                continue
            if (
                severity == "ticket"
                and policy.inhibit_ticket_while_paging
                and open_alerts["page"] is not None
            ):
                continue
            opened = _open(state, severity, met, decision.as_of, examples, policy)
            open_alerts[severity] = opened
            events.append(_event(state, severity, opened, met, "firing", decision.as_of))
        elif met is not None:
            open_alerts[severity] = current.model_copy(
                update={
                    "last_met_at": decision.as_of,
                    "example_answer_ids": _top_up(current.example_answer_ids, examples, policy),
                }
            )
        elif decision.as_of - current.last_met_at >= policy.resolve_after_s:
            reading = decision.reading(severity, current.long_window_s, current.short_window_s)
            events.append(_event(state, severity, current, reading, "resolved", decision.as_of))
            open_alerts[severity] = None
    if open_alerts["page"] is state.page and open_alerts["ticket"] is state.ticket:
        return state, events
    updated = state.model_copy(
        update={"page": open_alerts["page"], "ticket": open_alerts["ticket"]}
    )
    return updated, events


def _open(
    state: AlertState,
    severity: Severity,
    met: BurnCondition,
    as_of: float,
    examples: Sequence[str],
    policy: StatePolicy,
) -> OpenAlert:
    return OpenAlert(
        alert_id=alert_id(state.tenant, state.assistant_id, severity, as_of),
        started_at=as_of,
        last_met_at=as_of,
        objective=met.objective,
        long_window_s=met.long_window_s,
        short_window_s=met.short_window_s,
        example_answer_ids=_top_up((), examples, policy),
    )


def _top_up(kept: tuple[str, ...], examples: Sequence[str], policy: StatePolicy) -> tuple[str, ...]:
    out = list(kept)
    for example in examples:
        if len(out) >= policy.max_examples:
            break
        if example not in out:
            out.append(example)
    return tuple(out)


def _event(
    state: AlertState,
    severity: Severity,
    alert: OpenAlert,
    condition: BurnCondition | None,
    status: Literal["firing", "resolved"],
    as_of: float,
) -> AlertEvent:
    return AlertEvent(
        alert_id=alert.alert_id,
        state=status,
        severity=severity,
        tenant=state.tenant,
        assistant_id=state.assistant_id,
        objective=alert.objective,
        condition=condition,
        example_answer_ids=list(alert.example_answer_ids),
        started_at=_utc(alert.started_at),
        resolved_at=_utc(as_of) if status == "resolved" else None,
        event_time=_utc(as_of),
    )


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)
