"""What the audit store hands back: stored records, labels, purge entries and
checkpoints, and how a row becomes one."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Row,
)

from streamproc.audit.anchors import (
    checkpoint_document,
)
from streamproc.audit.chain import (
    Checkpoint,
)
from streamproc.audit.columns import (
    label_columns,
    record_columns,
)
from streamproc.audit.label_rows import parse_label_entry
from streamproc.contracts.audit_record import AuditRecord
from streamproc.contracts.label_events import LabelAuditEntry

# --- what the store hands back --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordSummary:
    """The searchable columns of one stored record (no texts)."""

    answer_id: str
    partition: int
    seq: int
    offset: int
    conversation_id: str
    tenant: str
    assistant_id: str
    model: str
    action: str
    hallucinated: bool
    occurred_at: datetime
    stored_at: datetime
    purged_at: datetime | None

    def as_json(self) -> dict[str, object]:
        return {
            "answer_id": self.answer_id,
            "partition": self.partition,
            "seq": self.seq,
            "offset": self.offset,
            "conversation_id": self.conversation_id,
            "tenant": self.tenant,
            "assistant_id": self.assistant_id,
            "model": self.model,
            "action": self.action,
            "hallucinated": self.hallucinated,
            "occurred_at": self.occurred_at.isoformat(),
            "stored_at": self.stored_at.isoformat(),
            "purged_at": None if self.purged_at is None else self.purged_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One stored record with its place in the chain. ``record_json`` is the canonical
    text that was hashed; None once purged."""

    summary: RecordSummary
    record_json: str | None
    leaf_hash: str
    prev_hash: str
    chain_hash: str

    @property
    def record(self) -> AuditRecord | None:
        """The record parsed (None once purged)."""
        if self.record_json is None:
            return None
        return AuditRecord.model_validate_json(self.record_json)

    def as_json(self) -> dict[str, object]:
        """Everything stored, the record as a JSON object: one export line. A verifier
        recomputes ``leaf_hash`` from ``canonical_json(record)``."""
        return {
            **self.summary.as_json(),
            "leaf_hash": self.leaf_hash,
            "prev_hash": self.prev_hash,
            "chain_hash": self.chain_hash,
            "record": None if self.record_json is None else json.loads(self.record_json),
        }


@dataclass(frozen=True, slots=True)
class StoredLabel:
    """One reviewer's label as stored, with its place in the chain. ``entry_json`` is
    the canonical text that was hashed; None once purged (the columns stay)."""

    partition: int
    seq: int
    offset: int
    label_id: str
    answer_id: str
    tenant: str
    reviewer: str
    answer_label: str | None
    agrees_with_judge: bool | None
    labelled_at: datetime
    stored_at: datetime
    purged_at: datetime | None
    entry_json: str | None
    leaf_hash: str
    prev_hash: str
    chain_hash: str

    @property
    def entry(self) -> LabelAuditEntry | None:
        """The entry parsed (None once purged)."""
        if self.entry_json is None:
            return None
        return parse_label_entry(json.loads(self.entry_json))

    def as_json(self) -> dict[str, object]:
        """Everything stored, the entry as a JSON object: one export line (``kind``
        tells it from a record's). A verifier recomputes ``leaf_hash`` from
        ``canonical_json(entry)``."""
        return {
            "kind": "audit_label",
            "partition": self.partition,
            "seq": self.seq,
            "offset": self.offset,
            "label_id": self.label_id,
            "answer_id": self.answer_id,
            "tenant": self.tenant,
            "reviewer": self.reviewer,
            "answer_label": self.answer_label,
            "agrees_with_judge": self.agrees_with_judge,
            "labelled_at": self.labelled_at.isoformat(),
            "stored_at": self.stored_at.isoformat(),
            "purged_at": None if self.purged_at is None else self.purged_at.isoformat(),
            "leaf_hash": self.leaf_hash,
            "prev_hash": self.prev_hash,
            "chain_hash": self.chain_hash,
            "entry": None if self.entry_json is None else json.loads(self.entry_json),
        }


@dataclass(frozen=True, slots=True)
class StoredPurge:
    """One signed purge entry, a link of its partition's chain."""

    partition: int
    seq: int
    purge_id: str
    stored_at: datetime
    entry_json: str
    leaf_hash: str
    prev_hash: str
    chain_hash: str

    def as_json(self) -> dict[str, object]:
        """One export line (``kind``: ``audit_purge``); ``leaf_hash`` is the hash of
        ``canonical_json(entry)``."""
        return {
            "kind": "audit_purge",
            "partition": self.partition,
            "seq": self.seq,
            "purge_id": self.purge_id,
            "stored_at": self.stored_at.isoformat(),
            "leaf_hash": self.leaf_hash,
            "prev_hash": self.prev_hash,
            "chain_hash": self.chain_hash,
            "entry": json.loads(self.entry_json),
        }


