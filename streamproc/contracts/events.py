"""The event contract: what assistants publish and what streamproc publishes back.

These pydantic models are the single source of truth; the JSON Schema files in
``schemas/`` are generated from them (``streamproc schemas write``) and a test fails
when the two drift apart.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, NonNegativeInt

from streamproc.contracts.reasons import Reason

__all__ = [
    "MAX_INPUT_ITEMS",
    "SCHEMA_VERSION",
    "Action",
    "AnswerEvent",
    "AnswerJudgement",
    "AnswerOutcome",
    "ClaimClass",
    "ClaimVerdict",
    "ConfidenceMark",
    "CorrectedRate",
    "DeadLetter",
    "DeadLetterReason",
    "EvaluationLabels",
    "EvidenceItem",
    "EvidenceKind",
    "Flag",
    "JudgeInfo",
    "LabelledSpan",
    "Outcome",
    "Timings",
    "TokenLogprob",
    "UnverifiedReason",
    "Verdict",
    "VerdictLabel",
    "WindowAggregate",
]

SCHEMA_VERSION: Final = 1

MAX_INPUT_ITEMS: Final = 10_000
"""Most items in one list of an input event (evidence, tokens, labels): more is a flood, not
an answer (the judge reads 400 evidence units at most), and a flood of invalid items would
cost seconds of schema errors."""


class _Model(BaseModel):
    """Frozen models: an event is a fact, nobody edits it after it is made."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class _Incoming(BaseModel):
    """Producers may add fields we do not know yet (tolerant reader); we ignore them."""

    model_config = ConfigDict(frozen=True, extra="ignore")


# --------------------------------------------------------------------------- input


class EvidenceKind(StrEnum):
    PASSAGE = "passage"
    RECORD = "record"
    POLICY = "policy"
    TOOL_RESULT = "tool_result"


class EvidenceItem(_Incoming):
    """One piece of evidence the assistant was given, exactly as it saw it."""

    id: str = Field(min_length=1, max_length=200)
    text: str
    kind: EvidenceKind = EvidenceKind.PASSAGE
    source: str | None = None
    fields: dict[str, Any] | None = Field(
        default=None, description="Structured fields of a record or tool result."
    )
    executed: bool | None = Field(
        default=None, description="For tool calls: false when the call was refused."
    )


class TokenLogprob(_Incoming):
    """One generated token with its log-probability and where it starts in the answer."""

    text: str
    # allow_inf_nan: a generated token cannot have probability 0, and the strings "-inf" or
    # "nan" are not numbers JSON can carry (intake refuses the bare -Infinity / NaN too).
    logprob: float = Field(le=0.0, allow_inf_nan=False)
    offset: NonNegativeInt


class VerdictLabel(StrEnum):
    SUPPORTED = "supported"
    CONTRADICTED = "contradicted"
    UNSUPPORTED = "unsupported"
    UNVERIFIED = "unverified"
    """Not checked although it should have been (the budget ran out, a language the judge
    was not measured on): never counted as supported, nor as a hallucination."""


class UnverifiedReason(StrEnum):
    """Why an answer (or some of its claims) could not be checked."""

    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    """The inline gate's latency budget ran out before the model stage finished."""
    LANGUAGE_NOT_SUPPORTED = "LANGUAGE_NOT_SUPPORTED"
    """The answer is in a language the judge was not measured on (``judge.language``)."""
    OVERLOADED = "OVERLOADED"
    """The gate's expected wait already exceeded the request's budget: not queued."""
    JUDGE_ERROR = "JUDGE_ERROR"
    """The judge failed on the answer (the gate answers by policy)."""
    OUTBOX_FULL = "OUTBOX_FULL"
    """The gate's outbox of monitored records is full (the broker is away): answered at
    once by policy, not judged, and no monitored record kept."""


class LabelledSpan(_Incoming):
    """A human-labelled hallucinated span of the answer (character offsets)."""

    start: NonNegativeInt
    end: NonNegativeInt
    text: str | None = None
    verdict: Literal["contradicted", "unsupported", "hallucinated"] = "hallucinated"
    label_type: str | None = None


class EvaluationLabels(_Incoming):
    """Human labels carried by evaluation traffic; live traffic leaves them out."""

    claims: list[VerdictLabel] | None = Field(
        default=None,
        max_length=MAX_INPUT_ITEMS,
        description="One verdict per sentence-level claim, in order.",
    )
    spans: list[LabelledSpan] | None = Field(
        default=None, max_length=MAX_INPUT_ITEMS, description="Hallucinated spans of the answer."
    )
    response: Literal["hallucinated", "faithful"] | None = None
    source: str | None = Field(default=None, description="Where the labels come from.")


