"""The judge's reasons in words a reviewer reads at a glance.

A verdict's reasons are written for engineers (``CALIBRATED_RISK: 0.96 >= 0.45
(unknown_numbers +4.87, ...)``): probabilities, thresholds and calibrator signals would
anchor a reviewer on numbers it cannot check. The page shows one short plain phrase per
reason code instead, never the detail after the code; a code this table does not know
becomes a generic phrase, so a new judge reason cannot leak its internals either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from streamproc.contracts.reasons import Reason

__all__ = ["OTHER_CHECK", "PLAIN_REASONS", "plain_reasons"]

OTHER_CHECK: Final = "another check of the judge"
_SIZE_LIMIT: Final = "not checked in full: over a size limit"

PLAIN_REASONS: Final[Mapping[str, str]] = {
    # records and tool results
    "CLAIM_WITHOUT_TOOL_EVIDENCE": "no tool result backs it",
    "IDENTIFIER_MISMATCH": "an identifier differs from the record",
    "AMOUNT_MISMATCH": "an amount differs from the record",
    "DATE_MISMATCH": "a date differs from the record",
    "TIME_MISMATCH": "a time differs from the record",
    "COUNT_MISMATCH": "a count differs from the record",
    "NAME_MISMATCH": "a name differs from the record",
    "RECORD_STATE_MISMATCH": "the record's state says otherwise",
    "NOT_EXECUTED": "the tool call it relies on did not run",
    "RECORD_CONFIRMED": "the record confirms it",
    "FIELD_UNPARSED": "a record field could not be read",
    "VALUE_MISMATCH": "a value differs from the record",
    "VALUE_CONFIRMED": "the record confirms the value",
    "FIELD_NOT_IN_RECORD": "the record has no such field",
    # numbers, names, dates in text evidence
    "NUMBER_MISMATCH": "a number differs from the evidence",
    "NUMBER_NOT_IN_EVIDENCE": "a number is not in the evidence",
    "NUMBER_WITHOUT_EVIDENCE": "a number with no evidence to check it against",
    "NAME_NOT_IN_EVIDENCE": "a name is not in the evidence",
    "COMPARISON_CONTRADICTED": "the evidence orders these events differently",
    "COMPARISON_CONFIRMED": "the evidence confirms the order of events",
    "OVERSTATED": "it says more than the evidence does",
    # what the text evidence says
    "NLI_CONTRADICTION": "the evidence contradicts it",
    "NEGATION_FLIP": "the evidence says the opposite",
    "NOT_ENTAILED": "the evidence does not state it",
    "COMPOSED_PREMISE": "several evidence sentences together state it",
    "NO_EVIDENCE": "no evidence was given",
    "LOW_WORD_COVERAGE": "few of its words are in the evidence",
    "TOPIC_NOT_IN_EVIDENCE": "its topic is not in the evidence",
    "ABOUT_DOCUMENT": "it describes the evidence document itself",
    "CALIBRATED_RISK": "weighed from several signals together",
    "NOT_SUPPORTED_BY_SIGNALS": "the signals together do not support it",
    # citations
    "CITATION_UNKNOWN": "it cites a source that was not given",
    "CITATION_MISSING": "it cites no source",
    "CITATION_NOT_SUPPORTING": "its cited source does not state it",
    # the answering model's own confidence
    "LOW_CONFIDENCE_SENTENCE": "the model was unsure while writing this sentence",
    "LOW_CONFIDENCE": "the model was unsure while writing this",
    "SHAKY_SPECIFIC": "the model was unsure of a specific detail",
    "SHAKY_SPECIFIC_CONFIRMED": "a detail the model was unsure of is in the evidence",
    # what the judge could not do
    "LANGUAGE_NOT_SUPPORTED": "the judge does not check this language",
    "EVIDENCE_TRUNCATED": "the evidence was too long to read in full",
}
"""Reason code to plain phrase; every ``LIMIT_*`` code reads as one size-limit phrase."""


def plain_reason(reason: Reason) -> str:
    """The plain phrase of one reason (its detail dropped)."""
    code = reason.code
    if code.startswith("LIMIT_"):
        return _SIZE_LIMIT
    return PLAIN_REASONS.get(code, OTHER_CHECK)


def plain_reasons(reasons: Iterable[Reason]) -> list[str]:
    """The plain phrases of a claim's reasons, each once, in the judge's order."""
    return list(dict.fromkeys(plain_reason(r) for r in reasons))
