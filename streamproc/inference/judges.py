"""Judges from their settings: the one place a :class:`JudgeSettings` becomes a judge.

Every entry point - the worker, the gate, the offline evaluation, the benchmarks - builds
its judge here (through :mod:`streamproc.wiring`, which re-exports these), so one setting
means the same judge everywhere and the judge library never reads settings itself: this
module maps them onto the judge's own frozen options. New backends register one builder
and become a config value (``STREAMPROC_JUDGE__NAME``); heavy imports (ONNX Runtime,
model files) stay inside builders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from streamproc.inference.options import JudgeSettings
from streamproc.judge.engine import ClaimJudge
from streamproc.judge.limits import JudgeLimits
from streamproc.judge.protocols import Judge, PairScorer, TextEmbedder
from streamproc.judge.records.case_check import CaseChecker
from streamproc.rates.judge_accuracy import JudgeAccuracy, judge_accuracy, judge_key

if TYPE_CHECKING:
    from streamproc.inference.manifest import ModelManifest
    from streamproc.judge.nli.judge import NliJudge
    from streamproc.judge.nli.options import NliOptions

__all__ = [
    "available_judges",
    "build_judge",
    "build_nli_judge",
    "judge_key_of",
    "judge_limits",
    "measured_accuracy",
    "nli_options",
    "record_checks",
]


def judge_limits(settings: JudgeSettings) -> JudgeLimits:
    """The work caps ``STREAMPROC_JUDGE__LIMITS__*`` set, as the judge's own value."""
    return JudgeLimits(**settings.limits.model_dump())


def record_checks(settings: JudgeSettings) -> CaseChecker:
    """The record checks ``STREAMPROC_JUDGE__RECORDS__*`` configure: the locale, and the
    built-in lifecycles with a deployment's file on top. A bad file is a ValueError."""
    from streamproc.judge.records.lifecycles import load_lifecycles

    return CaseChecker(settings.records.locale, load_lifecycles(settings.records.lifecycles))


def _rules(settings: JudgeSettings) -> Judge:
    from streamproc.judge.rules.checker import RULES_VERSION, RulesChecker

    checker = RulesChecker(coverage_threshold=settings.coverage_threshold)
    return ClaimJudge(
        checker,
        granularity=settings.granularity,
        version=RULES_VERSION,
        thresholds=checker.thresholds,
        limits=judge_limits(settings),
        records=record_checks(settings),
    )


def _nli(settings: JudgeSettings) -> Judge:
    return build_nli_judge(settings)


def build_nli_judge(
    settings: JudgeSettings, *, use_calibrator: bool = True, soft_rules: bool | None = None
) -> NliJudge:
    """Loads both models once (sha256-checked) and the calibrator ``settings`` names;
    thresholds: the NLI model's manifest. ``use_calibrator=False, soft_rules=True`` is
    how the calibrator's training data is collected."""
    from streamproc.inference.calibrator_loader import (
        load_answer_calibrator,
        load_calibrator,
        resolve_answer_calibrator,
    )
    from streamproc.inference.embedding_cache import CachedEmbedder
    from streamproc.inference.loader import load_embedder, load_nli
    from streamproc.inference.pair_cache import CachedPairScorer
    from streamproc.judge.nli.judge import NliJudge

    loaded_nli = load_nli(settings.inference)
    scorer: PairScorer = loaded_nli
    if settings.inference.nli_cache_entries:
        scorer = CachedPairScorer(loaded_nli, max_entries=settings.inference.nli_cache_entries)
    embedder: TextEmbedder = load_embedder(settings.inference)
    if settings.inference.embedding_cache_entries:
        embedder = CachedEmbedder(embedder, max_entries=settings.inference.embedding_cache_entries)
    calibrator = None
    answer_calibrator = None
    if use_calibrator and settings.calibrator:
        calibrator = load_calibrator(settings.calibrator, settings.inference.models_dir)
        answer_name = resolve_answer_calibrator(
            settings.answer_calibrator, settings.calibrator, settings.inference.models_dir
        )
        if answer_name is not None:
            answer_calibrator = load_answer_calibrator(answer_name, settings.inference.models_dir)
    return NliJudge(
        scorer,
        embedder,
        nli_options(settings, loaded_nli.manifest, soft_rules=soft_rules),
        calibrator=calibrator,
        answer_calibrator=answer_calibrator,
        records=record_checks(settings),
    )