class AnswerEvent(_Incoming):
    """An assistant's answer with the evidence it was given (topic: answers)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: str = Field(min_length=1, max_length=200, description="Idempotency key.")
    answer_id: str = Field(min_length=1, max_length=200)
    conversation_id: str = Field(min_length=1, max_length=200)
    tenant: str = Field(min_length=1, max_length=200)
    assistant_id: str = Field(min_length=1, max_length=200)
    model: str = Field(min_length=1, max_length=200, description="The LLM name/version.")
    occurred_at: AwareDatetime = Field(description="Event time: when the answer was given.")
    question: str | None = None
    answer: str
    evidence: list[EvidenceItem] = Field(default_factory=list, max_length=MAX_INPUT_ITEMS)
    tokens: list[TokenLogprob] | None = Field(default=None, max_length=MAX_INPUT_ITEMS)
    answerable: bool | None = Field(
        default=None, description="Evaluation traffic: can the evidence answer the question?"
    )
    labels: EvaluationLabels | None = None


# -------------------------------------------------------------------------- output


class ClaimClass(StrEnum):
    RECORD = "record"
    RULE = "rule"
    DOCUMENT = "document"  # about the source itself: "the article discusses X"
    CONVERSATIONAL = "conversational"


class ConfidenceMark(StrEnum):
    OK = "ok"
    LOW = "low"
    CUT = "cut"


class Action(StrEnum):
    PASS = "pass"
    TRIM = "trim"
    WITHHOLD = "withhold"


class Outcome(StrEnum):
    CORRECT = "correct"
    ABSTAINED = "abstained"
    WRONG = "wrong"
    UNVERIFIED = "unverified"
    """Not known: the answer could not be checked (``AnswerJudgement.unverified_reason``)."""


class ClaimVerdict(_Model):
    """The judge's finding on one claim."""

    index: NonNegativeInt
    sentence_index: NonNegativeInt = Field(description="Which answer sentence it came from.")
    text: str
    start: NonNegativeInt = Field(description="Offset of the claim in the answer.")
    end: NonNegativeInt
    claim_class: ClaimClass
    citations: list[str] = Field(default_factory=list)
    verdict: VerdictLabel | None = Field(
        default=None, description="None for claims that are not checked (conversational)."
    )
    score: float | None = Field(default=None, description="Support score in [0, 1].")
    reasons: list[Reason] = Field(
        default_factory=list,
        description='Why: "CODE: detail" or "CODE"; programs act on the code, people read '
        "the detail.",
    )
    evidence_ids: list[str] = Field(
        default_factory=list, description="Evidence that decided the verdict."
    )
    citation_supported: bool | None = Field(
        default=None, description="Citation recall: the cited evidence alone supports it."
    )
    citations_needed: list[bool] = Field(
        default_factory=list, description="Citation precision, one flag per citation."
    )
    confidence: ConfidenceMark | None = None
    risk: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Calibrated probability that the claim is hallucinated (learned "
        "calibrator); None when no calibrator decided.",
    )
    signals: dict[str, float] = Field(
        default_factory=dict,
        description="The per-claim signals the calibrator reads (NLI, retrieval, coverage, "
        "record values, ...), kept for the audit trail and for training.",
    )


class AnswerJudgement(_Model):
    """What the judge concluded about one answer."""

    claims: list[ClaimVerdict]
    checked_claims: NonNegativeInt
    supported_claims: NonNegativeInt
    contradicted_claims: NonNegativeInt
    unsupported_claims: NonNegativeInt
    faithfulness: float | None = Field(description="supported / checked; None if none checked.")
    hallucinated: bool
    abstained: bool
    outcome: Outcome
    action: Action
    trim_sentences: list[str] = Field(default_factory=list)
    severity: Literal["contradicted", "unsupported"] | None = None
    answer_risk: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="The answer calibrator's probability that the answer is hallucinated, "
        "from its claims' risks and how many were tested (its threshold is in the judge's "
        "thresholds as answer_threshold_<regime>); None without one.",
    )
    limits: list[str] = Field(
        default_factory=list,
        description="Work caps hit while judging or publishing this answer, as 'CODE: "
        "detail' (LIMIT_CLAIMS, LIMIT_UNITS, LIMIT_CLAIM_CHARS, LIMIT_UNIT_CHARS, "
        "OUTPUT_TRIMMED); claims left out are listed unchecked with the same code. "
        "TRACE_CONTEXT_DROPPED: a tracestate or baggage header beyond W3C's limits, or an "
        "invalid traceparent, was not handed on.",
    )
    verified: bool = Field(
        default=True,
        description="False when some claim that should have been checked was not (verdict "
        "'unverified'). A claim that was checked may still refute the answer (hallucinated, "
        "a trim or withhold), but windows count every unverified answer apart, outside rate.",
    )
    unverified_reason: UnverifiedReason | None = Field(
        default=None, description="Why not verified; None when verified."
    )
    language: str | None = Field(
        default=None,
        description="The answer's language (ISO 639-1) when it was detected; None when the "
        "text was too short to tell or detection is off.",
    )


