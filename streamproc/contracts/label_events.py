"""The reviewers' loop contract: review items out, people's labels in, the judge's live
accuracy out.

- :class:`ReviewItem` (topic ``review.queue_topic``, key ``answer_id``): an answer sampled
  for review - every flagged answer, and a seeded share of passed ones - with why it was
  sampled and its inclusion probability, so accuracy can be estimated without bias
  (inverse-probability weights).
- :class:`LabelEvent` (topic ``review.labels_topic``, key ``answer_id``): one reviewer's
  labels of one answer; several reviewers may label the same answer.
- :class:`LabelAuditEntry` (the audit topic, key ``label:<answer_id>:<label_id>``): an
  accepted label joined with the judge's decision, appended to the audit chain.
- :class:`LabelDelta` (internal topic ``labels.deltas_topic``, key: the cell): how one label
  changed its cell's weighted confusion counts.
- :class:`JudgeAccuracyEvent` (topic ``labels.accuracy_topic``, compacted, key: the cell):
  the judge's live accuracy in one (tenant, assistant, task type, judge) cell.

An answer id is its tenant's own: two tenants may send the same one. A review item, its
labels and its audit entries are identified by (``tenant``, ``answer_id``) - the queue,
the review page and the labels loop never join one tenant's label to another's item.
The topics stay keyed by ``answer_id`` alone, which keeps an answer's item and labels in
one partition whatever the tenant.

Like :mod:`streamproc.contracts.events`, these models are the source of the JSON Schema files in
``schemas/`` and import nothing of streamproc but the event contract.
"""

from __future__ import annotations

from datetime import date
from enum import StrEnum
from typing import Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, NonNegativeInt

from streamproc.contracts.events import (
    MAX_INPUT_ITEMS,
    SCHEMA_VERSION,
    AnswerJudgement,
    EvidenceItem,
    JudgeInfo,
)

__all__ = [
    "MAX_NOTE_CHARS",
    "UNKNOWN_TASK_TYPE",
    "AccuracyCell",
    "AnswerLabel",
    "ClaimLabel",
    "ClaimLabelValue",
    "JudgeAccuracyEvent",
    "JudgeDriftAlert",
    "LabelAuditEntry",
    "LabelDelta",
    "LabelEvent",
    "RateEstimate",
    "ReviewItem",
    "SampledBecause",
    "Tally",
]

MAX_NOTE_CHARS: Final = 4000
UNKNOWN_TASK_TYPE: Final = "unknown"
"""The task type of a cell whose answers carried none."""


class _LabelModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _IncomingLabel(BaseModel):
    """Labels come from other programs too (imports, Label Studio): tolerant reader."""

    model_config = ConfigDict(frozen=True, extra="ignore")


# ------------------------------------------------------------------------- review queue


class SampledBecause(StrEnum):
    FLAGGED = "flagged"
    """Every answer the judge trimmed or withheld is reviewed (inclusion probability 1)."""
    RANDOM = "random"
    """A passed answer drawn by the seeded sample (inclusion probability = its rate)."""


class ReviewItem(_LabelModel):
    """One answer waiting for reviewers: what the reviewer needs to see, and the sampling
    design it was drawn under."""

    schema_version: Literal[1] = SCHEMA_VERSION
    answer_id: str
    event_id: str
    conversation_id: str
    tenant: str
    assistant_id: str
    model: str
    task_type: str | None = Field(description="EVALUATION.md's task type: QA, Summary, Data2txt.")
    occurred_at: AwareDatetime
    judged_at: AwareDatetime
    sampled_because: SampledBecause
    inclusion_probability: float = Field(
        gt=0,
        le=1,
        description="The chance this answer had of entering the queue: 1 for a flagged "
        "answer, the sample rate of its (tenant, assistant, task type) for a passed one. "
        "Labels are weighted by its inverse.",
    )
    question: str | None = None
    answer: str
    evidence: list[EvidenceItem] = Field(default_factory=list)
    judgement: AnswerJudgement
    judge: JudgeInfo
    judge_key: str | None = Field(
        default=None,
        description="The judge's key in the measured-accuracy table (its calibrators "
        "included): live accuracy is kept per judge key.",
    )
    trace_id: str | None = None


# ------------------------------------------------------------------------------ labels


class ClaimLabelValue(StrEnum):
    SUPPORTED = "supported"
    CONTRADICTED = "contradicted"
    UNSUPPORTED = "unsupported"
    CANT_TELL = "cant_tell"


AnswerLabel = Literal["hallucinated", "faithful"]


class ClaimLabel(_IncomingLabel):
    """A reviewer's label of one claim, by its index in the verdict's claims."""

    index: NonNegativeInt
    label: ClaimLabelValue


