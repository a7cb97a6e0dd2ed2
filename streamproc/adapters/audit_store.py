"""The audit store: audit records in SQL, chained, searchable, verifiable and purgeable.

SQLite (``sqlite:///path``) is the embedded default; PostgreSQL
(``postgresql+psycopg://user:pass@host/db``) is for production. Both go through
SQLAlchemy 2 Core, and the schema is created on first use.

Each audit-topic partition is one hash chain (:mod:`streamproc.audit.chain`); a record's
place in it is ``(partition, seq)``. The row keeps the canonical JSON of the record as
published, its leaf hash, the previous head and the new head. Every
``checkpoint_every`` records a checkpoint row remembers the head; the sink also
publishes it to the audit topic, so a store whose tail was cut (checkpoints included)
is still caught by ``verify`` given the topic's checkpoints.

**Reviewers' labels** share the chain: a
:class:`~streamproc.label_events.LabelAuditEntry` on the audit topic is a leaf like a
record (``leaf = sha256(0x00 || canonical_json(entry))``), kept in ``audit_labels``. One
seq space spans both tables per partition - the head is the highest seq of either - so
``verify`` walks records and labels together, by seq, and a changed, deleted or cut-off
label row breaks the chain exactly as a record row does. :meth:`AuditStore.append` tells
the two apart by content (:func:`~streamproc.audit.label_rows.is_label_entry`: a JSON
object whose ``entry`` is ``"label"``), not by Kafka key, so the store needs nothing of
the stream; labels are deduplicated by ``label_id``. Both tables (and the
``audit_chain_locks`` row each append takes first, which keeps two writers from giving
a record and a label the same seq) are made by the schema creation, so a store from
0.1.0 gains them on first use, with no migration.

A purge (by conversation, or by age) sets ``record_json`` to NULL and stamps
``purged_at``: the texts and evidence are gone, the leaf and chain hashes stay, so the
chain still verifies; for a purged row ``verify`` trusts the stored leaf hash and counts
it (``trusted_leaves``). The labels of a purged answer lose their ``entry_json`` (a
reviewer's note is free text) in the same way, and a label arriving for an answer
already purged is stored purged.
"""

from __future__ import annotations

import heapq
import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Index,
    Integer,
    MetaData,
    Row,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    func,
    insert,
    inspect,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy import text as sql_text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import ColumnElement

from streamproc.adapters.sql_store import SqlStore
from streamproc.audit.anchors import (
    TopicCheckpoint,
    checkpoint_document,
    purge_document,
    purged_rows,
)
from streamproc.audit.chain import (
    GENESIS,
    ChainBreak,
    ChainRow,
    ChainVerifier,
    Checkpoint,
    Problem,
    canonical_json,
    link,
)
from streamproc.audit.columns import (
    LABEL_COLUMNS,
    RECORD_COLUMNS,
    columns_digest,
    comparable,
    label_columns,
    record_columns,
)
from streamproc.audit.label_rows import is_label_entry, parse_label_entry
from streamproc.audit.record import AuditRecord
from streamproc.audit.signing import SignatureChecker, Signer
from streamproc.events import Action
from streamproc.label_events import LabelAuditEntry

__all__ = [
    "AmbiguousAnswer",
    "AppendResult",
    "AuditStore",
    "PartitionCheck",
    "RecordSummary",
    "StoredCheckpoint",
    "StoredLabel",
    "StoredPurge",
    "StoredRecord",
    "VerifyReport",
]

_PAGE = 1000
_APPEND_ATTEMPTS = 3

_T = TypeVar("_T")

_metadata = MetaData()

