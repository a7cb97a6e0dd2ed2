"""Burn-rate alerting and trustworthy rates - pure: no Kafka, no clock, no metrics.

- ``burn_rate``: rolling per-key counts and the SRE-workbook multi-window conditions;
- ``alert_state``: one firing and one resolved event per incident, JSON-serialisable state;
- ``monitor``: both for every (tenant, assistant), what the window loop drives;
- ``corrected_rate`` / ``judge_accuracy``: the true rate behind the flag rate, from the
  judge's measured sensitivity and specificity;
- ``live_accuracy``: the judge measured against reviewers' labels on live traffic per cell
  (inverse-probability weighted sensitivity, specificity, precision, kappa) and its drift
  below the offline figures or its own baseline, what the accuracy loop drives.
"""

from __future__ import annotations

from streamproc.monitor.alerts.alert_monitor import AlertKey, AlertMonitor
from streamproc.monitor.alerts.alert_state import (
    AlertEvent,
    AlertState,
    OpenAlert,
    StatePolicy,
    alert_id,
    step_alerts,
)
from streamproc.monitor.alerts.burn_rate import (
    BurnCondition,
    BurnDecision,
    RollingCounts,
    Severity,
    WindowCount,
    evaluate_burn,
)
from streamproc.rates.corrected_rate import (
    ConfusionCounts,
    CorrectedRate,
    corrected_rate,
    corrected_rate_mixed,
)
from streamproc.rates.judge_accuracy import (
    TASK_OF_REGIME,
    JudgeAccuracy,
    judge_accuracy,
    judge_key,
)

__all__ = [
    "TASK_OF_REGIME",
    "AlertEvent",
    "AlertKey",
    "AlertMonitor",
    "AlertState",
    "BurnCondition",
    "BurnDecision",
    "ConfusionCounts",
    "CorrectedRate",
    "JudgeAccuracy",
    "OpenAlert",
    "RollingCounts",
    "Severity",
    "StatePolicy",
    "WindowCount",
    "alert_id",
    "corrected_rate",
    "corrected_rate_mixed",
    "evaluate_burn",
    "judge_accuracy",
    "judge_key",
    "step_alerts",
]
