"""Which reason codes are *hard findings*: a record, a value, a name or a number the
evidence plainly contradicts or lacks, or a sentence the answering model was guessing at -
checks that need no model.

Where people's labels show that no threshold on the answer's risk reaches the precision
a deployment asks for, the answer calibrator turns its regime *hard-only*
(``hard_only_regimes``): the answer is flagged only for one of these, never for a claim
the NLI model or the calibrator merely found unsupported. The set lives here, once, so
the judge, the refit (``streamproc calibrate --from-labels``) and the docs agree.
"""

from __future__ import annotations

from typing import Final

from streamproc.contracts.events import ClaimVerdict, VerdictLabel
from streamproc.judge.records.findings import RecordReason
from streamproc.judge.records.structured import ValueReason

__all__ = ["HARD_REASON_CODES", "has_hard_finding"]

HARD_REASON_CODES: Final = frozenset(
    {
        # records: a case claim against its record or tool result
        RecordReason.CLAIM_WITHOUT_TOOL_EVIDENCE.value,
        RecordReason.IDENTIFIER_MISMATCH.value,
        RecordReason.AMOUNT_MISMATCH.value,
        RecordReason.DATE_MISMATCH.value,
        RecordReason.TIME_MISMATCH.value,
        RecordReason.COUNT_MISMATCH.value,
        RecordReason.NAME_MISMATCH.value,
        RecordReason.RECORD_STATE_MISMATCH.value,
        RecordReason.NOT_EXECUTED.value,
        # values: a structured record's field says otherwise
        ValueReason.VALUE_MISMATCH.value,
        # which of two dated things came first, against the evidence's years
        "COMPARISON_CONTRADICTED",
        # the two token-confidence cuts: a degenerate sentence, a guessed specific
        "LOW_CONFIDENCE_SENTENCE",
        "SHAKY_SPECIFIC",
        # names and numbers the evidence never states
        "NAME_NOT_IN_EVIDENCE",
        "NUMBER_MISMATCH",
        "NUMBER_NOT_IN_EVIDENCE",
        "NUMBER_WITHOUT_EVIDENCE",
    }
)
"""Reason codes (:attr:`~streamproc.contracts.reasons.Reason.code`) that count as hard."""


def has_hard_finding(verdict: ClaimVerdict) -> bool:
    """The claim is not supported, and one of the reasons is a hard finding."""
    if verdict.verdict is None or verdict.verdict is VerdictLabel.SUPPORTED:
        return False
    return any(r.code in HARD_REASON_CODES for r in verdict.reasons)