class JudgeInfo(_Model):
    """Which judge decided, with which thresholds - so an auditor can replay it."""

    name: str
    version: str
    granularity: str
    thresholds: dict[str, float] = Field(default_factory=dict)
    models: dict[str, str] = Field(default_factory=dict, description="model name -> sha256")
    options: dict[str, str] = Field(
        default_factory=dict,
        description="Other settings that decided: the locale amounts and dates were read "
        "in, the record lifecycles (file and hash).",
    )


class Timings(_Model):
    judge_ms: float = Field(ge=0, description="Judge time for the batch this answer was in.")
    batch_size: int = Field(ge=1)
    end_to_end_ms: float | None = Field(
        default=None, description="From occurred_at to the verdict, when clocks allow."
    )


class Verdict(_Model):
    """One per answer (topic: verdicts)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: str
    answer_id: str
    conversation_id: str
    tenant: str
    assistant_id: str
    model: str
    occurred_at: AwareDatetime
    judged_at: AwareDatetime
    judgement: AnswerJudgement
    judge: JudgeInfo
    timings: Timings
    trace_id: str | None = None


class Flag(_Model):
    """An answer that needs action (topic: flags): trim or withhold."""

    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: str
    answer_id: str
    conversation_id: str
    tenant: str
    assistant_id: str
    model: str
    occurred_at: AwareDatetime
    action: Action
    severity: Literal["contradicted", "unsupported"] | None
    reasons: list[str]
    trim_sentences: list[str]
    faithfulness: float | None
    trace_id: str | None = None


class WindowAggregate(_Model):
    """Hallucination rate of one (tenant, assistant, model) over one event-time window.

    Tumbling windows go to the aggregates topic, hopping ones to the hopping topic; a
    window is named by its full key, ``window`` (its size) and ``window_start``. A window
    re-emitted after late events carries a higher ``revision``: the highest is the truth.
    """

    schema_version: Literal[1] = SCHEMA_VERSION
    tenant: str
    assistant_id: str
    model: str
    window: str = Field(description='The window\'s size as a label: "1m", "5m", "1h", "90s".')
    window_size_s: float = Field(gt=0)
    window_hop_s: float = Field(
        gt=0, description="Equal to window_size_s for a tumbling window, less for a hopping one."
    )
    window_start: AwareDatetime
    window_end: AwareDatetime
    answers: NonNegativeInt = Field(description="answered + abstentions + unverified.")
    answered: NonNegativeInt = Field(description="Verified answers that did not abstain.")
    abstentions: NonNegativeInt = Field(description="Verified answers that abstained.")
    unverified: NonNegativeInt = Field(
        default=0,
        description="Answers that could not be checked (budget, language): counted apart, "
        "neither faithful nor hallucinated, and outside rate.",
    )
    hallucinated: NonNegativeInt = Field(description="Answered answers judged hallucinated.")
    rate: float | None = Field(description="hallucinated / answered; None when none answered.")
    rate_low: float | None = Field(description="Wilson 95 % interval, lower bound.")
    rate_high: float | None = Field(description="Wilson 95 % interval, upper bound.")
    corrected_rate: CorrectedRate | None = Field(
        default=None,
        description="The estimated true hallucination rate behind `rate`: Rogan-Gladen with "
        "the Lang-Reiczigel interval, each task type (QA, Summary, Data2txt) corrected with "
        "the judge's sensitivity and specificity measured on EVALUATION.md's report split. "
        "`identifiable` false when the judge's flags carry too little information "
        "(sensitivity + specificity near 1). None when the judge's accuracy is unmeasured or "
        "some answers of the window have no task type.",
    )
    contradicted_claims: NonNegativeInt
    unsupported_claims: NonNegativeInt
    mean_faithfulness: float | None
    judge_latency_p50_ms: float | None = Field(
        default=None,
        description="Median judge time of the window's answers (each answer: its batch's), "
        "from a log-scale histogram: within 9 %. None when no answer carried one.",
    )
    judge_latency_p95_ms: float | None = Field(
        default=None, description="95th percentile, as judge_latency_p50_ms."
    )
    example_answer_ids: list[str] = Field(
        default_factory=list,
        description="Some hallucinated answers of the window (the first counted, at most "
        "window.examples): the keys of their audit records and flags.",
    )
    late_events: NonNegativeInt = Field(
        default=0, description="Events counted after their part of the window had closed."
    )
    revision: NonNegativeInt = Field(
        default=0,
        description="Grows each time the window is published again (late events revised "
        "it): a tumbling window of one pane has 0 on first close, then 1, 2, ...; a window "
        "of several panes (panes with answers - 1) + the sum of their revisions. The "
        "highest revision is the truth.",
    )
    closed_at: AwareDatetime


class CorrectedRate(_Model):
    """The estimated true rate next to the observed one (fractions, not percent)."""

    method: Literal["rogan-gladen/lang-reiczigel"] = "rogan-gladen/lang-reiczigel"
    observed: float | None = Field(description="Flagged share of the answers judged.")
    n: int
    identifiable: bool
    youden: float | None = Field(description="Sensitivity + specificity - 1 of the judge.")
    estimate: float | None = Field(description="Rogan-Gladen true rate, clipped to [0, 1].")
    low: float | None
    high: float | None
    source: Literal["offline-benchmark", "live", "mixed"] = Field(
        default="offline-benchmark",
        description="Whose sensitivity and specificity corrected the rate: the shipped "
        "offline benchmark counts, the deployment's own reviewer labels (live, once a cell "
        "has labels.min_labels), or live for some task types and offline for others.",
    )
    labels_used: NonNegativeInt = Field(
        default=0, description="Reviewer-labelled answers behind the live part (0: offline)."
    )
    clipped: bool = Field(
        default=False,
        description="The interval reached past 0 or 1 and was cut there. Both bounds at 0 "
        "means fewer flags than the judge's measured false-positive rate predicts: the "
        "measured specificity does not fit this traffic, read the bound with care.",
    )


class AnswerOutcome(_Model):
    """What the window stage needs to know about one judged answer (internal topic)."""

    event_id: str
    answer_id: str | None = None
    """None on outcomes written before answer ids were carried."""
    assistant_id: str
    tenant: str
    model: str
    occurred_at: AwareDatetime
    hallucinated: bool
    abstained: bool
    contradicted_claims: int
    unsupported_claims: int
    faithfulness: float | None
    judge_ms: float | None = None
    """The judge time of the answer's batch; None on outcomes written before it was carried."""
    verified: bool = True
    """False: the answer could not be checked; windows count it apart (``unverified``)."""
    task_type: str | None = None
    """EVALUATION.md's task type (``stream/judging/task_type.py``), for the corrected rate; None on
    outcomes written before it was carried."""


