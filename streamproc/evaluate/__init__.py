"""Offline evaluation: the live judge, run over labelled answers.

``check`` (per-claim verdicts), ``agree`` (judge against people) and ``score``
(faithfulness, hallucination rate, citations, abstention, risk-weighted score) - the
course's lab reports, on the project's own engine and event format.
"""

from __future__ import annotations

from streamproc.evaluate.cases import CaseResult, LabelledCase
from streamproc.evaluate.loaders import LoadError, load_cases
from streamproc.evaluate.runner import judge_cases

__all__ = ["CaseResult", "LabelledCase", "LoadError", "judge_cases", "load_cases"]
