"""``streamproc review export --output FILE``: labelled answers in the benchmark JSONL shape.

Reads the review-queue topic (:class:`~streamproc.contracts.label_events.ReviewItem`) and the
labels topic (:class:`~streamproc.contracts.label_events.LabelEvent`) from the beginning to their
end, read-committed and without a consumer group (nothing is committed, nothing moves),
joins them by answer id and writes one row per labelled answer in the shape of
``data/README.md``, so ``streamproc eval benchmark --data FILE`` and ``streamproc
calibrate --from-labels FILE`` read it like the third-party benchmarks:

- ``response_label``: the majority of the reviewers' answer labels (each reviewer's
  latest label counts once); a tie, or only can't-tell labels, leaves the answer out
  (counted);
- ``labels``: the claims most of their reviewers called contradicted or unsupported, as
  character spans of the answer (the claim's offsets in the judge's verdict);
- ``split``: ``calibrate`` or ``report``, half each, seeded by the answer id and
  ``review.seed``;
- ``meta``: tenant, assistant, reviewers, the sampling design (``inclusion_probability``,
  ``sampled_because``) and the judge key, so accuracy can be weighted without bias.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from pydantic import ValidationError

from streamproc.contracts.events import EvidenceKind
from streamproc.contracts.label_events import ClaimLabelValue, LabelEvent, ReviewItem
from streamproc.kafka.options import KafkaConnection
from streamproc.kafka.security import (
    BrokerAccessDenied,
    aiokafka_options,
    explain_access_errors,
)
from streamproc.kafka.topics import AUDIT_MAX_MESSAGE_BYTES
from streamproc.review.options import ReviewSettings

__all__ = [
    "EXPORT_DATASET",
    "Export",
    "LabelExportOptions",
    "export_rows",
    "labelled_rows",
    "read_topic",
    "run_export",
    "write_rows",
]

log = structlog.get_logger(__name__)

EXPORT_DATASET = "review"
_REFUTED = (ClaimLabelValue.CONTRADICTED, ClaimLabelValue.UNSUPPORTED)


@dataclass(frozen=True, slots=True)
class LabelExportOptions:
    """What an export is told; the composition root builds it once
    (:func:`streamproc.wiring.label_export_options`)."""

    connection: KafkaConnection
    review: ReviewSettings
    """``review.*``: the queue and labels topics read, and the seed of the split."""
    labels_max_bytes: int
    """``topics.output_max_message_bytes``: the largest label record."""


@dataclass(frozen=True, slots=True)
class Export:
    """The rows, and what was left out and why."""

    rows: list[dict[str, Any]]
    undecided: int = 0
    """Labelled answers whose reviewers tied, or could not tell."""
    without_item: int = 0
    """Labels of answers with no review item (not sampled, or retained no longer)."""
    other_tenant: int = 0
    """Labels naming another tenant than their answer's (the labels loop refuses them)."""
    unreadable: int = 0
    skipped_ids: list[str] = field(default_factory=list)


def _split(answer_id: str, seed: int) -> str:
    digest = hashlib.sha256(f"{seed}:{answer_id}".encode()).digest()
    return "calibrate" if digest[0] % 2 == 0 else "report"


def _task_type(item: ReviewItem) -> str:
    """The item's task type; without one, what the benchmark loader would read it as
    (record evidence is data-to-text, so its evidence stays a record)."""
    if item.task_type:
        return item.task_type
    if any(e.kind is EvidenceKind.RECORD for e in item.evidence):
        return "Data2txt"
    return "QA" if item.question else "Summary"


def _latest_per_reviewer(labels: Iterable[LabelEvent]) -> list[LabelEvent]:
    latest: dict[str, LabelEvent] = {}
    for label in labels:
        seen = latest.get(label.reviewer)
        if seen is None or label.labelled_at >= seen.labelled_at:
            latest[label.reviewer] = label
    return sorted(latest.values(), key=lambda label: (label.labelled_at, label.reviewer))


def _majority(votes: Sequence[str]) -> str | None:
    counts = Counter(votes).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def _spans(item: ReviewItem, labels: Sequence[LabelEvent]) -> list[dict[str, Any]]:
    """The claims most of their reviewers called not supported (can't tell: no vote)."""
    votes: dict[int, list[ClaimLabelValue]] = {}
    for label in labels:
        for claim in label.claims:
            if claim.label is not ClaimLabelValue.CANT_TELL:
                votes.setdefault(claim.index, []).append(claim.label)
    claims = {c.index: c for c in item.judgement.claims}
    spans = []
    for index, cast in sorted(votes.items()):
        refuted = [v for v in cast if v in _REFUTED]
        if index not in claims or 2 * len(refuted) <= len(cast):
            continue
        contradicted = refuted.count(ClaimLabelValue.CONTRADICTED)
        verdict = "contradicted" if 2 * contradicted >= len(refuted) else "unsupported"
        verdict_of = claims[index]
        spans.append(
            {
                "start": verdict_of.start,
                "end": verdict_of.end,
                "text": verdict_of.text,
                "verdict": verdict,
            }
        )
    return sorted(spans, key=lambda s: (s["start"], s["end"]))