@dataclass(frozen=True, slots=True)
class StoredCheckpoint:
    """A chain head the store recorded; signed when the sink had a signing key."""

    partition: int
    seq: int
    chain_hash: str
    at: datetime
    key_id: str | None = None
    signature: str | None = None

    def as_json(self) -> dict[str, object]:
        """The checkpoint document, as published on the checkpoint topic (with
        ``key_id`` and ``signature`` when signed)."""
        document: dict[str, object] = checkpoint_document(
            self.partition, self.seq, self.chain_hash, self.at.isoformat()
        )
        if self.signature is not None:
            document.update(key_id=self.key_id, signature=self.signature)
        return document

    @property
    def mark(self) -> Checkpoint:
        return Checkpoint(self.seq, _unhex(self.chain_hash))


class AmbiguousAnswer(LookupError):
    """An answer id stored under more than one tenant: say which tenant."""

    def __init__(self, answer_id: str, tenants: Sequence[str]) -> None:
        super().__init__(
            f"answer {answer_id!r} is stored for tenants {', '.join(sorted(tenants))}: "
            "name one (--tenant)"
        )
        self.tenants = sorted(tenants)


@dataclass(slots=True)
class AppendResult:
    """What one :meth:`AuditStore.append` did."""

    stored: list[str] = field(default_factory=list)
    """Answer ids appended, in chain order."""
    duplicates: list[str] = field(default_factory=list)
    """Answer ids already stored (a redelivery): skipped."""
    labels_stored: list[str] = field(default_factory=list)
    """Label ids of reviewers' labels appended, in chain order."""
    label_duplicates: list[str] = field(default_factory=list)
    """Label ids already stored: skipped."""
    rejected: list[tuple[int, str]] = field(default_factory=list)
    """``(offset, why)`` of values that are neither audit records nor labels: skipped."""
    checkpoints: list[StoredCheckpoint] = field(default_factory=list)
    """Chain heads checkpointed by this append."""
    head: int = 0
    """The partition's last seq after this append (0: nothing was appended)."""


def _shown(row: Row[Any], content: str | None, columns: Callable[[Any], dict[str, Any]]) -> Any:
    """What a row shows: its hashed document's values while it has one, else (purged)
    its columns, which a signed purge entry vouches for. A document that cannot be read
    falls back to the columns too; ``verify`` reports it."""
    if content is not None:
        try:
            return _Values(columns(json.loads(content)))
        except (KeyError, TypeError, ValueError):
            pass
    return row


class _Values:
    """Attribute access over a dict of column values, like a row's."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)


def _summary(row: Row[Any]) -> RecordSummary:
    shown = _shown(row, row.record_json, record_columns)
    return RecordSummary(
        answer_id=shown.answer_id,
        partition=int(row.audit_partition),
        seq=int(row.seq),
        offset=int(row.audit_offset),
        conversation_id=shown.conversation_id,
        tenant=shown.tenant,
        assistant_id=shown.assistant_id,
        model=shown.model,
        action=shown.action,
        hallucinated=bool(shown.hallucinated),
        occurred_at=_aware(shown.occurred_at),
        stored_at=_aware(row.stored_at),
        purged_at=None if row.purged_at is None else _aware(row.purged_at),
    )


def _stored(row: Row[Any]) -> StoredRecord:
    return StoredRecord(
        summary=_summary(row),
        record_json=row.record_json,
        leaf_hash=row.leaf_hash,
        prev_hash=row.prev_hash,
        chain_hash=row.chain_hash,
    )


def _stored_label(row: Row[Any]) -> StoredLabel:
    shown = _shown(row, row.entry_json, label_columns)
    agrees = shown.agrees_with_judge
    return StoredLabel(
        partition=int(row.audit_partition),
        seq=int(row.seq),
        offset=int(row.audit_offset),
        label_id=shown.label_id,
        answer_id=shown.answer_id,
        tenant=shown.tenant,
        reviewer=shown.reviewer,
        answer_label=shown.answer_label,
        agrees_with_judge=None if agrees is None else bool(agrees),
        labelled_at=_aware(shown.labelled_at),
        stored_at=_aware(row.stored_at),
        purged_at=None if row.purged_at is None else _aware(row.purged_at),
        entry_json=row.entry_json,
        leaf_hash=row.leaf_hash,
        prev_hash=row.prev_hash,
        chain_hash=row.chain_hash,
    )


def _stored_purge(row: Row[Any]) -> StoredPurge:
    return StoredPurge(
        partition=int(row.audit_partition),
        seq=int(row.seq),
        purge_id=row.purge_id,
        stored_at=_aware(row.stored_at),
        entry_json=row.entry_json,
        leaf_hash=row.leaf_hash,
        prev_hash=row.prev_hash,
        chain_hash=row.chain_hash,
    )


def _chain_place(stored: StoredRecord | StoredLabel | StoredPurge) -> tuple[int, int]:
    if isinstance(stored, StoredLabel | StoredPurge):
        return stored.partition, stored.seq
    return stored.summary.partition, stored.summary.seq


def _utc(moment: datetime) -> datetime:
    """Naive UTC, as stored (SQLite keeps no zone; one convention for both databases)."""
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _unhex(text: str | None) -> bytes:
    """A stored hex hash; an unreadable one becomes b"" and fails verification."""
    try:
        return bytes.fromhex(text or "")
    except ValueError:
        return b""
