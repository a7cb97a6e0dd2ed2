"""The one typed settings object.

Every knob of the worker, the demo and the offline tools lives here and is read from
environment variables with the ``STREAMPROC_`` prefix (nested groups use ``__``, e.g.
``STREAMPROC_WINDOW__SIZE_S=30``). Nothing reads the environment anywhere else.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from streamproc._env_names import (
    UnknownVariable,
    UnknownVariablesError,
    Variable,
    unknown_variables,
    variables,
)

__all__ = [
    "NOT_SETTINGS",
    "AlertSettings",
    "AuditSettings",
    "BurnRateWindow",
    "ConfidenceSettings",
    "HoppingWindow",
    "HttpLimitSettings",
    "InferenceSettings",
    "JudgeSettings",
    "KafkaSecurity",
    "LabelSettings",
    "LimitSettings",
    "MetricsSettings",
    "RecordSettings",
    "ReviewSettings",
    "SampleRate",
    "Settings",
    "TelemetrySettings",
    "TopicSettings",
    "UnknownVariable",
    "UnknownVariablesError",
    "WindowSettings",
    "WorkerSettings",
    "setting_variables",
    "unknown_setting_variables",
]

Granularity = Literal["sentence", "atomic"]
Regime = Literal["record", "question", "task", "case"]
"""What an answer is, known from the event: about a customer's case (records with fields,
tool results), over a record, a reply to a question, a task."""


class _Group(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TopicSettings(_Group):
    """Topic names and sizes; topics are created with these at start-up."""

    answers: str = "assistant.answers"
    verdicts: str = "groundedness.verdicts"
    flags: str = "groundedness.flags"
    aggregates: str = "groundedness.aggregates"
    dead_letter: str = "groundedness.dead-letter"
    outcomes: str = "streamproc.answer-outcomes"
    partitions: int = Field(default=6, ge=1)
    replication_factor: int = Field(default=1, ge=1)
    output_max_message_bytes: int = Field(
        default=1024 * 1024,
        ge=64 * 1024,
        description="max.message.bytes of the verdict, flag, outcome and aggregate topics; "
        "a larger verdict is trimmed (signals, then claims) or dead-lettered.",
    )
    dead_letter_retention_ms: int = Field(
        default=7 * 24 * 3600 * 1000,
        ge=-1,
        description="retention.ms of the dead-letter topic, which holds raw evidence "
        "(personal data): keep it as short as replays allow; -1 keeps it forever.",
    )


class HoppingWindow(_Group):
    """One hopping window size: a window of ``size_s`` ending every ``hop_s`` (both whole
    milliseconds; ``hop_s`` at most ``size_s``)."""

    size_s: float = Field(gt=0)
    hop_s: float = Field(gt=0)


class WindowSettings(_Group):
    """Event-time windows per (tenant, assistant, model), aligned to the epoch.

    All sizes are built from panes of the largest size that divides every window size
    and hop (1 min by default): the panes are the changelogged state, a window's
    aggregate is the sum of its panes when it closes.
    """

    size_s: float = Field(default=60.0, gt=0, description="The tumbling window's size.")
    hopping: list[HoppingWindow] = Field(
        default_factory=lambda: [
            HoppingWindow(size_s=300, hop_s=60),
            HoppingWindow(size_s=3600, hop_s=300),
        ],
        description="Hopping windows, published to ``hopping_topic``; [] for none.",
    )
    grace_s: float = Field(
        default=10.0,
        ge=0,
        description="Event-time lateness accepted before a window first closes: a key's "
        "window closes once that key's own latest event time passes its end + grace.",
    )
    idle_close_s: float = Field(
        default=5.0,
        gt=0,
        description="Wall-clock seconds without new events of a key after which its windows "
        "whose end + grace has passed close anyway (replayed or sparse traffic).",
    )
    retain_closed_s: float = Field(
        default=3600.0,
        ge=0,
        description="Allowed lateness after a window closed: an event this much behind its "
        "key's latest event time (or after the key was quiet this long on the wall clock) "
        "still revises its window (re-emitted with revision + 1); a later one goes to "
        "``late_topic``.",
    )
    tick_s: float = Field(default=1.0, gt=0, description="How often closable windows are checked.")
    examples: int = Field(
        default=5,
        ge=0,
        le=100,
        description="Answer ids of hallucinated answers carried per aggregate (the audit "
        "trail's key), at most.",
    )
    late_topic: str = Field(
        default="groundedness.late-events",
        description="Outcomes too late for any window (past ``retain_closed_s``), as judged.",
    )
    hopping_topic: str = Field(
        default="groundedness.hopping-aggregates",
        description="Aggregates of the hopping windows; the tumbling ones go to "
        "``topics.aggregates``.",
    )

    @model_validator(mode="after")
    def _panes_fit(self) -> WindowSettings:
        sizes = [self.size_s] + [s for w in self.hopping for s in (w.size_s, w.hop_s)]
        millis = [round(size * 1000) for size in sizes]
        if any(
            ms <= 0 or abs(ms - size * 1000) > 1e-6 for ms, size in zip(millis, sizes, strict=True)
        ):
            raise ValueError(f"window sizes and hops are whole milliseconds, not {sizes}")
        for window in self.hopping:
            if window.hop_s > window.size_s:
                raise ValueError(f"a hop longer than its window leaves gaps: {window}")
        pane = math.gcd(*millis)
        if max(millis) // pane > 3600:
            raise ValueError(
                f"the longest window is {max(millis) // pane} panes of {pane / 1000:g} s "
                "(at most 3600): choose sizes with a larger common divisor"
            )
        return self


class InferenceSettings(_Group):
    """Which models the NLI judge loads, from where, and how ONNX Runtime runs them."""

    models_dir: Path | None = Field(
        default=None,
        description="Folder of model manifests; None = the repository's models/ folder.",
    )
    nli_model: str = "minilm-verifier-int8"
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


class RecordSettings(_Group):
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


class LimitSettings(_Group):
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


class ConfidenceSettings(_Group):
    """Token-confidence thresholds (level 1) for one answering LLM."""

    cut_mean: float = Field(default=0.5, ge=0, le=1, description="Cut a sentence below this.")
    shaky_p: float = Field(default=0.2, ge=0, le=1, description="A token below this is a guess.")
    low_mean: float = Field(default=0.6, ge=0, le=1, description="Mark LOW below this mean.")
    low_share: float = Field(
        default=0.25, ge=0, le=1, description="Mark LOW above this share of guessed tokens."
    )


class LanguageSettings(_Group):
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


class JudgeSettings(_Group):
    """Which judge decides, and its thresholds."""

    name: Literal["rules", "nli"] = "nli"
    calibrator: str | None = Field(
        default="verdict-calibrator-verifier-v3",
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


class WorkerSettings(_Group):
    """How a worker batches and runs the judge."""

    batch_max: int = Field(default=32, ge=1, description="Most answers judged in one batch.")
    judge_process: bool = Field(
        default=True,
        description="Judge in a process of its own (spawned at start; the worker exits with "
        "code 7 if it dies) rather than a thread sharing the worker's GIL with its Kafka "
        "clients.",
    )
    batch_wait_s: float = Field(
        default=0.05, gt=0, description="Longest wait to fill a batch before judging it."
    )
    max_event_bytes: int = Field(
        default=512 * 1024, ge=1, description="Larger answer events go to the dead-letter topic."
    )
    rebalance_timeout_s: float = Field(
        default=30.0, gt=0, description="How long the group waits for members to rejoin."
    )
    session_timeout_s: float = Field(
        default=10.0, gt=0, description="A silent worker is dropped from the group after this."
    )
    judge_deadline_s: float = Field(
        default=10.0,
        gt=0,
        description="An answer whose judging takes longer is abandoned and dead-lettered "
        "(judge_timeout); the rest of its batch is judged.",
    )
    event_time_max_future_s: float = Field(
        default=300.0, ge=0, description="occurred_at further ahead of the clock is rejected."
    )
    event_time_max_past_s: float = Field(
        default=7 * 24 * 3600.0, ge=0, description="Older occurred_at is rejected."
    )
    exactly_once: bool = Field(
        default=True,
        description="Outputs and input offsets commit in one Kafka transaction (needs a "
        "broker with transactions; the Tansu demo broker runs at-least-once).",
    )
    instance_id: str | None = Field(
        default=None,
        description="Stable name of this worker slot (e.g. the pod name); its transactional "
        "id, so a restarted worker fences and aborts its predecessor's open transaction. "
        "Default: the host name and process id.",
    )
    transaction_timeout_s: float = Field(
        default=30.0, gt=0, description="The broker aborts a dead worker's transaction after this."
    )
    publish_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="A batch whose outputs the broker has not acknowledged by then stops the "
        "worker (exit code 3); its inputs are not committed.",
    )
    stall_after_s: float = Field(
        default=30.0,
        gt=0,
        description="A worker with lag but no progress this long logs 'stalled' and reports "
        "itself not live.",
    )
    stall_exit_s: float | None = Field(
        default=120.0,
        gt=0,
        description="A worker not live this long exits (code 6) so that any orchestrator "
        "restarts it, probes or not; None = only report (/livez, worker_stalled).",
    )
    health_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="Serve /livez and /readyz on this port (0 = any free port); None = off.",
    )
    dedup_horizon_s: float = Field(
        default=3600.0,
        ge=0,
        description="A (tenant, event_id) judged within this many seconds is not judged "
        "again: the repeat is acknowledged, counted and dropped. 0 = only within a batch.",
    )
    dedup_max_entries: int = Field(
        default=100_000,
        ge=1,
        description="Most (tenant, event_id) marks kept per answers partition (oldest "
        "forgotten first); changelogged to <app_id>.judge-dedup-changelog.",
    )


class KafkaSecurity(_Group):
    """How every Kafka client of streamproc authenticates and encrypts."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = Field(default=None, description="CA bundle (PEM).")
    ssl_certfile: Path | None = Field(default=None, description="Client certificate (mTLS).")
    ssl_keyfile: Path | None = None
    ssl_check_hostname: bool = True


