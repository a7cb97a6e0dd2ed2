"""``streamproc review import FILE``: labels from a file onto the labels topic.

The file is read whole and checked before anything is sent (a bad line names its line
number and nothing is published), then every label goes to the labels topic keyed by
answer id, as the review page publishes them, with ``acks=all``: the labels loop then
joins them with their review items like any other label.

Whose the labels are is :mod:`~streamproc.review.label_files.authorship`'s: the reviewer of a
token checked against the tokens file, or ``import:<file name>`` without one.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast, get_args

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from streamproc.contracts.label_events import LabelEvent
from streamproc.kafka.options import KafkaConnection
from streamproc.kafka.security import (
    BrokerAccessDenied,
    aiokafka_options,
    explain_access_errors,
)
from streamproc.kafka.topics import TopicSpec, ensure_topics
from streamproc.review.label_files.authorship import (
    AuthorshipError,
    authorship,
    check_labels,
    read_token,
)
from streamproc.review.label_files.label_file import LabelFileError, read_label_file
from streamproc.review.label_files.label_studio import read_label_studio
from streamproc.review.options import ReviewSettings
from streamproc.verdicts.output_topic import OutputTopic

__all__ = [
    "LabelFormat",
    "LabelImportOptions",
    "publish_labels",
    "read_labels",
    "read_token",
    "run_import",
]

LabelFormat = Literal["jsonl", "label-studio"]


@dataclass(frozen=True, slots=True)
class LabelImportOptions:
    """What an import is told; the composition root builds it once
    (:func:`streamproc.wiring.label_import_options`)."""

    connection: KafkaConnection
    review: ReviewSettings
    """``review.*``: the tokens file a reviewer token is checked against."""
    labels: OutputTopic[LabelEvent]
    """The labels topic, its key and size limit."""
    labels_spec: tuple[TopicSpec, ...]
    """How the labels topic is created where it is missing (as the worker would)."""


def read_labels(
    path: Path,
    fmt: LabelFormat,
    *,
    reviewer: str | None = None,
    tenant: str | None = None,
    author: str | None = None,
) -> list[LabelEvent]:
    """Every label in ``path`` (``jsonl``: docs/labels.md; ``label-studio``: its JSON
    export); :class:`LabelFileError` with line (or task) numbers on bad input.
    ``author``: every label's reviewer, whatever the file says."""
    if fmt == "jsonl":
        return read_label_file(path, reviewer=reviewer, tenant=tenant, author=author)
    if fmt == "label-studio":
        return read_label_studio(path, reviewer=reviewer, tenant=tenant, author=author)
    raise LabelFileError(f"unknown label format {fmt!r}: one of {', '.join(get_args(LabelFormat))}")


async def publish_labels(options: LabelImportOptions, labels: Sequence[LabelEvent]) -> int:
    """Publish ``labels`` to the labels topic (created if missing, as the worker would);
    returns how many the broker acknowledged (all of them, or it raises)."""
    topic, connection = options.labels, options.connection
    await ensure_topics(
        connection.bootstrap_servers, list(options.labels_spec), connection.security
    )
    producer = AIOKafkaProducer(
        bootstrap_servers=connection.bootstrap_servers,
        acks="all",
        **aiokafka_options(connection.security),
    )
    async with explain_access_errors(connection.bootstrap_servers, connection.security):
        await producer.start()
    try:
        pending = []
        for label in labels:
            record = topic.record(label)
            pending.append(await producer.send(record.topic, key=record.key, value=record.value))
        for sent in pending:
            await sent
    finally:
        await producer.stop()
    return len(pending)


def run_import(
    options: LabelImportOptions,
    path: Path,
    fmt: str,
    *,
    reviewer: str | None,
    tenant: str | None,
    token: str | None = None,
) -> int:
    """The exit code: 0 published, 2 a file (or a token) that cannot be used, 1 the
    broker failed. ``reviewer`` is a claim, checked against ``token``'s reviewer."""
    if fmt not in get_args(LabelFormat):
        print(f"streamproc review import: unknown format {fmt!r}", file=sys.stderr)
        return 2
    try:
        who = authorship(options.review, path, token=token, claimed=reviewer)
        proven = who.reviewer
        labels = read_labels(
            path,
            cast(LabelFormat, fmt),
            reviewer=None if proven is None else proven.name,
            tenant=tenant,
            author=who.author,
        )
        if proven is not None:
            check_labels(labels, proven)
    except (LabelFileError, AuthorshipError) as error:
        print(f"streamproc review import: {error}", file=sys.stderr)
        return 2
    if who.author is not None:
        print(
            f"streamproc review import: no reviewer token: the labels are recorded as by "
            f"{who.author!r} (the labels loop counts only reviewers of the tokens file)",
            file=sys.stderr,
        )
    try:
        count = asyncio.run(publish_labels(options, labels))
    except (KafkaError, OSError, BrokerAccessDenied) as error:
        print(f"streamproc review import: publishing failed: {error}", file=sys.stderr)
        return 1
    print(f"published {count} labels to {options.labels.name}")
    return 0
