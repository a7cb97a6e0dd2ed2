"""The gate's error code for an event the intake rejects, on every path."""

from __future__ import annotations

from streamproc.contracts.events import DeadLetterReason
from streamproc.contracts.gate_events import GateErrorCode

__all__ = ["refusal_code"]

_CODES: dict[DeadLetterReason, GateErrorCode] = {
    DeadLetterReason.BAD_JSON: "bad_json",
    DeadLetterReason.SCHEMA_VIOLATION: "schema_violation",
    DeadLetterReason.OVERSIZED: "oversized",
    DeadLetterReason.EVENT_TIME_OUT_OF_RANGE: "event_time_out_of_range",
}


def refusal_code(reason: DeadLetterReason) -> GateErrorCode:
    """``bad_json``, ``schema_violation``, ``oversized``, ``event_time_out_of_range``;
    ``bad_request`` for any other rejection."""
    return _CODES.get(reason, "bad_request")