def nli_options(
    settings: JudgeSettings, manifest: ModelManifest, *, soft_rules: bool | None = None
) -> NliOptions:
    """The NLI judge's options: thresholds from the NLI model's manifest, the rest from
    ``STREAMPROC_JUDGE__*``."""
    from dataclasses import fields

    from streamproc.judge.nli.decision import NliThresholds
    from streamproc.judge.nli.options import NliOptions
    from streamproc.judge.rules.confidence import ConfidenceThresholds

    known = {f.name for f in fields(NliThresholds)}
    return NliOptions(
        thresholds=NliThresholds(**{k: v for k, v in manifest.thresholds.items() if k in known}),
        confidence=ConfidenceThresholds(**settings.confidence.model_dump()),
        confidence_by_model={
            model: ConfidenceThresholds(**values.model_dump())
            for model, values in settings.confidence_by_model.items()
        },
        granularity=settings.granularity,
        top_k=settings.top_k,
        window_sentences=settings.window_sentences,
        model_thresholds=_output_edges(manifest.output),
        soft_rules=soft_rules,
        limits=judge_limits(settings),
        decisive_entailment=settings.decisive_entailment,
        shortlist_sentences=settings.shortlist_sentences,
        composed_premise_regimes=frozenset(settings.composed_premise_regimes),
        hard_negation_regimes=frozenset(settings.hard_negation_regimes),
        document_claims=settings.document_claims,
        zero_length_hours=settings.zero_length_hours,
    )


def _output_edges(output: object) -> dict[str, float]:
    """The numeric knobs of how NLI logits are read (manifest ``[output]``)."""
    fields = ("entailment_above", "contradiction_above", "steepness")
    return {f"nli_{name}": float(getattr(output, name)) for name in fields if hasattr(output, name)}


_BUILDERS: Mapping[str, Callable[[JudgeSettings], Judge]] = MappingProxyType(
    {"rules": _rules, "nli": _nli}
)


def available_judges() -> tuple[str, ...]:
    """Judge names ``build_judge`` accepts."""
    return tuple(sorted(_BUILDERS))


def build_judge(settings: JudgeSettings) -> Judge:
    """The judge ``settings`` asks for, behind the language check unless
    ``language.supported`` is empty. Does no I/O for the rules judge."""
    try:
        builder = _BUILDERS[settings.name]
    except KeyError:
        raise ValueError(
            f"unknown judge {settings.name!r}; available: {', '.join(available_judges())}"
        ) from None
    judge = builder(settings)
    language = settings.language
    if not language.supported:
        return judge
    from streamproc.judge.language import LanguageCheckedJudge

    # Answers in a language the judge was not measured on are unverified, never judged.
    return LanguageCheckedJudge(
        judge,
        language.supported,
        language.min_letters,
        language.min_confidence,
        limits=judge_limits(settings),
    )


def judge_key_of(settings: JudgeSettings) -> str:
    """The key of the judge ``settings`` configure in the measured-accuracy table, its
    answer calibrator resolved (an ``auto`` setting reads the calibrator manifests)."""
    from streamproc.inference.calibrator_loader import resolve_answer_calibrator

    answer = None
    if settings.name == "nli":
        answer = resolve_answer_calibrator(
            settings.answer_calibrator, settings.calibrator, settings.inference.models_dir
        )
    return judge_key(settings.name, settings.calibrator, answer)


def measured_accuracy(settings: JudgeSettings) -> JudgeAccuracy | None:
    """The offline confusion counts of the judge ``settings`` build (None for a judge
    never measured): what the windows' corrected rate is computed with."""
    return judge_accuracy(judge_key_of(settings))
