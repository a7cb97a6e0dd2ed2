"""The judge's own measured accuracy per task type, for the corrected (true) rate.

The numbers are EVALUATION.md's confusion counts on the report split (the half nobody tuned
on), copied into ``judge_accuracy.json`` beside this module and shipped with the package; a
test fails when the two disagree. Keyed by judge: ``nli+<calibrator>`` for the calibrated
NLI judge, ``rules`` for the word-overlap baseline. Judges EVALUATION.md gives no confusion
counts for (aegis + its calibrator: balanced accuracy only; the NLI judge without a
calibrator as it is today) have no entry: their rate cannot be corrected.

Task types are EVALUATION.md's: ``QA`` (HaluEval QA), ``Summary`` and ``Data2txt``
(RAGTruth). A live answer's type follows the calibrator's regime, known from the event
(:data:`TASK_OF_REGIME`): an answer about a customer's case (records with fields, tool
results) is Agent, a reply to a question is QA, an answer over other structured records is
Data2txt, anything else over passages is read as Summary.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Final

from pydantic import BaseModel, ConfigDict, NonNegativeInt

from streamproc.rates.corrected_rate import ConfusionCounts

__all__ = [
    "TASK_OF_REGIME",
    "JudgeAccuracy",
    "judge_accuracy",
    "judge_key",
    "known_judges",
]

TASK_OF_REGIME: Final = {
    "question": "QA",
    "record": "Data2txt",
    "task": "Summary",
    "case": "Agent",
}
"""Calibrator regime (``judge.decision.calibrator.regime_of``) -> EVALUATION.md task type."""


class _Counts(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tp: NonNegativeInt
    fn: NonNegativeInt
    tn: NonNegativeInt
    fp: NonNegativeInt


class JudgeAccuracy(BaseModel):
    """One judge's confusion counts per task type, and where they were measured."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    measured_at: str
    table: str
    tasks: dict[str, _Counts]

    def for_task(self, task_type: str) -> ConfusionCounts | None:
        counts = self.tasks.get(task_type)
        if counts is None:
            return None
        return ConfusionCounts(tp=counts.tp, fn=counts.fn, tn=counts.tn, fp=counts.fp)


class _File(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    judges: dict[str, JudgeAccuracy]


def judge_key(name: str, calibrator: str | None, answer_calibrator: str | None = None) -> str:
    """The key of a judge as configured (``settings.judge.name``, ``.calibrator``,
    ``.answer_calibrator``): ``nli+<calibrator>[+<answer calibrator>]``."""
    if name != "nli" or not calibrator:
        return name
    return (
        f"{name}+{calibrator}+{answer_calibrator}" if answer_calibrator else f"{name}+{calibrator}"
    )


@functools.cache
def _load() -> _File:
    text = resources.files("streamproc.rates").joinpath("judge_accuracy.json").read_text("utf-8")
    return _File.model_validate(json.loads(text))


def judge_accuracy(key: str) -> JudgeAccuracy | None:
    """The measured accuracy of judge ``key`` (see :func:`judge_key`), None when unmeasured."""
    return _load().judges.get(key)


def known_judges() -> tuple[str, ...]:
    return tuple(sorted(_load().judges))
