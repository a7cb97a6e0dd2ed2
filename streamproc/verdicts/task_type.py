"""Which of EVALUATION.md's task types an answer is, for the corrected rate.

The judge's measured sensitivity and specificity differ by task type (QA, Summary,
Data2txt: ``streamproc/rates/judge_accuracy.json``), so each outcome names its type and
the windows count answers per type. The type is the calibrator's regime: read from a
checked claim's signals when the judge computed them (the calibrated NLI judge decides
"structured evidence" after parsing the passages too), otherwise from the event the same
way the regime is defined - records or tool results in the evidence, then a question.
"""

from __future__ import annotations

from streamproc.contracts.events import AnswerEvent, AnswerJudgement
from streamproc.judge.decision.calibrator import regime_of
from streamproc.judge.records.case_check import is_case_evidence
from streamproc.judge.text.evidence import is_structured
from streamproc.rates.judge_accuracy import TASK_OF_REGIME

__all__ = ["task_type_of"]


def task_type_of(answer: AnswerEvent, judgement: AnswerJudgement) -> str:
    """``Agent``, ``QA``, ``Summary`` or ``Data2txt``."""
    for claim in judgement.claims:
        if claim.signals:
            return TASK_OF_REGIME[regime_of(claim.signals)]
    if is_case_evidence(answer.evidence):
        return TASK_OF_REGIME["case"]
    if any(is_structured(item) for item in answer.evidence):
        return TASK_OF_REGIME["record"]
    return TASK_OF_REGIME["question" if answer.question else "task"]
