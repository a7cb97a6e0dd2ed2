"""How the judge is built: which models, from where, how ONNX Runtime runs them, and the
judge's checks, limits and languages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from streamproc.options import OptionGroup

__all__ = [
    "ConfidenceSettings",
    "Granularity",
    "InferenceSettings",
    "JudgeSettings",
    "LanguageSettings",
    "LimitSettings",
    "RecordSettings",
    "Regime",
]

Granularity = Literal["sentence", "atomic"]
Regime = Literal["record", "question", "task", "case"]
"""What an answer is, known from the event: about a customer's case (records with fields,
tool results), over a record, a reply to a question, a task."""


class InferenceSettings(OptionGroup):
    """Which models the NLI judge loads, from where, and how ONNX Runtime runs them."""

    models_dir: Path | None = Field(
        default=None,
        description="Folder of model manifests; None = the repository's models/ folder.",
    )
    nli_model: str = "bge-small-verifier-v1-int8"
    embedding_model: str = Field(
        default="minilm-l6-v2-pt8",
        description="Sentence embedder for retrieval: all-MiniLM-L6-v2 in int8 with "
        "activations quantised per token, so texts are embedded in batches without a "
        "vector depending on its neighbours. minilm-l6-v2-dq8 is the same model quantised "
        "per call (one text per call, about 1.5x slower); minilm-l6-v2-int8 the package's "
        "own graph (fp32 matrix products); "
        "minilm-l3-embedder-dq8 a 3-layer student at about half the cost, with its own "
        "calibrator (verdict-calibrator-l3-embedder-v1; a calibrator names the embedder "
        "whose similarities it learned and refuses another).",
    )
    intra_op_threads: int = Field(default=2, ge=1, description="ONNX Runtime intra-op threads.")
    inter_op_threads: int = Field(default=1, ge=1, description="ONNX Runtime inter-op threads.")
    nli_batch_size: int = Field(
        default=1,
        ge=1,
        description="Pairs per NLI inference call. Used only for a model whose manifest "
        "declares batch_invariant; any other runs one pair per call (the int8 graphs "
        "quantise activations per call, so a pair's logits would move with its batch "
        "neighbours and a verdict could not be replayed alone).",
    )
    nli_parallel_calls: int = Field(
        default=2,
        ge=1,
        description="NLI calls run at once, each on intra_op_threads / nli_parallel_calls "
        "threads (at least 1). Single-pair calls are too small for ONNX Runtime to spread "
        "over two threads, and batching them would make a pair's score depend on its "
        "neighbours; two one-thread calls side by side score 1.5x the pairs/s of one "
        "two-thread call and keep each pair's score its own (BENCHMARKS.md).",
    )
    embedding_batch_size: int = Field(
        default=8,
        ge=1,
        description="Texts per embedding call (length-sorted), for a model whose manifest "
        "declares batch_invariant (the default minilm-l6-v2-pt8, the float "
        "minilm-l6-v2-int8); any other embeds one text per call. 8 embeds about 1.5x the "
        "texts/s of one per call on 2 cores; larger batches were slower (BENCHMARKS.md).",
    )
    embedding_batch_tokens: int | None = Field(
        default=192,
        ge=1,
        description="Most padded tokens per batched embedding call: length-sorted texts "
        "are grouped while (texts x the longest) stays within it, so short texts share a "
        "call and a long one runs alone (batching pays for short texts, where a call's "
        "fixed cost dominates, and not for long ones). None: only embedding_batch_size "
        "bounds a call. A vector never depends on the grouping (batch-invariant models "
        "only).",
    )
    embedding_parallel_calls: int = Field(
        default=2,
        ge=1,
        description="Embedding calls run at once, each on intra_op_threads / this threads "
        "(as nli_parallel_calls).",
    )
    embedding_cache_entries: int = Field(
        default=20_000,
        ge=0,
        description="Texts whose vectors are kept (LRU) across batches; 0 turns the cache off. "
        "Exact: the loader batches only a batch-invariant embedder, so a vector never "
        "depends on its batch.",
    )
    nli_cache_entries: int = Field(
        default=20_000,
        ge=0,
        description="(premise, claim) pairs whose NLI scores are kept (LRU) across "
        "batches; 0 turns the cache off. Exact: the loader batches only a batch-invariant "
        "model, so a score never depends on its batch. A streamed answer's sentence "
        "checks read the sentences before them again at no model cost.",
    )


class RecordSettings(OptionGroup):
    """How the record checks read a case: the locale amounts and dates are written in,
    and the lifecycles of record states."""

    locale: str = Field(
        default="en_US",
        description="Locale (Babel, e.g. en_US, en_GB, de_DE) in which an ambiguous amount "
        "('1,200' / '1.200') or numeric date ('03/04/2026') is read; unambiguous forms read "
        "in any.",
    )
    lifecycles: Path | None = Field(
        default=None,
        description="A TOML file of record-state lifecycles that adds to or replaces the "
        "built-in ones, a whole lifecycle at a time (docs/records.md).",
    )

    @model_validator(mode="after")
    def _known_locale(self) -> RecordSettings:
        from babel import Locale, UnknownLocaleError

        try:
            Locale.parse(self.locale)
        except (UnknownLocaleError, ValueError, TypeError):
            raise ValueError(f"unknown locale {self.locale!r} (e.g. en_US, de_DE)") from None
        if self.lifecycles is not None and not self.lifecycles.is_file():
            raise ValueError(f"lifecycles file {self.lifecycles} does not exist")
        return self


class LimitSettings(OptionGroup):
    """Caps on the work one answer may cost; a cap hit is named on the verdict and the
    claims left out are listed unchecked, never dropped."""

    max_claims: int = Field(default=64, ge=1, description="Claims checked per answer.")
    max_evidence_units: int = Field(
        default=400, ge=1, description="Evidence units (sentences, fields) per answer."
    )
    max_claim_chars: int = Field(
        default=1000, ge=20, description="A longer claim is not checked (LIMIT_CLAIM_CHARS)."
    )
    max_unit_chars: int = Field(
        default=2000, ge=20, description="A longer evidence unit is cut to this length."
    )


class ConfidenceSettings(OptionGroup):
    """Token-confidence thresholds (level 1) for one answering LLM."""

    cut_mean: float = Field(default=0.5, ge=0, le=1, description="Cut a sentence below this.")
    shaky_p: float = Field(default=0.2, ge=0, le=1, description="A token below this is a guess.")
    low_mean: float = Field(default=0.6, ge=0, le=1, description="Mark LOW below this mean.")
    low_share: float = Field(
        default=0.25, ge=0, le=1, description="Mark LOW above this share of guessed tokens."
    )


class LanguageSettings(OptionGroup):
    """Which answer languages the judge was measured on; others are ``unverified``
    (``LANGUAGE_NOT_SUPPORTED``), never supported. Detected with py3langid."""

    supported: tuple[str, ...] = Field(
        default=("en",),
        description="ISO 639-1 codes the judge's models and rules were measured on. Empty: "
        "detection off, every answer is judged.",
    )
    min_letters: int = Field(
        default=40,
        ge=1,
        description="Shorter answers (in letters, once citations, numbers and URLs are "
        "taken out; a Han, kana or Hangul character counts two) are judged without "
        "detection: too short to tell a language reliably.",
    )
    min_confidence: float = Field(
        default=0.99,
        gt=0,
        le=1,
        description="An answer is refused only when it is this probably in none of the "
        "supported languages (1 - their summed probability). 0.99: no English answer of "
        "the dev sets refused, every non-English test answer caught (EVALUATION.md).",
    )


class JudgeSettings(OptionGroup):
    """Which judge decides, and its thresholds."""

    name: Literal["rules", "nli"] = "nli"
    calibrator: str | None = Field(
        default="verdict-calibrator-verifier-v11",
        description="Verdict calibrator in models/calibrators/ (NLI judge); empty or None "
        "= the NLI judge's own rules decide.",
    )
    answer_calibrator: str | None = Field(
        default="auto",
        description="Answer calibrator in models/calibrators/ (NLI judge with a claim "
        "calibrator): decides whether an answer is hallucinated from its claims' risks and "
        "how many were tested. 'auto': the one fitted on the claim calibrator's risks, if "
        "any; a name: that one (refused if fitted on another claim calibrator); empty or "
        "None: any claim not supported flags the answer.",
    )
    granularity: Granularity = "atomic"
    coverage_threshold: float = Field(default=0.75, gt=0, le=1)
    top_k: int = Field(default=4, ge=1, description="Evidence candidates per claim for NLI.")
    window_sentences: int = Field(
        default=2, ge=1, description="Adjacent evidence sentences joined into one window."
    )
    decisive_entailment: float | None = Field(
        default=0.5,
        gt=0,
        le=1,
        description="NLI asks a claim's candidates in rank order, one per round, and stops "
        "at the first that entails it at least this much; the rest are not scored. None: "
        "every candidate is scored. 0.5 changed no verdict on the report split (EVALUATION.md).",
    )
    shortlist_sentences: int | None = Field(
        default=10,
        ge=1,
        description="Embed and rank only each claim's best this many evidence sentences by "
        "word overlap (longer evidence only). None: every sentence is embedded.",
    )
    composed_premise_regimes: tuple[Regime, ...] = Field(
        default=("task",),
        description="Answer regimes (record / question / task) whose claims, when no single "
        "evidence unit entails them, are also checked against their top units' sentences "
        "read together in document order (a summary sentence fusing several). Empty: never.",
    )
    hard_negation_regimes: tuple[Regime, ...] = Field(
        default=("question",),
        description="Regimes where the closest evidence sentence saying the opposite settles "
        "a claim as contradicted; elsewhere the flip is one signal for the calibrator "
        "(precision of the hard verdict on the calibrate split: question 26/31, record "
        "1/6, task 1/6; EVALUATION.md).",
    )
    zero_length_hours: Literal["closed", "unknown"] = Field(
        default="closed",
        description="How a record's day written '0:0-0:0' (opens when it closes) is read: "
        "'closed' where some other day has real hours (Yelp's closed Monday; chosen on the "
        "calibrate split, EVALUATION.md), 'unknown' = that day is never judged.",
    )
    document_claims: bool = Field(
        default=True,
        description="Recognise sentences about the document: 'the article discusses X' is "
        "checked for topic, 'the author argues that Y' is read as Y (false: read as written).",
    )
    inference: InferenceSettings = InferenceSettings()
    records: RecordSettings = RecordSettings()
    limits: LimitSettings = LimitSettings()
    language: LanguageSettings = LanguageSettings()
    confidence: ConfidenceSettings = ConfidenceSettings()
    confidence_by_model: dict[str, ConfidenceSettings] = Field(
        default_factory=dict,
        description="Per answering-LLM overrides, by the event's `model` field (JSON).",
    )