class BurnRateWindow(_Group):
    """One multi-window burn-rate condition (SRE workbook): the long and the short window
    must both burn the error budget faster than ``factor``."""

    long_s: float = Field(gt=0)
    short_s: float = Field(gt=0)
    factor: float = Field(gt=0)


class AlertSettings(_Group):
    """Hallucination-rate objectives and the burn-rate policy that pages on them."""

    objective: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="Most hallucinated share of answered answers allowed, per assistant.",
    )
    page: list[BurnRateWindow] = Field(
        default_factory=lambda: [
            BurnRateWindow(long_s=3600, short_s=300, factor=14.4),
            BurnRateWindow(long_s=6 * 3600, short_s=1800, factor=6.0),
        ],
        description="Fast burns that page.",
    )
    ticket: list[BurnRateWindow] = Field(
        default_factory=lambda: [
            BurnRateWindow(long_s=3 * 24 * 3600, short_s=6 * 3600, factor=1.0),
        ],
        description="Slow burns that open a ticket.",
    )
    min_answered: int = Field(
        default=30,
        ge=1,
        description="An alert needs at least this many answered answers in its long window.",
    )
    require_wilson_above_objective: bool = Field(
        default=True,
        description="An alert also needs the Wilson 95 % lower bound of the long window's "
        "rate above the objective (no page on a tiny unlucky sample).",
    )
    topic: str = "groundedness.alerts"
    resolve_after_s: float = Field(
        default=300.0,
        gt=0,
        description="An alert resolves once none of its conditions has held for this long "
        "(event time): one firing and one resolved event per incident.",
    )
    max_example_ids: int = Field(
        default=5, ge=0, description="Flagged answer ids carried by an alert (to the audit)."
    )
    inhibit_ticket_while_paging: bool = Field(
        default=True, description="No ticket opens for a key while its page fires."
    )


