"""What a record check says about one claim: a reason code and the verdict it implies.

Kept apart from the rules so that every family (amounts, identifiers, states, refused
calls) builds the same finding, and so that a reader of reason codes (calibration) needs
none of the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from streamproc.contracts.events import VerdictLabel
from streamproc.contracts.reasons import Reason

__all__ = [
    "RecordFinding",
    "RecordReason",
]


class RecordReason(StrEnum):
    CLAIM_WITHOUT_TOOL_EVIDENCE = "CLAIM_WITHOUT_TOOL_EVIDENCE"
    IDENTIFIER_MISMATCH = "IDENTIFIER_MISMATCH"
    AMOUNT_MISMATCH = "AMOUNT_MISMATCH"
    DATE_MISMATCH = "DATE_MISMATCH"
    TIME_MISMATCH = "TIME_MISMATCH"
    COUNT_MISMATCH = "COUNT_MISMATCH"
    NAME_MISMATCH = "NAME_MISMATCH"
    RECORD_STATE_MISMATCH = "RECORD_STATE_MISMATCH"
    NOT_EXECUTED = "NOT_EXECUTED"
    RECORD_CONFIRMED = "RECORD_CONFIRMED"
    FIELD_UNPARSED = "FIELD_UNPARSED"
    """A field that should hold a value of a type (a date) and does not read as one:
    reported, never read as a match."""


@dataclass(frozen=True, slots=True)
class RecordFinding:
    """What a record says about one claim.

    ``verdict`` is what the finding implies for the whole claim: contradicted for a
    mismatch or a refused call, unsupported for a case claim with no record at all, and
    None for a confirmation (one value is right; the rest of the claim still needs
    checking). ``field`` is the record field as written (``order.status``).
    """

    reason: RecordReason
    verdict: VerdictLabel | None
    detail: str
    evidence_id: str | None = None
    field: str | None = None
    claim_value: str | None = None
    record_value: str | None = None

    @property
    def confirmed(self) -> bool:
        return self.reason is RecordReason.RECORD_CONFIRMED

    @property
    def reason_text(self) -> Reason:
        """The finding as a reason of the claim's verdict (``CODE: detail``)."""
        return Reason(self.reason.value, self.detail)