_records = Table(
    "audit_records",
    _metadata,
    Column("audit_partition", Integer, primary_key=True, comment="audit-topic partition"),
    Column("seq", BigInteger, primary_key=True, comment="1-based place in the chain"),
    Column("audit_offset", BigInteger, nullable=False, comment="audit-topic offset"),
    Column("answer_id", String(200), nullable=False),
    Column("conversation_id", String(200), nullable=False),
    Column("tenant", String(200), nullable=False),
    Column("assistant_id", String(200), nullable=False),
    Column("model", String(200), nullable=False),
    Column("action", String(16), nullable=False),
    Column("hallucinated", Boolean, nullable=False),
    Column("occurred_at", DateTime, nullable=False, comment="UTC"),
    Column("stored_at", DateTime, nullable=False, comment="UTC"),
    Column("record_json", Text, nullable=True, comment="canonical JSON; NULL once purged"),
    Column("leaf_hash", String(64), nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("chain_hash", String(64), nullable=False),
    Column("purged_at", DateTime, nullable=True, comment="UTC"),
    UniqueConstraint("tenant", "answer_id", name="uq_audit_records_tenant_answer"),
    Index("ix_audit_records_answer", "answer_id"),
    Index("ix_audit_records_conversation", "conversation_id"),
    Index("ix_audit_records_tenant_time", "tenant", "occurred_at"),
    Index("ix_audit_records_assistant_time", "assistant_id", "occurred_at"),
    Index("ix_audit_records_time", "occurred_at"),
)

_checkpoints = Table(
    "audit_checkpoints",
    _metadata,
    Column("audit_partition", Integer, primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("chain_hash", String(64), nullable=False),
    Column("at", DateTime, nullable=False, comment="UTC"),
    Column("key_id", String(64), nullable=True, comment="signing key; NULL: unsigned"),
    Column("signature", String(128), nullable=True, comment="Ed25519, hex"),
)

_purges = Table(
    "audit_purges",
    _metadata,
    Column("audit_partition", Integer, primary_key=True, comment="audit-topic partition"),
    Column("seq", BigInteger, primary_key=True, comment="place in the chain, shared with records"),
    Column("purge_id", String(64), nullable=False),
    Column("stored_at", DateTime, nullable=False, comment="UTC"),
    Column("entry_json", Text, nullable=False, comment="canonical JSON of the signed entry"),
    Column("leaf_hash", String(64), nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("chain_hash", String(64), nullable=False),
    comment="signed purge entries: which rows a purge emptied, links of the chain",
)

_labels = Table(
    "audit_labels",
    _metadata,
    Column("audit_partition", Integer, primary_key=True, comment="audit-topic partition"),
    Column("seq", BigInteger, primary_key=True, comment="place in the chain, shared with records"),
    Column("audit_offset", BigInteger, nullable=False, comment="audit-topic offset"),
    Column("label_id", String(200), nullable=False),
    Column("answer_id", String(200), nullable=False),
    Column("tenant", String(200), nullable=False),
    Column("reviewer", String(200), nullable=False),
    Column("answer_label", String(16), nullable=True, comment="NULL: could not tell"),
    Column("agrees_with_judge", Boolean, nullable=True),
    Column("labelled_at", DateTime, nullable=False, comment="UTC"),
    Column("stored_at", DateTime, nullable=False, comment="UTC"),
    Column("entry_json", Text, nullable=True, comment="canonical JSON; NULL once purged"),
    Column("leaf_hash", String(64), nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("chain_hash", String(64), nullable=False),
    Column("purged_at", DateTime, nullable=True, comment="UTC"),
    UniqueConstraint("label_id", name="uq_audit_labels_label_id"),
    Index("ix_audit_labels_answer", "answer_id"),
)

_chain_locks = Table(
    "audit_chain_locks",
    _metadata,
    Column("audit_partition", Integer, primary_key=True),
    Column("last_append_at", DateTime, nullable=False, comment="UTC"),
    comment="one row per chain, written first by every append: appends take turns",
)

_SUMMARY_COLUMNS = (
    _records.c.answer_id,
    _records.c.audit_partition,
    _records.c.seq,
    _records.c.audit_offset,
    _records.c.conversation_id,
    _records.c.tenant,
    _records.c.assistant_id,
    _records.c.model,
    _records.c.action,
    _records.c.hallucinated,
    _records.c.occurred_at,
    _records.c.stored_at,
    _records.c.purged_at,
    _records.c.record_json,
)
"""With the record's JSON: what a summary shows is read from the hashed document, the
columns only once it is purged (then a signed purge entry vouches for them)."""

_STORED_COLUMNS = (
    *_SUMMARY_COLUMNS,
    _records.c.leaf_hash,
    _records.c.prev_hash,
    _records.c.chain_hash,
)

_LABEL_COLUMNS = (
    _labels.c.audit_partition,
    _labels.c.seq,
    _labels.c.audit_offset,
    _labels.c.label_id,
    _labels.c.answer_id,
    _labels.c.tenant,
    _labels.c.reviewer,
    _labels.c.answer_label,
    _labels.c.agrees_with_judge,
    _labels.c.labelled_at,
    _labels.c.stored_at,
    _labels.c.purged_at,
    _labels.c.entry_json,
    _labels.c.leaf_hash,
    _labels.c.prev_hash,
    _labels.c.chain_hash,
)


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


@dataclass(frozen=True, slots=True)
class PartitionCheck:
    """The verification of one partition's chain."""

    partition: int
    checked: int
    """Links that verified: records and labels."""
    trusted_leaves: int
    last_seq: int
    checkpoints: int
    problem: ChainBreak | None
    labels: int = 0
    """How many of ``checked`` are reviewers' labels."""
    purges: int = 0
    """How many of ``checked`` are signed purge entries."""
    anchored_seq: int = 0
    """The highest seq a signed checkpoint vouches for (0: none); 0 too when no public
    key was given, since then no signature was checked."""
    signed_checkpoints: int = 0

    @property
    def records(self) -> int:
        return self.checked - self.labels - self.purges

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def unanchored(self) -> int:
        """Links after the last signed checkpoint: they verify, but nothing outside the
        store vouches for them yet (a cut there would go unseen)."""
        return max(0, self.last_seq - self.anchored_seq)

    def describe(self) -> str:
        head = (
            f"partition {self.partition}: {self.records} records and {self.labels} labels "
            f"checked through seq {self.last_seq}, {self.purges} purge entries, "
            f"{self.checkpoints} checkpoints ({self.signed_checkpoints} signed and valid), "
            f"{self.trusted_leaves} purged (leaf hash trusted)"
        )
        if self.problem is not None:
            return f"{head}; BROKEN at {self.problem.describe()}"
        if self.anchored_seq:
            head += f"; anchored by a signed checkpoint through seq {self.anchored_seq}"
        if self.unanchored:
            head += (
                f"; NOT PROVEN: the {self.unanchored} links after "
                + (f"seq {self.anchored_seq}" if self.anchored_seq else "the chain's start")
                + " are not yet anchored by a signed checkpoint"
            )
        return head


@dataclass(frozen=True, slots=True)
class VerifyReport:
    partitions: tuple[PartitionCheck, ...]
    signatures_checked: bool = True
    """False when no public key was given: checkpoints, purge entries and the tail
    stand unproven."""

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.partitions)

    @property
    def not_proven(self) -> list[str]:
        """What this verification could not prove, in words."""
        found: list[str] = []
        if not self.signatures_checked:
            found.append(
                "no public key given: no checkpoint or purge signature was checked, so a "
                "rewritten chain, a cut tail or a forged purge entry would go unseen"
            )
        for check in self.partitions:
            if check.ok and check.unanchored:
                found.append(
                    f"partition {check.partition}: the {check.unanchored} links after "
                    + (f"seq {check.anchored_seq}" if check.anchored_seq else "the start")
                    + " are not yet anchored"
                )
        return found

    @property
    def first_problem(self) -> PartitionCheck | None:
        """The first broken partition (lowest number), whose ``problem`` names the record."""
        return next((check for check in self.partitions if not check.ok), None)

    def describe(self) -> str:
        if not self.partitions:
            return "no audit records to verify"
        return "\n".join(check.describe() for check in self.partitions)


# --- the store ------------------------------------------------------------------------


class AuditStore(SqlStore):
    """The audit records of one deployment, in SQLite or PostgreSQL.

    Constructing it opens nothing; the first call connects and creates the schema if it
    is missing (:class:`~streamproc.adapters.sql_store.SqlStore`). Methods are blocking
    (call them off the event loop)."""

    def __init__(self, url: str, *, echo: bool = False, create: bool = True) -> None:
        super().__init__(url, _metadata, echo=echo, create=create)

    def _upgrade(self, engine: Engine) -> None:
        """Stores made before answers were keyed by tenant: one answer id per store
        becomes one per (tenant, answer id), and checkpoints gain their signature."""
        found = inspect(engine)
        checkpoint_columns = {c["name"] for c in found.get_columns("audit_checkpoints")}
        unique = {c["name"] for c in found.get_unique_constraints("audit_records")}
        with engine.begin() as conn:
            for name in ("key_id", "signature"):
                if name not in checkpoint_columns:
                    kind = _checkpoints.c[name].type.compile(engine.dialect)
                    conn.execute(
                        sql_text(f"ALTER TABLE audit_checkpoints ADD COLUMN {name} {kind}")
                    )
            if "uq_audit_records_answer_id" not in unique:
                return
            if engine.dialect.name == "sqlite":
                _rebuild_sqlite_records(conn)
            else:
                conn.execute(
                    sql_text("ALTER TABLE audit_records DROP CONSTRAINT uq_audit_records_answer_id")
                )
                conn.execute(
                    sql_text(
                        "ALTER TABLE audit_records ADD CONSTRAINT uq_audit_records_tenant_answer "
                        "UNIQUE (tenant, answer_id)"
                    )
                )
                for index in _records.indexes:
                    if index.name == "ix_audit_records_answer":
                        index.create(conn, checkfirst=True)

    # -- writing -----------------------------------------------------------------------

    def append(
        self,
        partition: int,
        entries: Sequence[tuple[int, AuditRecord | LabelAuditEntry | bytes]],
        *,
        checkpoint_every: int | None = None,
        signer: Signer | None = None,
        now: datetime | None = None,
    ) -> AppendResult:
        """Append ``(audit-topic offset, record or label entry)`` pairs of one partition,
        in offset order, in one transaction. An answer id (a label id) already stored is
        skipped (idempotent: a redelivered batch changes nothing); a value that is
        neither is skipped and reported. Every ``checkpoint_every``-th seq - records and
        labels counted alike - also stores a checkpoint, signed by ``signer``. Answers
        are told apart by (tenant, answer id): two tenants' answers with one id are both
        kept. A label of an answer already purged is stored purged, with a signed purge
        entry naming it (without ``signer`` it is stored whole)."""
        stamp = _utc(now or datetime.now(UTC))
        prepared: list[_Parsed] = []
        result = AppendResult()
        for offset, value in entries:
            parsed = _parse(value)
            if isinstance(parsed, str):
                result.rejected.append((offset, parsed))
            else:
                prepared.append((offset, parsed[0], parsed[1]))
        for attempt in range(_APPEND_ATTEMPTS):
            try:
                with self._begin() as conn:
                    done = self._append(conn, partition, prepared, checkpoint_every, signer, stamp)
            except IntegrityError:
                # Another sink appended to this chain at the same time (a rebalance in
                # flight): read the new head and try again.
                if attempt == _APPEND_ATTEMPTS - 1:
                    raise
                continue
            done.rejected = result.rejected
            return done
        raise AssertionError("unreachable")

    def _append(
        self,
        conn: Connection,
        partition: int,
        prepared: list[_Parsed],
        checkpoint_every: int | None,
        signer: Signer | None,
        stamp: datetime,
    ) -> AppendResult:
        result = AppendResult()
        if not prepared:
            return result
        self._take_turn(conn, partition, stamp)
        records = [item for _, _, item in prepared if isinstance(item, AuditRecord)]
        labels = [item for _, _, item in prepared if isinstance(item, LabelAuditEntry)]
        present = _present_answers(conn, [(r.tenant, r.answer_id) for r in records])
        present_labels = _present(conn, _labels.c.label_id, [e.label.label_id for e in labels])
        # A label that arrives after its answer was purged is stored purged too.
        purged_answers = _present_answers(
            conn, [(e.tenant, e.answer_id) for e in labels], _records.c.purged_at.is_not(None)
        )
        seq, head = self._head(conn, partition)
        rows: list[dict[str, Any]] = []
        label_rows: list[dict[str, Any]] = []
        marks: list[StoredCheckpoint] = []
        emptied: list[tuple[int, str]] = []
        for offset, canonical, item in prepared:
            if isinstance(item, AuditRecord):
                if (item.tenant, item.answer_id) in present:
                    result.duplicates.append(item.answer_id)
                    continue
                present.add((item.tenant, item.answer_id))
                seq += 1
                row = link(seq, head, canonical, item.answer_id)
                rows.append(_row_values(partition, offset, canonical, row, stamp))
                result.stored.append(item.answer_id)
            else:
                label_id = item.label.label_id
                if label_id in present_labels:
                    result.label_duplicates.append(label_id)
                    continue
                present_labels.add(label_id)
                seq += 1
                row = link(seq, head, canonical, item.answer_id, label_id)
                purged = signer is not None and (item.tenant, item.answer_id) in purged_answers
                values = _label_values(partition, offset, canonical, row, stamp, purged=purged)
                label_rows.append(values)
                if purged:
                    columns = label_columns(json.loads(canonical))
                    emptied.append((seq, columns_digest(columns, row.leaf_hash.hex())))
                result.labels_stored.append(label_id)
            head = row.chain_hash
            if checkpoint_every and seq % checkpoint_every == 0:
                marks.append(_checkpoint(partition, seq, head, stamp, signer))
        if rows:
            conn.execute(insert(_records), rows)
        if label_rows:
            conn.execute(insert(_labels), label_rows)
        if emptied and signer is not None:
            reason = "labels of answers already purged"
            seq, head = self._append_purge(
                conn, partition, (seq, head), emptied, reason, signer, stamp
            )
            if checkpoint_every and seq % checkpoint_every == 0:
                marks.append(_checkpoint(partition, seq, head, stamp, signer))
        if marks:
            conn.execute(insert(_checkpoints), [_checkpoint_values(mark) for mark in marks])
        result.checkpoints = marks
        result.head = seq
        return result

    @staticmethod
    def _append_purge(
        conn: Connection,
        partition: int,
        at: tuple[int, bytes],
        emptied: Sequence[tuple[int, str]],
        reason: str,
        signer: Signer,
        stamp: datetime,
    ) -> tuple[int, bytes]:
        """Append the signed purge entry naming ``emptied`` (``(seq, columns digest)``)
        after the head ``at``; the new ``(seq, head)``."""
        purge_id = uuid.uuid4().hex
        document = signer.sign(
            purge_document(partition, purge_id, reason, _aware(stamp).isoformat(), emptied)
        )
        seq = at[0] + 1
        row = link(seq, at[1], canonical_json(document), f"purge {purge_id}")
        conn.execute(
            insert(_purges).values(
                audit_partition=partition,
                seq=seq,
                purge_id=purge_id,
                stored_at=stamp,
                entry_json=canonical_json(document).decode("utf-8"),
                leaf_hash=row.leaf_hash.hex(),
                prev_hash=row.prev_hash.hex(),
                chain_hash=row.chain_hash.hex(),
            )
        )
        return seq, row.chain_hash

    def checkpoint(
        self, partition: int, *, signer: Signer | None, now: datetime | None = None
    ) -> StoredCheckpoint | None:
        """A checkpoint of the partition's head now, if links came after its last one
        (the sink calls this when ``checkpoint_interval_s`` passed); None otherwise."""
        stamp = _utc(now or datetime.now(UTC))
        with self._begin() as conn:
            self._take_turn(conn, partition, stamp)
            seq, head = self._head(conn, partition)
            last = conn.execute(
                select(_checkpoints.c.seq)
                .where(_checkpoints.c.audit_partition == partition)
                .order_by(_checkpoints.c.seq.desc())
                .limit(1)
            ).scalar()
            if seq == 0 or (last is not None and int(last) >= seq):
                return None
            mark = _checkpoint(partition, seq, head, stamp, signer)
            conn.execute(insert(_checkpoints).values(**_checkpoint_values(mark)))
        return mark

    @staticmethod
    def _take_turn(conn: Connection, partition: int, stamp: datetime) -> None:
        """Write the chain's lock row before reading its head. A record and a label go
        to different tables, so no primary key stops two writers from giving both the
        same seq; this write does: PostgreSQL holds the second writer on the row lock
        until the first commits (its reads then see the new head), SQLite on the
        database write lock. Two writers creating the row at once: one gets an
        IntegrityError, and :meth:`append` tries again."""
        took = conn.execute(
            update(_chain_locks)
            .where(_chain_locks.c.audit_partition == partition)
            .values(last_append_at=stamp)
        )
        if took.rowcount == 0:
            conn.execute(
                insert(_chain_locks).values(audit_partition=partition, last_append_at=stamp)
            )

    @staticmethod
    def _head(conn: Connection, partition: int) -> tuple[int, bytes]:
        """The highest seq of records and labels alike, and its chain hash."""
        best: tuple[int, bytes] = (0, GENESIS)
        for table in (_records, _labels, _purges):
            last = conn.execute(
                select(table.c.seq, table.c.chain_hash)
                .where(table.c.audit_partition == partition)
                .order_by(table.c.seq.desc())
                .limit(1)
            ).first()
            if last is not None and int(last.seq) > best[0]:
                best = (int(last.seq), _unhex(last.chain_hash))
        return best

    def head(self, partition: int) -> tuple[int, str]:
        """``(seq, chain hash hex)`` of a partition's last record or label; ``(0,
        genesis)`` if none."""
        with self._begin() as conn:
            seq, head = self._head(conn, partition)
        return seq, head.hex()

    def purge_conversation(
        self, conversation_id: str, *, signer: Signer, now: datetime | None = None
    ) -> int:
        """Drop the texts and evidence of one conversation's records, and the entries
        (notes) of their reviewers' labels; keep their hashes, and append a signed purge
        entry naming each emptied row to its chain, then a signed checkpoint. Returns how
        many records were purged (already purged ones do not count)."""
        return self._purge(
            _records.c.conversation_id == conversation_id,
            f"conversation {conversation_id}",
            signer,
            now,
        )

    def purge_expired(
        self, retention_days: int, *, signer: Signer, now: datetime | None = None
    ) -> int:
        """Purge every record whose answer is older than ``retention_days`` (event time),
        with its labels, as :meth:`purge_conversation` does."""
        cutoff = _utc(now or datetime.now(UTC)) - timedelta(days=retention_days)
        return self._purge(
            _records.c.occurred_at < cutoff, f"older than {retention_days} days", signer, now
        )

    def _purge(
        self, where: ColumnElement[bool], reason: str, signer: Signer, now: datetime | None
    ) -> int:
        stamp = _utc(now or datetime.now(UTC))
        purged = 0
        with self._begin() as conn:
            records = conn.execute(
                select(
                    _records.c.audit_partition,
                    _records.c.seq,
                    _records.c.record_json.label("content"),
                    _records.c.leaf_hash,
                ).where(where, _records.c.purged_at.is_(None), _records.c.record_json.is_not(None))
            ).all()
            # The answers' labels too, those of answers purged before included (a label
            # may arrive days after its answer).
            answers = select(_records.c.tenant, _records.c.answer_id).where(where)
            labels = conn.execute(
                select(
                    _labels.c.audit_partition,
                    _labels.c.seq,
                    _labels.c.entry_json.label("content"),
                    _labels.c.leaf_hash,
                ).where(
                    tuple_(_labels.c.tenant, _labels.c.answer_id).in_(answers),
                    _labels.c.purged_at.is_(None),
                    _labels.c.entry_json.is_not(None),
                )
            ).all()
            emptied: dict[int, list[tuple[int, str]]] = {}
            for table, found, columns in (
                (_records, records, record_columns),
                (_labels, labels, label_columns),
            ):
                for row in found:
                    digest = columns_digest(columns(json.loads(row.content)), row.leaf_hash)
                    emptied.setdefault(int(row.audit_partition), []).append((int(row.seq), digest))
                content = table.c.record_json if table is _records else table.c.entry_json
                for partition, seqs in _by_partition(found).items():
                    for start in range(0, len(seqs), _PAGE):
                        conn.execute(
                            update(table)
                            .where(
                                table.c.audit_partition == partition,
                                table.c.seq.in_(seqs[start : start + _PAGE]),
                            )
                            .values({content.name: None, "purged_at": stamp})
                        )
            purged = len(records)
            for partition in sorted(emptied):
                self._take_turn(conn, partition, stamp)
                head = self._head(conn, partition)
                rows = sorted(emptied[partition])
                seq, chain = self._append_purge(conn, partition, head, rows, reason, signer, stamp)
                mark = _checkpoint(partition, seq, chain, stamp, signer)
                conn.execute(insert(_checkpoints).values(**_checkpoint_values(mark)))
        return purged

    # -- reading -----------------------------------------------------------------------

    def get(self, answer_id: str, tenant: str | None = None) -> StoredRecord | None:
        """The record of one answer; ``tenant`` says whose when two tenants used the
        same answer id (raises :class:`AmbiguousAnswer` if it is needed and missing)."""
        where = [_records.c.answer_id == answer_id]
        if tenant is not None:
            where.append(_records.c.tenant == tenant)
        with self._begin() as conn:
            rows = conn.execute(select(*_STORED_COLUMNS).where(*where).limit(10)).all()
        if len(rows) > 1:
            raise AmbiguousAnswer(answer_id, [row.tenant for row in rows])
        return None if not rows else _stored(rows[0])

    def find(
        self,
        *,
        conversation: str | None = None,
        tenant: str | None = None,
        assistant: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        hallucinated: bool | None = None,
        action: Action | str | None = None,
        limit: int | None = 100,
    ) -> list[RecordSummary]:
        """Records matching every given filter (time: the answer's ``occurred_at``,
        ``since`` inclusive, ``until`` exclusive), oldest first."""
        where = _filters(conversation, tenant, assistant, since, until, hallucinated, action)
        query = (
            select(*_SUMMARY_COLUMNS)
            .where(*where)
            .order_by(_records.c.occurred_at, _records.c.answer_id)
        )
        if limit is not None:
            query = query.limit(limit)
        with self._begin() as conn:
            return [_summary(row) for row in conn.execute(query)]

    def export(
        self,
        *,
        conversation: str | None = None,
        tenant: str | None = None,
        assistant: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        hallucinated: bool | None = None,
        action: Action | str | None = None,
        partition: int | None = None,
    ) -> Iterator[StoredRecord]:
        """Every matching record in chain order (partition, seq), read page by page."""
        where = _filters(conversation, tenant, assistant, since, until, hallucinated, action)
        if partition is not None:
            where.append(_records.c.audit_partition == partition)
        yield from self._in_chain_order(_records, _STORED_COLUMNS, where, _stored)

    def labels_for(self, answer_id: str, tenant: str | None = None) -> list[StoredLabel]:
        """Every reviewer's label of one answer (of ``tenant``'s, when given), in the
        order they were made."""
        where = [_labels.c.answer_id == answer_id]
        if tenant is not None:
            where.append(_labels.c.tenant == tenant)
        with self._begin() as conn:
            rows = conn.execute(
                select(*_LABEL_COLUMNS)
                .where(*where)
                .order_by(_labels.c.labelled_at, _labels.c.audit_partition, _labels.c.seq)
            ).all()
        return [_stored_label(row) for row in rows]

    def export_labels(
        self,
        *,
        conversation: str | None = None,
        tenant: str | None = None,
        assistant: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        hallucinated: bool | None = None,
        action: Action | str | None = None,
        partition: int | None = None,
    ) -> Iterator[StoredLabel]:
        """The labels of every matching record's answer (all labels when no record
        filter is given), in chain order (partition, seq), read page by page.
        ``partition`` is the label's own chain."""
        where = _filters(conversation, tenant, assistant, since, until, hallucinated, action)
        label_where: list[ColumnElement[bool]] = []
        if where:
            answers = select(_records.c.tenant, _records.c.answer_id).where(*where)
            label_where.append(tuple_(_labels.c.tenant, _labels.c.answer_id).in_(answers))
        if partition is not None:
            label_where.append(_labels.c.audit_partition == partition)
        yield from self._in_chain_order(_labels, _LABEL_COLUMNS, label_where, _stored_label)

    def _in_chain_order(
        self,
        table: Table,
        columns: Sequence[Any],
        where: Sequence[ColumnElement[bool]],
        convert: Callable[[Row[Any]], _T],
    ) -> Iterator[_T]:
        """The rows of ``table`` (records or labels) matching ``where``, in chain order
        (partition, seq), converted. Read a page at a time, each page in a transaction
        of its own and after the last place the one before reached: an export of any
        length holds no transaction open. ``columns`` include the partition and seq."""
        after: tuple[int, int] | None = None
        while True:
            page_where = list(where)
            if after is not None:
                page_where.append(
                    or_(
                        table.c.audit_partition > after[0],
                        and_(table.c.audit_partition == after[0], table.c.seq > after[1]),
                    )
                )
            query = (
                select(*columns)
                .where(*page_where)
                .order_by(table.c.audit_partition, table.c.seq)
                .limit(_PAGE)
            )
            with self._begin() as conn:
                page = conn.execute(query).all()
            yield from (convert(row) for row in page)
            if len(page) < _PAGE:
                return
            after = (int(page[-1].audit_partition), int(page[-1].seq))

    def export_entries(
        self,
        *,
        conversation: str | None = None,
        tenant: str | None = None,
        assistant: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        hallucinated: bool | None = None,
        action: Action | str | None = None,
        partition: int | None = None,
    ) -> Iterator[StoredRecord | StoredLabel | StoredPurge]:
        """:meth:`export` and :meth:`export_labels` merged in chain order: unfiltered
        (or by partition only), every link of the chains - the signed purge entries
        too - for an outside verifier."""
        filters: dict[str, Any] = {
            "conversation": conversation,
            "tenant": tenant,
            "assistant": assistant,
            "since": since,
            "until": until,
            "hallucinated": hallucinated,
            "action": action,
            "partition": partition,
        }
        records: Iterator[StoredRecord | StoredLabel | StoredPurge] = self.export(**filters)
        labels: Iterator[StoredRecord | StoredLabel | StoredPurge] = self.export_labels(**filters)
        if any(value is not None for name, value in filters.items() if name != "partition"):
            return heapq.merge(records, labels, key=_chain_place)
        where = [] if partition is None else [_purges.c.audit_partition == partition]
        purges: Iterator[StoredRecord | StoredLabel | StoredPurge] = self._in_chain_order(
            _purges, tuple(_purges.c), where, _stored_purge
        )
        return heapq.merge(records, labels, purges, key=_chain_place)

    def partitions(self) -> list[int]:
        """Every partition with records, labels or checkpoints."""
        with self._begin() as conn:
            found = set(conn.execute(select(_records.c.audit_partition).distinct()).scalars())
            found.update(conn.execute(select(_labels.c.audit_partition).distinct()).scalars())
            found.update(conn.execute(select(_purges.c.audit_partition).distinct()).scalars())
            found.update(conn.execute(select(_checkpoints.c.audit_partition).distinct()).scalars())
        return sorted(found)

    def checkpoints(self, partition: int) -> list[StoredCheckpoint]:
        with self._begin() as conn:
            rows = conn.execute(
                select(_checkpoints)
                .where(_checkpoints.c.audit_partition == partition)
                .order_by(_checkpoints.c.seq)
            ).all()
        return [
            StoredCheckpoint(
                int(r.audit_partition),
                int(r.seq),
                r.chain_hash,
                _aware(r.at),
                r.key_id,
                r.signature,
            )
            for r in rows
        ]

    def latest_checkpoints(self) -> list[StoredCheckpoint]:
        """The last checkpoint of every partition that has one."""
        with self._begin() as conn:
            last = (
                select(_checkpoints.c.audit_partition, func.max(_checkpoints.c.seq).label("seq"))
                .group_by(_checkpoints.c.audit_partition)
                .subquery()
            )
            rows = conn.execute(
                select(_checkpoints).join(
                    last,
                    and_(
                        _checkpoints.c.audit_partition == last.c.audit_partition,
                        _checkpoints.c.seq == last.c.seq,
                    ),
                )
            ).all()
        return sorted(
            (
                StoredCheckpoint(
                    int(r.audit_partition),
                    int(r.seq),
                    r.chain_hash,
                    _aware(r.at),
                    r.key_id,
                    r.signature,
                )
                for r in rows
            ),
            key=lambda mark: mark.partition,
        )

    # -- verifying ---------------------------------------------------------------------

    def verify(
        self,
        partition: int | None = None,
        since_seq: int | None = None,
        until_seq: int | None = None,
        *,
        extra_checkpoints: Mapping[int, Sequence[Checkpoint | TopicCheckpoint]] | None = None,
        checker: SignatureChecker | None = None,
    ) -> VerifyReport:
        """Check the chains (one partition or all) from ``since_seq`` to ``until_seq``
        (inclusive; default: the whole chain). Each check names the first bad link: an
        altered record (leaf mismatch), an indexed column that differs from its hashed
        document, a deleted link (seq gap), a rewritten chain (a checkpoint whose head it
        no longer reaches), a cut tail (a checkpoint past the end), a row emptied by no
        signed purge entry, a forged purge entry or checkpoint. ``extra_checkpoints``:
        chain heads from outside the store (the checkpoint topic, a file). ``checker``:
        the public key; without it no signature is checked and the report says so."""
        extra = extra_checkpoints or {}
        if partition is not None:
            chosen = [partition]
        else:
            chosen = sorted(set(self.partitions()) | set(extra))
        return VerifyReport(
            tuple(
                self._verify_partition(p, since_seq, until_seq, list(extra.get(p, ())), checker)
                for p in chosen
            ),
            signatures_checked=checker is not None,
        )

    def _verify_partition(
        self,
        partition: int,
        since_seq: int | None,
        until_seq: int | None,
        extra: list[Checkpoint | TopicCheckpoint],
        checker: SignatureChecker | None,
    ) -> PartitionCheck:
        first = max(1, since_seq or 1)
        marks, signed, forged = _weigh_checkpoints(self.checkpoints(partition), extra, checker)
        if until_seq is not None:
            marks = [mark for mark in marks if mark.seq <= until_seq]
        if forged is not None:
            return PartitionCheck(partition, 0, 0, 0, len(marks), forged)
        purges = self._purge_entries(partition, checker)
        prev = GENESIS
        if first > 1:
            with self._begin() as conn:
                anchor = None
                for table in (_records, _labels, _purges):
                    anchor = (
                        anchor
                        or conn.execute(
                            select(table.c.chain_hash).where(
                                table.c.audit_partition == partition, table.c.seq == first - 1
                            )
                        ).scalar()
                    )
            if anchor is None:
                missing = ChainBreak(
                    first - 1, "seq_gap", "the record before the range is missing", None
                )
                return PartitionCheck(partition, 0, 0, first - 1, len(marks), missing)
            prev = _unhex(anchor)
        verifier = ChainVerifier(prev, first, marks)
        labels = purge_links = 0
        for row in self._chain_rows(partition, first, until_seq, purges):
            if verifier.feed(row) is not None:
                break
            labels += row.label_id is not None
            purge_links += row.seq in purges.links
        problem = verifier.finish(to_end=until_seq is None)
        last = verifier.next_seq - 1
        reached = [mark.seq for mark in signed if mark.seq <= last]
        return PartitionCheck(
            partition,
            verifier.checked,
            verifier.trusted_leaves,
            last,
            len(marks),
            problem,
            labels,
            purge_links,
            anchored_seq=max(reached, default=0) if problem is None else 0,
            signed_checkpoints=len(signed),
        )

    def _purge_entries(self, partition: int, checker: SignatureChecker | None) -> _Purges:
        """The partition's purge entries: which rows each signed one emptied, and the
        entries whose signature fails."""
        found = _Purges()
        with self._begin() as conn:
            rows = conn.execute(
                select(_purges.c.seq, _purges.c.entry_json).where(
                    _purges.c.audit_partition == partition
                )
            ).all()
        for row in rows:
            seq = int(row.seq)
            found.links.add(seq)
            try:
                document = json.loads(row.entry_json)
            except ValueError:
                found.forged[seq] = "the purge entry is not JSON"
                continue
            if not isinstance(document, dict) or document.get("partition") != partition:
                found.forged[seq] = "the purge entry names another partition"
            elif checker is not None and not checker.valid(document):
                found.forged[seq] = "the purge entry's signature does not verify: it was forged"
            else:
                found.emptied.update(purged_rows(document))
        return found

    def _chain_rows(
        self, partition: int, first: int, until: int | None, purges: _Purges
    ) -> Iterator[ChainRow]:
        """The partition's links, records, labels and purge entries merged by seq."""
        return heapq.merge(
            self._table_rows(_records, partition, first, until, purges),
            self._table_rows(_labels, partition, first, until, purges),
            self._table_rows(_purges, partition, first, until, purges),
            key=lambda row: row.seq,
        )

    def _table_rows(
        self, table: Table, partition: int, first: int, until: int | None, purges: _Purges
    ) -> Iterator[ChainRow]:
        if table is _purges:
            columns: tuple[Any, ...] = (
                table.c.purge_id.label("name"),
                table.c.entry_json.label("content"),
            )
        elif table is _labels:
            columns = (
                table.c.answer_id.label("name"),
                table.c.entry_json.label("content"),
                *(table.c[name] for name in LABEL_COLUMNS if name != "answer_id"),
            )
        else:
            columns = (
                table.c.answer_id.label("name"),
                table.c.record_json.label("content"),
                *(table.c[name] for name in RECORD_COLUMNS if name != "answer_id"),
            )
        columns = (
            table.c.audit_partition,
            table.c.seq,
            *columns,
            table.c.leaf_hash,
            table.c.prev_hash,
            table.c.chain_hash,
        )
        where = [table.c.audit_partition == partition, table.c.seq >= first]
        if until is not None:
            where.append(table.c.seq <= until)

        def chain_row(row: Row[Any]) -> ChainRow:
            if table is _purges:
                name, label_id = f"purge {row.name}", None
                fault = purges.fault(int(row.seq))
            elif table is _labels:
                name, label_id = row.name, row.label_id
                fault = _column_fault(row, label_columns, LABEL_COLUMNS, "entry", purges)
            else:
                name, label_id = row.name, None
                fault = _column_fault(row, record_columns, RECORD_COLUMNS, "record", purges)
            return ChainRow(
                seq=int(row.seq),
                leaf_hash=_unhex(row.leaf_hash),
                prev_hash=_unhex(row.prev_hash),
                chain_hash=_unhex(row.chain_hash),
                content=None if row.content is None else row.content.encode("utf-8"),
                name=name,
                label_id=label_id,
                fault=fault,
            )

        yield from self._in_chain_order(table, columns, where, chain_row)


@dataclass(slots=True)
class _Purges:
    """A partition's purge entries, read before its chain is walked."""

    links: set[int] = field(default_factory=set)
    """The seqs of purge entries."""
    emptied: dict[int, str] = field(default_factory=dict)
    """seq -> columns digest of each row a valid purge entry emptied."""
    forged: dict[int, str] = field(default_factory=dict)
    """seq of a purge entry -> why it is not one."""

    def fault(self, seq: int) -> tuple[Problem, str] | None:
        why = self.forged.get(seq)
        return None if why is None else ("purge_forged", why)


def _column_fault(
    row: Row[Any],
    columns: Callable[[Any], dict[str, Any]],
    names: Sequence[str],
    noun: str,
    purges: _Purges,
) -> tuple[Problem, str] | None:
    """What is wrong with a row's indexed columns: one that differs from its hashed
    document, or, once emptied, a purge no signed entry accounts for."""
    stored = comparable(
        {name: getattr(row, "name" if name == "answer_id" else name) for name in names}
    )
    if row.content is None:
        vouched = purges.emptied.get(int(row.seq))
        if vouched is None:
            return ("unsigned_purge", f"the {noun} was emptied, but no signed purge entry names it")
        if vouched != columns_digest(stored, row.leaf_hash):
            return (
                "column_mismatch",
                f"the purged {noun}'s columns differ from those its purge entry signed",
            )
        return None
    try:
        expected = comparable(columns(json.loads(row.content)))
    except (KeyError, TypeError, ValueError):
        return ("column_mismatch", f"the hashed {noun} has no readable columns")
    for name in names:
        if stored[name] != expected[name]:
            return (
                "column_mismatch",
                f"column {name} reads {stored[name]!r}, the hashed {noun} says "
                f"{expected[name]!r}: it was altered after it was stored",
            )
    return None


def _weigh_checkpoints(
    stored: Sequence[StoredCheckpoint],
    extra: Sequence[Checkpoint | TopicCheckpoint],
    checker: SignatureChecker | None,
) -> tuple[list[Checkpoint], list[Checkpoint], ChainBreak | None]:
    """Every checkpoint the chain must reach, those of them signed with a valid
    signature (the anchors), and the first whose signature fails."""
    marks: list[Checkpoint] = []
    signed: list[Checkpoint] = []
    forged: ChainBreak | None = None
    documents = [(c.mark, c.as_json(), "the store's") for c in stored] + [
        (c, None, "") if isinstance(c, Checkpoint) else (c.mark, c.document, "a published")
        for c in extra
    ]
    for mark, document, whose in documents:
        if mark not in marks:  # the store's and the topic's copies of one checkpoint
            marks.append(mark)
        if checker is None or document is None or "signature" not in document:
            continue
        if checker.valid(document):
            if mark not in signed:
                signed.append(mark)
        elif forged is None:
            forged = ChainBreak(
                mark.seq,
                "checkpoint_forged",
                f"{whose} checkpoint at seq {mark.seq} does not carry a valid signature",
            )
    return marks, signed, forged


def _rebuild_sqlite_records(conn: Connection) -> None:
    """SQLite cannot drop a constraint: copy the records into a table of the new shape,
    in one transaction (a crash leaves the old table as it was)."""
    conn.execute(sql_text("DROP TABLE IF EXISTS audit_records_upgrade"))
    for index in _records.indexes:
        conn.execute(sql_text(f"DROP INDEX IF EXISTS {index.name}"))
    conn.execute(sql_text("ALTER TABLE audit_records RENAME TO audit_records_upgrade"))
    _records.create(conn)
    names = ", ".join(column.name for column in _records.columns)
    conn.execute(
        sql_text(f"INSERT INTO audit_records ({names}) SELECT {names} FROM audit_records_upgrade")
    )
    conn.execute(sql_text("DROP TABLE audit_records_upgrade"))


# --- helpers --------------------------------------------------------------------------


_Parsed = tuple[int, bytes, AuditRecord | LabelAuditEntry]
"""``(offset, canonical JSON, parsed)`` of one value to append."""


def _parse(
    value: AuditRecord | LabelAuditEntry | bytes,
) -> tuple[bytes, AuditRecord | LabelAuditEntry] | str:
    """The value's canonical JSON (as published, unknown fields kept) and the record or
    label entry it is, or why it is neither - in words that never quote it (a record
    holds evidence, a label a reviewer's note)."""
    kind = "an audit record"
    try:
        if isinstance(value, AuditRecord | LabelAuditEntry):
            document = json.loads(value.model_dump_json())
        else:
            document = json.loads(value)
        if not isinstance(document, dict):
            return "not a JSON object"
        parsed: AuditRecord | LabelAuditEntry
        if is_label_entry(document):
            kind = "a label entry"
            parsed = parse_label_entry(document)
        else:
            parsed = AuditRecord.model_validate(document)
        return canonical_json(document), parsed
    except ValidationError as exc:
        where = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['type']}"
            for error in exc.errors()[:10]
        )
        return f"not {kind} ({exc.error_count()} errors): {where}"
    except ValueError as exc:  # bad JSON, NaN, a lone surrogate
        return f"unreadable: {type(exc).__name__}"


def _row_values(
    partition: int, offset: int, canonical: bytes, row: ChainRow, stamp: datetime
) -> dict[str, Any]:
    """A record's row: its searchable columns copied from the hashed document itself."""
    return {
        "audit_partition": partition,
        "seq": row.seq,
        "audit_offset": offset,
        **record_columns(json.loads(canonical)),
        "stored_at": stamp,
        "record_json": canonical.decode("utf-8"),
        "leaf_hash": row.leaf_hash.hex(),
        "prev_hash": row.prev_hash.hex(),
        "chain_hash": row.chain_hash.hex(),
        "purged_at": None,
    }


def _label_values(
    partition: int,
    offset: int,
    canonical: bytes,
    row: ChainRow,
    stamp: datetime,
    *,
    purged: bool,
) -> dict[str, Any]:
    """A label's row: its searchable columns copied from the hashed entry itself."""
    return {
        "audit_partition": partition,
        "seq": row.seq,
        "audit_offset": offset,
        **label_columns(json.loads(canonical)),
        "stored_at": stamp,
        "entry_json": None if purged else canonical.decode("utf-8"),
        "leaf_hash": row.leaf_hash.hex(),
        "prev_hash": row.prev_hash.hex(),
        "chain_hash": row.chain_hash.hex(),
        "purged_at": stamp if purged else None,
    }


def _present_answers(
    conn: Connection, answers: Sequence[tuple[str, str]], *where: ColumnElement[bool]
) -> set[tuple[str, str]]:
    """Which ``(tenant, answer id)`` pairs the records already hold (read in pages)."""
    wanted = set(answers)
    found: set[tuple[str, str]] = set()
    ids = sorted({answer_id for _, answer_id in wanted})
    for start in range(0, len(ids), _PAGE):
        rows = conn.execute(
            select(_records.c.tenant, _records.c.answer_id).where(
                _records.c.answer_id.in_(ids[start : start + _PAGE]), *where
            )
        )
        found.update(
            (row.tenant, row.answer_id) for row in rows if (row.tenant, row.answer_id) in wanted
        )
    return found


def _by_partition(rows: Sequence[Row[Any]]) -> dict[int, list[int]]:
    grouped: dict[int, list[int]] = {}
    for row in rows:
        grouped.setdefault(int(row.audit_partition), []).append(int(row.seq))
    return grouped


def _checkpoint(
    partition: int, seq: int, head: bytes, stamp: datetime, signer: Signer | None
) -> StoredCheckpoint:
    """The checkpoint of ``head`` at ``seq``, signed when there is a signer."""
    mark = StoredCheckpoint(partition, seq, head.hex(), _aware(stamp))
    if signer is None:
        return mark
    signed = signer.sign(mark.as_json())
    return StoredCheckpoint(
        partition, seq, head.hex(), _aware(stamp), signed["key_id"], signed["signature"]
    )


def _checkpoint_values(mark: StoredCheckpoint) -> dict[str, Any]:
    return {
        "audit_partition": mark.partition,
        "seq": mark.seq,
        "chain_hash": mark.chain_hash,
        "at": _utc(mark.at),
        "key_id": mark.key_id,
        "signature": mark.signature,
    }


def _present(
    conn: Connection,
    column: Column[str],
    values: Sequence[str],
    *where: ColumnElement[bool],
) -> set[str]:
    """Which of ``values`` the column already holds (read in pages)."""
    found: set[str] = set()
    unique = sorted(set(values))
    for start in range(0, len(unique), _PAGE):
        chunk = unique[start : start + _PAGE]
        found.update(conn.execute(select(column).where(column.in_(chunk), *where)).scalars())
    return found


def _filters(
    conversation: str | None,
    tenant: str | None,
    assistant: str | None,
    since: datetime | None,
    until: datetime | None,
    hallucinated: bool | None,
    action: Action | str | None,
) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = []
    if conversation is not None:
        where.append(_records.c.conversation_id == conversation)
    if tenant is not None:
        where.append(_records.c.tenant == tenant)
    if assistant is not None:
        where.append(_records.c.assistant_id == assistant)
    if since is not None:
        where.append(_records.c.occurred_at >= _utc(since))
    if until is not None:
        where.append(_records.c.occurred_at < _utc(until))
    if hallucinated is not None:
        where.append(_records.c.hallucinated == hallucinated)
    if action is not None:
        where.append(_records.c.action == Action(action).value)
    return where


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
