"""Options of the verdict pipeline: the topics' names, the worker's batching and limits, and
review sampling rates.
"""

from __future__ import annotations

from pydantic import Field

from streamproc.inference.options import JudgeSettings
from streamproc.options import OptionGroup

__all__ = [
    "SampleRate",
    "TopicSettings",
    "WorkerSettings",
    "applied_settings",
]


class TopicSettings(OptionGroup):
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


class WorkerSettings(OptionGroup):
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


class SampleRate(OptionGroup):
    """The share of passed answers sampled into review for the answers this names; a
    field left out matches every value. The most specific matching entry wins."""

    tenant: str | None = None
    assistant_id: str | None = None
    task_type: str | None = None
    rate: float = Field(ge=0, le=1)


def applied_settings(
    judge: JudgeSettings, worker: WorkerSettings, topics: TopicSettings
) -> dict[str, object]:
    """The settings that shape a verdict, as JSON, for its audit record: the judge
    (thresholds, models, calibrator, limits, confidence), the worker's bounds on input and
    time, and the output size cap. Nothing about brokers or credentials. Compute it once
    per worker."""
    return {
        "judge": judge.model_dump(mode="json"),
        "worker": {
            "max_event_bytes": worker.max_event_bytes,
            "judge_deadline_s": worker.judge_deadline_s,
            "event_time_max_future_s": worker.event_time_max_future_s,
            "event_time_max_past_s": worker.event_time_max_past_s,
            "exactly_once": worker.exactly_once,
        },
        "topics": {"output_max_message_bytes": topics.output_max_message_bytes},
    }