class MetricsSettings(_Group):
    """The Prometheus endpoint of a worker."""

    host: str = Field(default="127.0.0.1", description="Address /metrics binds to.")
    port: int | None = Field(
        default=None, ge=0, le=65535, description="None: no metrics endpoint; 0: any free port."
    )


class TelemetrySettings(_Group):
    """OpenTelemetry traces and evaluation log records (adapters/telemetry); metrics are
    Prometheus (``MetricsSettings``)."""

    exporter: Literal["none", "otlp-grpc", "otlp-http", "console"] = Field(
        default="none",
        description="Where spans and log records go; 'none' installs no SDK (costs nothing).",
    )
    endpoint: str | None = Field(
        default=None,
        description="OTLP endpoint (e.g. http://otel-collector:4317 for gRPC, "
        "http://otel-collector:4318 for HTTP); None: the exporter's default / OTEL_* env.",
    )
    service_name: str = "streamproc"
    instance_id: str | None = Field(
        default=None, description="service.instance.id; None: host name and process id."
    )
    sample_ratio: float = Field(
        default=1.0, ge=0, le=1, description="Share of new root traces kept (parent-based)."
    )
    stage_spans: bool = Field(
        default=True, description="A child span per judging stage under each answer's span."
    )


class AuditSettings(_Group):
    """The audit trail: one record per answer on a compacted topic, stored by the sink."""

    enabled: bool = Field(default=True, description="Publish an audit record per answer.")
    topic: str = "streamproc.audit"
    store_url: str = Field(
        default="sqlite:///streamproc-audit.db",
        description="SQLAlchemy URL of the audit store: sqlite:///path (embedded default) "
        "or postgresql+psycopg://user:pass@host/db.",
    )
    retention_days: int = Field(
        default=400,
        ge=1,
        description="Audit records older than this are purged by 'audit purge --expired' "
        "(default above the 6 months record-keeping rules ask for).",
    )
    checkpoint_every: int = Field(
        default=1000, ge=1, description="Records between chain-head checkpoints per partition."
    )
    checkpoint_interval_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds at most between a partition's new links and a signed checkpoint "
        "that anchors them (also every checkpoint_every records).",
    )
    checkpoint_topic: str = Field(
        default="",
        description="Where the sink publishes signed chain-head checkpoints, apart from the "
        "store (empty: '<topic>.checkpoints').",
    )
    signing_key_file: Path | None = Field(
        default=None,
        description="Ed25519 private key (PEM) that signs checkpoints and purges "
        "('streamproc audit keygen'); kept outside the store. Required by 'audit purge'.",
    )
    verify_key_file: Path | None = Field(
        default=None,
        description="Ed25519 public key (PEM) 'audit verify' checks signatures with.",
    )

    @model_validator(mode="after")
    def _checkpoints_beside_the_audit_topic(self) -> AuditSettings:
        if not self.checkpoint_topic:
            # Frozen: set once, while validating.
            object.__setattr__(self, "checkpoint_topic", f"{self.topic}.checkpoints")
        return self

    log_texts: bool = Field(
        default=False,
        description="Allow evidence, question and answer text in logs (off: never logged).",
    )


