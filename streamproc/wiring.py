"""Build the configured judge. New backends (e.g. "nli") register one builder here and
become a config value (``STREAMPROC_JUDGE__NAME``); heavy imports stay inside builders.
Every judge gets the work caps of ``settings.limits`` (``STREAMPROC_JUDGE__LIMITS__*``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from streamproc.config import JudgeSettings
from streamproc.judge.engine import ClaimJudge
from streamproc.judge.protocols import Judge, TextEmbedder

if TYPE_CHECKING:
    from streamproc.judge.nli.judge import NliJudge

__all__ = ["available_judges", "build_judge", "build_nli_judge"]


def _rules(settings: JudgeSettings) -> Judge:
    from streamproc.judge.rules.checker import RULES_VERSION, RulesChecker

    checker = RulesChecker(coverage_threshold=settings.coverage_threshold)
    return ClaimJudge(
        checker,
        granularity=settings.granularity,
        version=RULES_VERSION,
        thresholds=checker.thresholds,
        limits=settings.limits,
    )


def _nli(settings: JudgeSettings) -> Judge:
    return build_nli_judge(settings)


def build_nli_judge(
    settings: JudgeSettings, *, use_calibrator: bool = True, soft_rules: bool | None = None
) -> NliJudge:
    """Loads both models once (sha256-checked) and the calibrator ``settings`` names;
    thresholds: the NLI model's manifest. ``use_calibrator=False, soft_rules=True`` is
    how the calibrator's training data is collected."""
    from dataclasses import fields

    from streamproc.inference.calibrator_loader import (
        load_answer_calibrator,
        load_calibrator,
        resolve_answer_calibrator,
    )
    from streamproc.inference.embedding_cache import CachedEmbedder
    from streamproc.inference.loader import load_embedder, load_nli
    from streamproc.judge.nli.judge import NliJudge, NliThresholds
    from streamproc.judge.rules.confidence import ConfidenceThresholds

    scorer = load_nli(settings.inference)
    embedder: TextEmbedder = load_embedder(settings.inference)
    if settings.inference.embedding_cache_entries:
        embedder = CachedEmbedder(embedder, max_entries=settings.inference.embedding_cache_entries)
    known = {f.name for f in fields(NliThresholds)}
    defaults = {k: v for k, v in scorer.manifest.thresholds.items() if k in known}
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
        thresholds=NliThresholds(**defaults),
        confidence=ConfidenceThresholds(**settings.confidence.model_dump()),
        confidence_by_model={
            model: ConfidenceThresholds(**values.model_dump())
            for model, values in settings.confidence_by_model.items()
        },
        granularity=settings.granularity,
        top_k=settings.top_k,
        window_sentences=settings.window_sentences,
        model_thresholds=_output_edges(scorer.manifest.output),
        calibrator=calibrator,
        answer_calibrator=answer_calibrator,
        soft_rules=soft_rules,
        limits=settings.limits,
        decisive_entailment=settings.decisive_entailment,
        shortlist_sentences=settings.shortlist_sentences,
        composed_premise_regimes=settings.composed_premise_regimes,
        hard_negation_regimes=settings.hard_negation_regimes,
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
    """The judge ``settings`` asks for. Does no I/O for the rules judge."""
    try:
        builder = _BUILDERS[settings.name]
    except KeyError:
        raise ValueError(
            f"unknown judge {settings.name!r}; available: {', '.join(available_judges())}"
        ) from None
    return builder(settings)