class LabelEvent(_IncomingLabel):
    """One reviewer's labels of one answer (topic: labels, key: answer_id)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    label_id: str = Field(min_length=1, max_length=200, description="Idempotency key.")
    answer_id: str = Field(min_length=1, max_length=200)
    tenant: str = Field(min_length=1, max_length=200)
    reviewer: str = Field(min_length=1, max_length=200)
    labelled_at: AwareDatetime
    answer_label: AnswerLabel | None = Field(
        description="The answer as a whole; None when the reviewer could not tell."
    )
    claims: list[ClaimLabel] = Field(default_factory=list, max_length=MAX_INPUT_ITEMS)
    note: str | None = Field(default=None, max_length=MAX_NOTE_CHARS)
    source: str = Field(
        default="review-page",
        max_length=200,
        description="Where the label was made: review-page, import, label-studio, replay.",
    )


class LabelAuditEntry(_LabelModel):
    """An accepted label as the audit trail keeps it: who said what about which answer,
    next to what the judge had decided - so an auditor sees who disagreed with it."""

    entry: Literal["label"] = "label"
    record_version: Literal[1] = 1
    answer_id: str
    tenant: str
    assistant_id: str
    label: LabelEvent
    label_sha256: str = Field(description="sha256 (hex) of the label event's bytes as received.")
    judge_key: str | None
    judge_hallucinated: bool
    agrees_with_judge: bool | None = Field(
        description="The reviewer's answer label equals the judge's; None when the "
        "reviewer could not tell."
    )
    claims_disagreeing: list[int] = Field(
        default_factory=list,
        description="Indexes of claims the reviewer labelled otherwise than the judge "
        "(can't-tell labels and unchecked claims left out).",
    )
    recorded_at: AwareDatetime


# ----------------------------------------------------------------------- live accuracy


class AccuracyCell(_LabelModel):
    """Where live accuracy is kept: one judge on one assistant's answers of one task type."""

    tenant: str
    assistant_id: str
    task_type: str = Field(description=f"'{UNKNOWN_TASK_TYPE}' when the answers carried none.")
    judge_key: str

    @property
    def key(self) -> str:
        return f"{self.tenant}/{self.assistant_id}/{self.task_type}/{self.judge_key}"


class Tally(_LabelModel):
    """A weighted count: ``n`` labels (fractional when reviewers split), ``w`` their
    inverse-probability weights summed, ``w2`` the squared weights summed (for the
    effective sample size, Kish: ``w**2 / w2``)."""

    n: float = 0.0
    w: float = 0.0
    w2: float = 0.0


class LabelDelta(_LabelModel):
    """How one label changed its cell (internal topic, key: the cell). An answer counts
    once however many reviewers label it: each of its k labels carries 1/k of it, so a
    second label moves part of the first one's share (negative tallies are normal)."""

    cell: AccuracyCell
    answer_id: str
    label_id: str
    answer_day: date = Field(description="UTC day the answer was given: drift baselines.")
    labelled_at: AwareDatetime
    new_answer: bool = Field(description="The answer's first counted label.")
    tp: Tally = Tally()
    fp: Tally = Tally()
    fn: Tally = Tally()
    tn: Tally = Tally()
    claims_compared: int = 0
    claims_agreeing: int = 0
    reviewer_pair: tuple[AnswerLabel, AnswerLabel] | None = Field(
        default=None,
        description="Set when this label is an answer's second: (first reviewer's label, "
        "this one's), for Cohen's kappa.",
    )


class RateEstimate(_LabelModel):
    """A proportion with its 95 % interval, from weighted labels."""

    estimate: float | None
    low: float | None
    high: float | None
    n_effective: float = Field(description="Kish effective sample size of the denominator.")


class JudgeAccuracyEvent(_LabelModel):
    """The judge measured against people in one cell (topic: judge accuracy, compacted,
    key: ``tenant/assistant/task_type/judge_key``)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    cell: AccuracyCell
    labelled_answers: NonNegativeInt
    labels: NonNegativeInt
    tp: Tally
    fp: Tally
    fn: Tally
    tn: Tally
    sensitivity: RateEstimate
    specificity: RateEstimate
    precision: RateEstimate
    claim_agreement: RateEstimate | None = None
    kappa: float | None = Field(default=None, description="Cohen's kappa between reviewers.")
    kappa_pairs: NonNegativeInt = 0
    offline_sensitivity: float | None = None
    offline_precision: float | None = None
    drift: list[str] = Field(
        default_factory=list,
        description="Which figures fell significantly below the offline benchmark or the "
        "cell's trailing baseline: sensitivity_below_offline, precision_below_offline, "
        "sensitivity_below_baseline, precision_below_baseline.",
    )
    measured_at: AwareDatetime


class JudgeDriftAlert(_LabelModel):
    """The judge's live accuracy fell significantly below its offline figures or its own
    trailing baseline in one cell (topic: alerts, key ``tenant/assistant``; severity
    ticket: someone should look at the judge this week, nobody is paged)."""

    alert: Literal["judge_drift"] = "judge_drift"
    alert_id: str = Field(description="Stable per cell: firing and resolved share it.")
    state: Literal["firing", "resolved"]
    severity: Literal["ticket"] = "ticket"
    tenant: str
    assistant_id: str
    cell: AccuracyCell
    findings: list[str] = Field(description="As JudgeAccuracyEvent.drift.")
    sensitivity: float | None
    precision: float | None
    offline_sensitivity: float | None
    offline_precision: float | None
    labelled_answers: NonNegativeInt
    at: AwareDatetime
