"""The alerts topic's record: a burn-rate alert firing or resolved, with the long/short
window pair that decided it, copied as it was evaluated (docs/on-call.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

__all__ = ["SEVERITIES", "AlertEvent", "BurnCondition", "Severity", "Unmet"]

Severity = Literal["page", "ticket"]
SEVERITIES: Final[tuple[Severity, ...]] = ("page", "ticket")
"""Highest first."""

Unmet = Literal["long_burn", "short_burn", "min_answered", "wilson"]


@dataclass(frozen=True, slots=True)
class BurnCondition:
    """One long/short pair evaluated: every number an on-call engineer needs to see why it
    fired (or did not). Flat on purpose: it is copied into alert events as it is."""

    severity: Severity
    long_window_s: float
    short_window_s: float
    factor: float
    objective: float
    min_answered: int
    long_answered: int
    long_hallucinated: int
    long_rate: float | None
    long_burn_rate: float | None
    long_wilson_low: float | None
    short_answered: int
    short_hallucinated: int
    short_rate: float | None
    short_burn_rate: float | None
    unmet: tuple[Unmet, ...]
    """Which tests failed; empty when the condition is met."""

    @property
    def met(self) -> bool:
        return not self.unmet


class AlertEvent(BaseModel):
    """One message on the alerts topic."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    alert_id: str
    state: Literal["firing", "resolved"]
    severity: Severity
    tenant: str
    assistant_id: str
    objective: float = Field(description="Most hallucinated share of answered answers allowed.")
    condition: BurnCondition | None = Field(
        description="Firing: the met condition. Resolved: the same window pair now. None only "
        "when the policy no longer has a pair of this severity."
    )
    example_answer_ids: list[str] = Field(
        default_factory=list, description="Flagged answers of the incident, for the audit trail."
    )
    started_at: AwareDatetime
    resolved_at: AwareDatetime | None = None
    event_time: AwareDatetime = Field(description="The evaluation (event time) that decided.")