class DeadLetterReason(StrEnum):
    BAD_JSON = "bad_json"
    SCHEMA_VIOLATION = "schema_violation"
    OVERSIZED = "oversized"
    PROCESSING_ERROR = "processing_error"
    JUDGE_TIMEOUT = "judge_timeout"
    EVENT_TIME_OUT_OF_RANGE = "event_time_out_of_range"
    OUTPUT_TOO_LARGE = "output_too_large"
    UNREADABLE_RECORD = "unreadable_record"
    UNKNOWN_ANSWER = "unknown_answer"
    """A label for an answer that never entered the review queue (labels loop)."""
    LABEL_REFUSED = "label_refused"
    """A label from a reviewer not allowed to see the answer's tenant (labels loop)."""
    REPLY_TOPIC_REFUSED = "reply_topic_refused"
    """A gate request naming a reply topic outside ``gate.reply_topic_pattern`` or one
    streamproc reads or writes (Kafka gate): nothing is written there."""
    UNAUTHORIZED = "unauthorized"
    """A Kafka gate request without a valid token, or for a tenant its token does not name."""


class DeadLetter(_Model):
    """An input we could not process, kept whole so it can be replayed (topic: dead letter)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    reason: DeadLetterReason
    error: str = Field(description="Human-readable detail of what was wrong.")
    topic: str
    partition: int
    offset: int
    key_b64: str | None = None
    value_b64: str = Field(description="The original message bytes, base64.")
    received_at: AwareDatetime