class SampleRate(_Group):
    """The share of passed answers sampled into review for the answers this names; a
    field left out matches every value. The most specific matching entry wins."""

    tenant: str | None = None
    assistant_id: str | None = None
    task_type: str | None = None
    rate: float = Field(ge=0, le=1)


class HttpLimitSettings(_Group):
    """What one HTTP connection may hold of a server (the gate, the review page): each
    phase of a request is timed, and open connections are capped below the file limit."""

    header_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description="A request head (request line and headers) must arrive within this "
        "many seconds of the connection opening or of its first byte; else 408 and close.",
    )
    body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="A request body must arrive within this many seconds of its head; "
        "else 408 and close.",
    )
    idle_timeout_s: float = Field(
        default=75.0,
        gt=0,
        le=3600,
        description="A keep-alive connection idle between requests this long is closed.",
    )
    max_connections: int = Field(
        default=512,
        ge=1,
        le=1_000_000,
        description="Open connections at most (lowered at start to fit the open-file "
        "limit). Beyond it the oldest connection not in a request is closed, or, when "
        "all are in one, the new connection gets 503 and is closed.",
    )

    @model_validator(mode="after")
    def _header_within_idle(self) -> HttpLimitSettings:
        if self.header_timeout_s > self.idle_timeout_s:
            raise ValueError("header_timeout_s must not exceed idle_timeout_s")
        return self


