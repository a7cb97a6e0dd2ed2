"""Settings for one test run: a unique app id and topic names on a given broker, so tests
sharing a broker never meet (the pattern the older tests write out by hand)."""

from __future__ import annotations

import uuid
from typing import Any

from streamproc.config import Settings

TOPIC_FIELDS = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")


def run_settings(bootstrap: str, prefix: str, *, partitions: int, **fields: Any) -> Settings:
    """``prefix-<8 hex>`` as the app id and topic prefix; ``fields`` as further settings."""
    run = f"{prefix}-{uuid.uuid4().hex[:8]}"
    review = {"queue_topic": f"{run}.review-queue", "labels_topic": f"{run}.labels"}
    labels = {"deltas_topic": f"{run}.label-deltas", "accuracy_topic": f"{run}.judge-accuracy"}
    gate = {"requests_topic": f"{run}.gate-requests", "replies_topic": f"{run}.gate-replies"}
    return Settings(
        app_id=run,
        broker_url=f"kafka://{bootstrap}",
        topics={**{name: f"{run}.{name}" for name in TOPIC_FIELDS}, "partitions": partitions},
        review={**review, **fields.pop("review", {})},
        labels={**labels, **fields.pop("labels", {})},
        gate={**gate, **fields.pop("gate", {})},
        **fields,
    )
