"""The NLI judge's identity (``JudgeInfo``): its version, granularity, every threshold and
option that changes a verdict, and the models and calibrators it runs with (name and
hash), so that a verdict can be replayed from its audit record."""

from __future__ import annotations

from collections.abc import Collection

from streamproc.contracts.events import JudgeInfo
from streamproc.judge.decision.answer import AnswerCalibrator
from streamproc.judge.decision.calibrator import ALL_REGIMES, VerdictCalibrator
from streamproc.judge.nli.options import NliOptions
from streamproc.judge.nli.premises import COMPOSED_WORDS
from streamproc.judge.protocols import PairScorer, TextEmbedder
from streamproc.judge.records.case_check import CaseChecker

__all__ = ["judge_info"]


def judge_info(
    version: str,
    options: NliOptions,
    scorer: PairScorer,
    embedder: TextEmbedder,
    records: CaseChecker,
    calibrator: VerdictCalibrator | None,
    answer_calibrator: AnswerCalibrator | None,
) -> JudgeInfo:
    """The info of an NLI judge of ``version`` built with these options and components."""
    info = JudgeInfo(
        name="nli",
        version=version,
        granularity=options.granularity,
        thresholds={
            **options.thresholds.as_dict(),
            **options.confidence.as_dict(),
            **dict(options.model_thresholds),
            "top_k": float(options.top_k),
            "window_sentences": float(options.window_sentences),
            **_optional("decisive_entailment", options.decisive_entailment),
            **_optional("shortlist_sentences", options.shortlist_sentences),
            **_regime_flags("composed_premise", frozenset(options.composed_premise_regimes)),
            **_regime_flags("hard_negation", frozenset(options.hard_negation_regimes)),
            "document_claims": float(options.document_claims),
            "zero_length_hours_closed": float(options.zero_length_hours == "closed"),
            **_optional(
                "composed_premise_words",
                COMPOSED_WORDS if options.composed_premise_regimes else None,
            ),
        },
        models={scorer.model_name: scorer.sha256, embedder.model_name: embedder.sha256},
        options=records.describe(),
    )
    if calibrator is not None:
        info = info.model_copy(
            update={
                "thresholds": {**info.thresholds, **calibrator.describe()},
                "models": {**info.models, calibrator.name: calibrator.sha256},
            }
        )
    if answer_calibrator is not None:
        info = info.model_copy(
            update={
                "thresholds": {**info.thresholds, **answer_calibrator.describe()},
                "models": {
                    **info.models,
                    answer_calibrator.name: answer_calibrator.sha256,
                },
            }
        )
    return info


def _regime_flags(name: str, regimes: Collection[str]) -> dict[str, float]:
    """``{name}_{regime}``: 1.0 where the behaviour is on, for every regime."""
    return {f"{name}_{regime}": float(regime in regimes) for regime in ALL_REGIMES}


def _optional(name: str, value: float | None) -> dict[str, float]:
    """A threshold recorded on the judge's info only when it is set."""
    return {} if value is None else {name: float(value)}