class ReviewSettings(_Group):
    """The review queue and the review page (``streamproc review serve``)."""

    enabled: bool = Field(
        default=True,
        description="Publish a review item for every flagged answer and a sample of passed ones.",
    )
    queue_topic: str = "groundedness.review-queue"
    labels_topic: str = "groundedness.labels"
    sample_rate: float = Field(
        default=0.02,
        ge=0,
        le=1,
        description="Share of passed answers sampled into review (flagged ones: all).",
    )
    sample_rates: list[SampleRate] = Field(
        default_factory=list,
        description="Per tenant / assistant / task type overrides of sample_rate (JSON list).",
    )
    seed: int = Field(
        default=0, description="Seeds the sample: the same answer id is drawn the same way."
    )
    tokens_file: Path | None = Field(
        default=None,
        description="Reviewer tokens (TOML: [[reviewer]] name, tenants, token_sha256). "
        "Without it the page refuses every request and labels are not checked by tenant.",
    )
    host: str = Field(default="127.0.0.1", description="Address the review page binds to.")
    port: int = Field(default=8780, ge=0, le=65535)
    secure_cookies: bool = Field(
        default=False,
        description="Mark the session cookie Secure although the page is reached over HTTP: "
        "set it behind a TLS-terminating proxy or ingress.",
    )
    trust_forwarded_proto: bool = Field(
        default=False,
        description="Believe a request's X-Forwarded-Proto header: 'https' there marks the "
        "session cookie Secure. Set it only behind a proxy that overwrites the header.",
    )
    tls_cert: Path | None = Field(
        default=None, description="PEM certificate: serve the review page over HTTPS."
    )
    tls_key: Path | None = Field(default=None, description="PEM private key of tls_cert.")
    session_max_age_s: int = Field(
        default=12 * 3600,
        ge=60,
        description="A review page session ends this long after sign-in (sign-out ends it "
        "at once).",
    )
    store_url: str = Field(
        default="sqlite:///streamproc-review.db",
        description="SQLAlchemy URL of the review page's queue (items read from the queue "
        "topic, who labelled what).",
    )
    show_judge_verdict: bool = Field(
        default=False,
        description="Show the judge's verdict and a plain reason beside each claim on the "
        "review page. Off: reviewers label without seeing them, so the verdicts cannot "
        "anchor the labels that measure the judge.",
    )
    labels_per_item: int = Field(default=1, ge=1, description="Reviewers asked for every item.")
    second_label_share: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="Share of items (seeded) asked of one reviewer more than labels_per_item: "
        "the doubly labelled items Cohen's kappa is measured on.",
    )
    http: HttpLimitSettings = Field(
        default_factory=HttpLimitSettings,
        description="Timeouts and the connection cap of the review page.",
    )


class LabelSettings(_Group):
    """The labels loop (labels joined with review items), the accuracy loop (the judge's
    live accuracy per cell) and what reads their results."""

    enabled: bool = Field(
        default=True, description="Run the labels and accuracy loops in the worker."
    )
    deltas_topic: str = "streamproc.label-deltas"
    accuracy_topic: str = "groundedness.judge-accuracy"
    wait_for_outcome_s: float = Field(
        default=6 * 3600.0,
        gt=0,
        description="How long a label waits for its answer's review item before it goes to "
        "the dead-letter topic (reason unknown_answer).",
    )
    retain_days: int = Field(
        default=90, ge=1, description="How long an answer's review item is kept for its labels."
    )
    min_labels: int = Field(
        default=30,
        ge=1,
        description="Labelled answers a cell needs (some hallucinated, some faithful) before "
        "the windows' corrected rate uses its live accuracy instead of the offline one.",
    )
    drift_min_labels: int = Field(
        default=30, ge=1, description="Labelled answers before drift is judged."
    )
    drift_recent_days: int = Field(
        default=7, ge=1, description="The recent period compared with the baseline."
    )
    drift_baseline_days: int = Field(
        default=28, ge=1, description="The trailing baseline before the recent period."
    )
    drift_z: float = Field(
        default=1.645, gt=0, description="One-sided z of 'significantly below' (95 %)."
    )
    target_precision: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="Precision 'streamproc calibrate --from-labels' fits answer thresholds for.",
    )