def _row(item: ReviewItem, labels: Sequence[LabelEvent], seed: int) -> dict[str, Any] | None:
    response = _majority([label.answer_label for label in labels if label.answer_label])
    if response is None:
        return None
    return {
        "id": item.answer_id,
        "dataset": EXPORT_DATASET,
        "task_type": _task_type(item),
        "model": item.model,
        "question": item.question,
        "evidence": [e.text for e in item.evidence],
        "answer": item.answer,
        "labels": _spans(item, labels),
        "response_label": response,
        "split": _split(item.answer_id, seed),
        "meta": {
            "source": "streamproc review export: reviewers' labels",
            "tenant": item.tenant,
            "assistant_id": item.assistant_id,
            "reviewers": sorted(label.reviewer for label in labels),
            "label_ids": [label.label_id for label in labels],
            "inclusion_probability": item.inclusion_probability,
            "sampled_because": item.sampled_because.value,
            "judge_key": item.judge_key,
            "judge_hallucinated": item.judgement.hallucinated,
        },
    }


def export_rows(items: Iterable[ReviewItem], labels: Iterable[LabelEvent], seed: int = 0) -> Export:
    """Join review items (the last one per answer) with their labels (each ``label_id``
    once, each reviewer's latest) into benchmark rows, in answer-id order."""
    by_answer = {item.answer_id: item for item in items}
    unique = {label.label_id: label for label in labels}
    grouped: dict[str, list[LabelEvent]] = {}
    without_item = other_tenant = 0
    for label in unique.values():
        item = by_answer.get(label.answer_id)
        if item is None:
            without_item += 1
        elif item.tenant != label.tenant:
            other_tenant += 1
        else:
            grouped.setdefault(label.answer_id, []).append(label)
    rows, skipped = [], []
    for answer_id in sorted(grouped):
        row = _row(by_answer[answer_id], _latest_per_reviewer(grouped[answer_id]), seed)
        if row is None:
            skipped.append(answer_id)
        else:
            rows.append(row)
    return Export(rows, len(skipped), without_item, other_tenant, skipped_ids=skipped)


# --------------------------------------------------------------------------- reading


async def read_topic(
    connection: KafkaConnection, topic: str, *, timeout_s: float, max_bytes: int
) -> list[tuple[bytes | None, bytes]]:
    """Every record (key, value) on ``topic`` from its beginning to its end as of now
    (committed transactions only, tombstones left out); empty when there is no topic."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=connection.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        max_partition_fetch_bytes=max_bytes,
        **aiokafka_options(connection.security),
    )
    deadline = time.monotonic() + timeout_s
    async with explain_access_errors(connection.bootstrap_servers, connection.security):
        await consumer.start()
    values: list[tuple[bytes | None, bytes]] = []
    try:
        if topic not in await consumer.topics():
            return values
        consumer.subscribe([topic])  # without a group: every partition, from the start
        while not consumer.assignment():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no partitions of {topic} assigned in {timeout_s} s")
            await asyncio.sleep(0.1)
        partitions = sorted(consumer.assignment())
        ends = await consumer.end_offsets(partitions)
        while True:
            positions = {tp: await consumer.position(tp) for tp in partitions}
            if all(positions[tp] >= ends[tp] for tp in partitions):
                return values
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {topic} to its end in {timeout_s} s")
            batches = await consumer.getmany(timeout_ms=500)
            for messages in batches.values():
                values += [(m.key, m.value) for m in messages if m.value is not None]
    finally:
        await consumer.stop()


def _parse(
    records: Iterable[tuple[bytes | None, bytes]], model: type[ReviewItem] | type[LabelEvent]
) -> tuple[list[Any], int]:
    parsed, bad = [], 0
    for _, value in records:
        try:
            parsed.append(model.model_validate_json(value))
        except ValidationError:
            bad += 1
    if bad:
        log.warning("review_export_unreadable_records", model=model.__name__, count=bad)
    return parsed, bad


async def _export(options: LabelExportOptions, timeout_s: float) -> Export:
    review = options.review
    items_raw, labels_raw = await asyncio.gather(
        read_topic(
            options.connection,
            review.queue_topic,
            timeout_s=timeout_s,
            max_bytes=AUDIT_MAX_MESSAGE_BYTES,
        ),
        read_topic(
            options.connection,
            review.labels_topic,
            timeout_s=timeout_s,
            max_bytes=options.labels_max_bytes,
        ),
    )
    items, bad_items = _parse(items_raw, ReviewItem)
    labels, bad_labels = _parse(labels_raw, LabelEvent)
    result = export_rows(items, labels, review.seed)
    return Export(
        result.rows,
        result.undecided,
        result.without_item,
        result.other_tenant,
        bad_items + bad_labels,
        result.skipped_ids,
    )


async def labelled_rows(
    options: LabelExportOptions, *, timeout_s: float = 60.0
) -> list[dict[str, Any]]:
    """The labelled answers on the review and labels topics, as benchmark rows."""
    return (await _export(options, timeout_s)).rows


def write_rows(rows: Iterable[Mapping[str, Any]], out: Path) -> int:
    count = 0
    with out.open("w", encoding="utf-8") as sink:
        for row in rows:
            sink.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def run_export(options: LabelExportOptions, out: Path) -> int:
    """The exit code: 0 written, 1 the broker could not be read to the end."""
    try:
        result = asyncio.run(_export(options, 60.0))
    except (KafkaError, OSError, TimeoutError, BrokerAccessDenied) as error:
        print(f"streamproc review export: {error}", file=sys.stderr)
        return 1
    count = write_rows(result.rows, out)
    print(
        f"wrote {count} labelled answers to {out} (left out: {result.undecided} undecided - "
        f"a tie or can't tell, {result.without_item} labels without a review item, "
        f"{result.other_tenant} of another tenant, {result.unreadable} unreadable records)"
    )
    return 0
