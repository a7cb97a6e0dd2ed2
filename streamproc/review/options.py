"""Options of the review page and of the labels and accuracy loops."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from streamproc.options import OptionGroup
from streamproc.verdicts.options import SampleRate
from streamproc.web.options import HttpLimitSettings

__all__ = ["LabelSettings", "ReviewSettings"]


class ReviewSettings(OptionGroup):
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


class LabelSettings(OptionGroup):
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