FailurePolicy = Literal["fail-open", "fail-closed"]
"""As :data:`streamproc.contracts.gate_events.FailurePolicy` (the settings import no contract)."""


KafkaReplyMode = Literal["in-transaction", "immediate"]
"""How the gate sends a Kafka reply (``gate.kafka_reply``)."""
_KAFKA_REPLY_RESERVE_MS: dict[KafkaReplyMode, float] = {"in-transaction": 150.0, "immediate": 50.0}


class TenantPolicy(_Group):
    """One tenant's failure policy (``gate.policies``)."""

    tenant: str = Field(min_length=1)
    policy: FailurePolicy


class GateSettings(_Group):
    """The inline gate (``streamproc gate``): HTTP ``POST /v1/check`` and Kafka request /
    reply over the same judge; its verdicts are published as the worker's are."""

    host: str = Field(default="127.0.0.1", description="Address the gate binds to.")
    port: int = Field(default=8790, ge=0, le=65535)
    default_budget_ms: float = Field(
        default=500.0, gt=0, description="The budget of a request without X-Budget-Ms."
    )
    max_budget_ms: float = Field(
        default=30_000.0, gt=0, description="Larger X-Budget-Ms values are cut to this."
    )
    policy: FailurePolicy = Field(
        default="fail-open",
        description="What an answer that cannot be checked in time gets: fail-open passes "
        "it (verified false), fail-closed withholds it.",
    )
    policies: list[TenantPolicy] = Field(
        default_factory=list, description="Per-tenant overrides of policy (JSON list)."
    )
    batch_max: int = Field(
        default=8, ge=1, description="Most answers judged together in one judge call."
    )
    max_pending_factor: int = Field(
        default=5,
        ge=1,
        description="Requests held (queued or being judged) at most this many times "
        "batch_max; beyond, a request is answered at once by policy (OVERLOADED).",
    )
    settle_reserve_ms: float = Field(
        default=50.0,
        ge=0,
        description="Time kept back from each budget to answer with the cheap checks "
        "(token confidence, records, values) when the model stage has not finished "
        "(at 25 ms, RAGTruth-like answers settled under load replied up to 12 ms late).",
    )
    kafka_reply: KafkaReplyMode = Field(
        default="in-transaction",
        description="Kafka request / reply: in-transaction sends each reply in the "
        "transaction of its verdict (a caller never sees a reply whose verdict was not "
        "published); immediate sends it as soon as it is decided, apart from the "
        "transaction (faster; should the gate fail before the verdict's transaction "
        "commits, the request is decided again and the verdict published may differ "
        "from the reply the caller acted on).",
    )
    kafka_reply_reserve_ms: float | None = Field(
        default=None,
        ge=0,
        description="Kafka request / reply: time kept back from each request's budget for "
        "its reply's way to the caller (the decision is made within the budget less this; "
        "the reply's budget_ms says so). Unset: 150 for in-transaction replies (a decided "
        "reply waits for the transaction under way, then goes in the next), 50 for "
        "immediate ones (BENCHMARKS.md).",
    )
    publish: bool = Field(
        default=True,
        description="Publish each gated answer's verdict, flag, outcome and audit record "
        "(as the worker does). False: a gate with no Kafka at all, for trying it.",
    )
    requests_topic: str = Field(
        default="groundedness.gate-requests",
        description="Kafka request / reply: requests read here, replies sent to each "
        "request's reply-topic header.",
    )
    replies_topic: str = Field(
        default="groundedness.gate-replies",
        description="Kafka request / reply: the default reply topic, created with the "
        "gate's topics; a caller may name its own in each request's reply-topic header.",
    )
    kafka_requests: bool = Field(
        default=True, description="Serve the Kafka request topic too (needs publish)."
    )
    tokens_file: Path | None = Field(
        default=None,
        description="Caller tokens (TOML: [[caller]] name, tenants, token_sha256). Without "
        "it every request is refused (401).",
    )
    reply_topic_pattern: str = Field(
        default=r"gate\.replies\..+",
        description="Kafka request / reply: a reply-topic header must match this regular "
        "expression in full (or be replies_topic); a topic streamproc reads or writes is "
        "refused whatever it matches.",
    )
    kafka_auth: Literal["token", "none"] = Field(
        default="token",
        description="Kafka request / reply: 'token' needs an 'authorization: Bearer <token>' "
        "header naming a caller of tokens_file whose tenants hold the answer's tenant "
        "(none configured: every request refused); 'none' trusts the topic's ACLs.",
    )
    tls_cert: Path | None = Field(default=None, description="PEM certificate: serve HTTPS.")
    tls_key: Path | None = Field(default=None, description="PEM private key of tls_cert.")
    outbox_max_records: int = Field(
        default=20_000,
        ge=1,
        description="HTTP: monitored records held for publishing at most; once reached, new "
        "requests are answered at once by policy (OUTBOX_FULL) and /readyz is 503.",
    )
    outbox_max_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1,
        description="HTTP: bytes of monitored records held for publishing at most (as "
        "outbox_max_records).",
    )
    outbox_stall_s: float = Field(
        default=5.0,
        gt=0,
        description="HTTP: /readyz is 503 (broker_unavailable) while a record has waited "
        "longer than this to be published, or publishing failed this recently.",
    )
    outbox_drain_s: float = Field(
        default=10.0,
        ge=0,
        description="HTTP: on shutdown, wait at most this long for held records to be "
        "published; what is left is logged and counted as lost.",
    )
    max_body_bytes_in_flight: int = Field(
        default=8 * 1024 * 1024,
        ge=1,
        description="HTTP: request bodies held at once (read, queued or judged), in bytes; "
        "beyond, a request is refused at once (503 busy, Retry-After).",
    )
    max_caller_body_bytes_in_flight: int = Field(
        default=2 * 1024 * 1024,
        ge=1,
        description="HTTP: the same for one caller (token), so one caller's large bodies "
        "cannot take the others' share (429 caller_busy, Retry-After).",
    )

    http: HttpLimitSettings = Field(
        default_factory=HttpLimitSettings,
        description="Timeouts and the connection cap of the HTTP gate.",
    )

    @property
    def reply_reserve_ms(self) -> float:
        """``kafka_reply_reserve_ms``, or the default of ``kafka_reply``."""
        if self.kafka_reply_reserve_ms is not None:
            return self.kafka_reply_reserve_ms
        return _KAFKA_REPLY_RESERVE_MS[self.kafka_reply]

    @model_validator(mode="after")
    def _reply_topic_pattern_compiles(self) -> GateSettings:
        try:
            re.compile(self.reply_topic_pattern)
        except re.error as exc:
            raise ValueError(f"reply_topic_pattern is not a regular expression: {exc}") from None
        return self

    def policy_for(self, tenant: str) -> FailurePolicy:
        """The tenant's failure policy: its override, else ``policy``."""
        for each in self.policies:
            if each.tenant == tenant:
                return each.policy
        return self.policy


