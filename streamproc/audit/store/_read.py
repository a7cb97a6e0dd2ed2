"""Reading the audit store: one answer, searches, exports in chain order, heads
and checkpoints."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    Row,
    Table,
    and_,
    func,
    or_,
    select,
    tuple_,
)
from sqlalchemy.sql.elements import ColumnElement

from streamproc.audit.chain import (
    GENESIS,
)
from streamproc.audit.store._results import (
    AmbiguousAnswer,
    RecordSummary,
    StoredCheckpoint,
    StoredLabel,
    StoredPurge,
    StoredRecord,
    _aware,
    _chain_place,
    _stored,
    _stored_label,
    _stored_purge,
    _summary,
    _unhex,
)
from streamproc.audit.store._schema import (
    _LABEL_COLUMNS,
    _STORED_COLUMNS,
    _SUMMARY_COLUMNS,
    _checkpoints,
    _labels,
    _purges,
    _records,
)
from streamproc.audit.store.query import AuditQuery
from streamproc.sql_store import SqlStore

_PAGE = 1000

_EVERYTHING = AuditQuery()
"""The query with no filter: every record."""

_T = TypeVar("_T")


class _ReadingStore(SqlStore):
    """The audit store's reads: one answer, searches and exports in chain order, the
    partitions, heads and checkpoints."""

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
        self, query: AuditQuery = _EVERYTHING, *, limit: int | None = 100
    ) -> list[RecordSummary]:
        """The records ``query`` selects, oldest first (by the answer's
        ``occurred_at``), at most ``limit``."""
        where = query.record_conditions()
        if query.partition is not None:
            where.append(_records.c.audit_partition == query.partition)
        statement = (
            select(*_SUMMARY_COLUMNS)
            .where(*where)
            .order_by(_records.c.occurred_at, _records.c.answer_id)
        )
        if limit is not None:
            statement = statement.limit(limit)
        with self._begin() as conn:
            return [_summary(row) for row in conn.execute(statement)]

    def export(self, query: AuditQuery = _EVERYTHING) -> Iterator[StoredRecord]:
        """Every record ``query`` selects, in chain order (partition, seq), read page by
        page."""
        where = query.record_conditions()
        if query.partition is not None:
            where.append(_records.c.audit_partition == query.partition)
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

    def export_labels(self, query: AuditQuery = _EVERYTHING) -> Iterator[StoredLabel]:
        """The labels of every answer whose record ``query`` selects (all labels when it
        selects no records), in chain order (partition, seq), read page by page.
        ``query.partition`` is the label's own chain."""
        label_where: list[ColumnElement[bool]] = []
        if query.selects_records:
            answers = select(_records.c.tenant, _records.c.answer_id).where(
                *query.record_conditions()
            )
            label_where.append(tuple_(_labels.c.tenant, _labels.c.answer_id).in_(answers))
        if query.partition is not None:
            label_where.append(_labels.c.audit_partition == query.partition)
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
        self, query: AuditQuery = _EVERYTHING
    ) -> Iterator[StoredRecord | StoredLabel | StoredPurge]:
        """:meth:`export` and :meth:`export_labels` merged in chain order: unfiltered
        (or by partition only), every link of the chains - the signed purge entries
        too - for an outside verifier."""
        records: Iterator[StoredRecord | StoredLabel | StoredPurge] = self.export(query)
        labels: Iterator[StoredRecord | StoredLabel | StoredPurge] = self.export_labels(query)
        if query.selects_records:
            return heapq.merge(records, labels, key=_chain_place)
        partition = query.partition
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
        return [_checkpoint_of(r) for r in rows]

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
        return sorted((_checkpoint_of(r) for r in rows), key=lambda mark: mark.partition)


def _checkpoint_of(row: Any) -> StoredCheckpoint:
    """A checkpoint row as read."""
    return StoredCheckpoint(
        int(row.audit_partition),
        int(row.seq),
        row.chain_hash,
        _aware(row.at),
        row.key_id,
        row.signature,
    )
