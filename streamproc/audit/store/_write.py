"""Writing the audit store: appending records and labels to the chains,
checkpoints and signed purges."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import (
    Column,
    Connection,
    Row,
    insert,
    select,
    tuple_,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import ColumnElement

from streamproc.audit.anchors import (
    purge_document,
)
from streamproc.audit.chain import (
    ChainRow,
    canonical_json,
    link,
)
from streamproc.audit.columns import (
    columns_digest,
    label_columns,
    record_columns,
)
from streamproc.audit.label_rows import is_label_entry, parse_label_entry
from streamproc.audit.signing import Signer
from streamproc.audit.store._read import _PAGE, _ReadingStore
from streamproc.audit.store._results import (
    AppendResult,
    StoredCheckpoint,
    _aware,
    _utc,
)
from streamproc.audit.store._schema import (
    _chain_locks,
    _checkpoints,
    _labels,
    _purges,
    _records,
)
from streamproc.contracts.audit_record import AuditRecord
from streamproc.contracts.label_events import LabelAuditEntry

_APPEND_ATTEMPTS = 3


class _WritingStore(_ReadingStore):
    """The audit store's writes: appending records and labels to the chains,
    checkpoints, and purges."""

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