class Settings(BaseSettings):
    """Everything streamproc can be told, from ``STREAMPROC_*`` environment variables."""

    model_config = SettingsConfigDict(
        env_prefix="STREAMPROC_", env_nested_delimiter="__", frozen=True, extra="forbid"
    )

    app_id: str = "streamproc"
    broker_url: str = Field(
        default="kafka://127.0.0.1:9092",
        description="Broker URL(s) (kafka://host:port), ';'-separated.",
    )
    broker_flavour: Literal["kafka", "tansu"] = Field(
        default="kafka",
        description="'tansu' turns off what the embedded demo broker lacks (idempotence, "
        "multi-record batches).",
    )
    broker_connect_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="How long a starting worker, gate or audit sink waits for the broker to "
        "answer before it gives up with one line and exit code 8.",
    )
    security: KafkaSecurity = KafkaSecurity()
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_json: bool = True
    topics: TopicSettings = TopicSettings()
    window: WindowSettings = WindowSettings()
    judge: JudgeSettings = JudgeSettings()
    worker: WorkerSettings = WorkerSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    audit: AuditSettings = AuditSettings()
    alerts: AlertSettings = AlertSettings()
    metrics: MetricsSettings = MetricsSettings()
    review: ReviewSettings = ReviewSettings()
    labels: LabelSettings = LabelSettings()
    gate: GateSettings = GateSettings()

    @model_validator(mode="before")
    @classmethod
    def _no_unknown_variables(cls, data: Any) -> Any:
        """A misspelt ``STREAMPROC_*`` name is refused rather than silently left unread."""
        unknown = unknown_setting_variables(os.environ)
        if unknown:
            raise UnknownVariablesError(unknown)
        return data

    def to_env(self) -> dict[str, str]:
        """These settings as ``STREAMPROC_*`` variables, to start another process with them."""
        env: dict[str, str] = {}

        def flatten(prefix: str, model: BaseModel) -> None:
            for name in type(model).model_fields:
                value = getattr(model, name)
                key = f"{prefix}{name.upper()}"
                if isinstance(value, BaseModel):
                    flatten(f"{key}__", value)
                elif isinstance(value, dict):  # free-form keys: one JSON value
                    if value:
                        env[key] = json.dumps(
                            {
                                k: v.model_dump(mode="json") if isinstance(v, BaseModel) else v
                                for k, v in value.items()
                            }
                        )
                elif isinstance(value, list | tuple):  # values or groups: one JSON value
                    env[key] = json.dumps([_jsonable(v) for v in value])
                elif isinstance(value, SecretStr):
                    env[key] = value.get_secret_value()
                elif value is not None:
                    env[key] = _env_text(value.value if isinstance(value, Enum) else value)

        flatten("STREAMPROC_", self)
        return env

    @property
    def bootstrap_servers(self) -> str:
        """The broker list in the ``host:port,host:port`` form Kafka clients expect."""
        hosts = [part.strip() for part in self.broker_url.split(";") if part.strip()]
        return ",".join(host.split("://", 1)[-1] for host in hosts)

    def overriding(self, group: str, **values: object) -> Settings:
        """A copy with each of ``values`` that is not None set in the group ``group``
        (a server's command-line options over its environment)."""
        changes = {key: value for key, value in values.items() if value is not None}
        if not changes:
            return self
        updated = getattr(self, group).model_copy(update=changes)
        return self.model_copy(update={group: updated})


