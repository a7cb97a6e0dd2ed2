"""Checkpoint documents and purge entries: the two signed kinds of audit document.

A *checkpoint* records a chain's head - ``{"kind": "audit_checkpoint", "partition",
"seq", "chain_hash", "at"}``; ``seq`` is also the count of links (records, labels and
purge entries) the chain holds up to it - and is signed (:mod:`.signing`). The sink
makes one every ``checkpoint_every`` links or ``checkpoint_interval_s`` seconds and
publishes it to the checkpoint topic, apart from the store.

A *purge entry* is a link of the chain like a record: ``{"entry": "purge", "partition",
"purge_id", "reason", "purged_at", "rows": [[seq, columns digest], ...]}``, signed. It
names every row the purge emptied, with a digest binding the row's remaining columns to
its leaf hash (:func:`~streamproc.audit.columns.columns_digest`): a row emptied by hand
is named by no signed entry, and ``verify`` says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from streamproc.audit.chain import Checkpoint

__all__ = [
    "CHECKPOINT_KIND",
    "PURGE_ENTRY",
    "TopicCheckpoint",
    "checkpoint_document",
    "is_purge_entry",
    "parse_checkpoint",
    "purge_document",
    "purged_rows",
]

CHECKPOINT_KIND: Final = "audit_checkpoint"
PURGE_ENTRY: Final = "purge"


def checkpoint_document(partition: int, seq: int, chain_hash_hex: str, at: str) -> dict[str, Any]:
    """The unsigned checkpoint of ``partition`` at ``seq``."""
    return {
        "kind": CHECKPOINT_KIND,
        "partition": partition,
        "seq": seq,
        "chain_hash": chain_hash_hex,
        "at": at,
    }


@dataclass(frozen=True, slots=True)
class TopicCheckpoint:
    """A checkpoint read from outside the store (the topic or a file), as published."""

    partition: int
    mark: Checkpoint
    document: Mapping[str, Any]


def parse_checkpoint(document: object) -> TopicCheckpoint | None:
    """The checkpoint a JSON document holds, or None when it is none."""
    if not isinstance(document, Mapping) or document.get("kind", CHECKPOINT_KIND) != (
        CHECKPOINT_KIND
    ):
        return None
    try:
        mark = Checkpoint(int(document["seq"]), bytes.fromhex(str(document["chain_hash"])))
        return TopicCheckpoint(int(document["partition"]), mark, dict(document))
    except (KeyError, TypeError, ValueError):
        return None


def purge_document(
    partition: int, purge_id: str, reason: str, purged_at: str, rows: Sequence[tuple[int, str]]
) -> dict[str, Any]:
    """The unsigned purge entry for ``rows`` (``(seq, columns digest)``) of a partition."""
    return {
        "entry": PURGE_ENTRY,
        "record_version": 1,
        "partition": partition,
        "purge_id": purge_id,
        "reason": reason,
        "purged_at": purged_at,
        "rows": [[seq, digest] for seq, digest in rows],
    }


def is_purge_entry(document: Mapping[str, Any]) -> bool:
    return document.get("entry") == PURGE_ENTRY


def purged_rows(document: Mapping[str, Any]) -> dict[int, str]:
    """``seq -> columns digest`` of the rows a purge entry names ({} when unreadable)."""
    try:
        return {int(seq): str(digest) for seq, digest in document["rows"]}
    except (KeyError, TypeError, ValueError):
        return {}