def _jsonable(value: object) -> object:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def _env_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


NOT_SETTINGS = frozenset(
    {
        "STREAMPROC_REVIEWER_TOKEN",  # review import: the reviewer's own token
        "STREAMPROC_TEST_BOOTSTRAP",  # tests: a running broker to use instead of starting one
        "STREAMPROC_KAFKA_STATE",  # scripts/kafka.sh: the broker's data folder
        "STREAMPROC_KAFKA_CACHE",  # scripts/kafka.sh: where the Kafka download is kept
        "STREAMPROC_KAFKA_HEAP",  # scripts/kafka.sh: the broker's Java heap
        "STREAMPROC_KAFKA_START_TIMEOUT",  # scripts/kafka.sh: readiness wait
        "STREAMPROC_KAFKA_SECURITY",  # scripts/kafka.sh: plaintext or sasl_ssl listeners
        "STREAMPROC_KAFKA_SASL_USER",  # scripts/kafka.sh: the SASL listener's user
        "STREAMPROC_KAFKA_SASL_PASSWORD",  # scripts/kafka.sh: and its password
    }
)
"""``STREAMPROC_*`` variables that are not settings (read by a command or a developer script
on their own), so an environment that sets them is not refused."""


def setting_variables() -> list[Variable]:
    """Every ``STREAMPROC_*`` variable ``Settings`` reads, groups before their fields."""
    return list(variables(Settings, "STREAMPROC_"))


def unknown_setting_variables(environ: Mapping[str, str]) -> list[UnknownVariable]:
    """The ``STREAMPROC_*`` names in ``environ`` that no setting answers to, each with the
    closest valid name."""
    return unknown_variables(Settings, environ, "STREAMPROC_", NOT_SETTINGS)
