"""The review page's queue: review items read from the queue topic, and who labelled what.

SQLite by default (``settings.review.store_url``), PostgreSQL by URL, through SQLAlchemy
Core; the schema is created on first use. An item is wanted by
``settings.review.labels_per_item`` reviewers, and a seeded share
(``second_label_share``) of items by one more: the doubly labelled items Cohen's kappa
between reviewers is measured on. Which items get the extra reviewer depends only on the
seed and the answer id, so every replica of the page, and every restart, agrees.

The labels themselves are events on the labels topic; the store keeps only who labelled
which answer (so a reviewer is never shown an answer twice) and which items a reviewer
skipped (shown again only after the rest). Methods block: call them off the event loop.

Answer ids are each tenant's own: an item, its labels and its skips are keyed by
(tenant, answer id), so a tenant sending another's answer id first queues its own item
beside the other's, never in its place. The methods that take an answer id take its
``tenant`` too; without it they fall back to the one queued item of that id (the first
by tenant when several tenants share it). Stores made before that are upgraded on
first use (their rows copied into the tenant-keyed tables).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    case,
    exists,
    func,
    insert,
    select,
)
from sqlalchemy import inspect as sql_inspect
from sqlalchemy import text as sql_text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from streamproc.contracts.label_events import ReviewItem
from streamproc.review.page.auth import Reviewer
from streamproc.sql_store import SqlStore

__all__ = ["ReviewQueueStore", "wanted_labels"]

_ADD_ATTEMPTS = 3

_metadata = MetaData()

_items = Table(
    "review_queue_items",
    _metadata,
    Column("tenant", String(200), primary_key=True),
    Column("answer_id", String(200), primary_key=True),
    Column("assistant_id", String(200), nullable=False),
    Column("task_type", String(200), nullable=True),
    Column("sampled_because", String(16), nullable=False),
    Column("judged_at", DateTime, nullable=False, comment="UTC; the queue's order"),
    Column("received_at", DateTime, nullable=False, comment="UTC"),
    Column("wanted_labels", Integer, nullable=False),
    Column("item_json", Text, nullable=False),
    Index("ix_review_queue_items_tenant_judged", "tenant", "judged_at"),
)

_labels = Table(
    "review_queue_labels",
    _metadata,
    Column("label_id", String(200), primary_key=True),
    Column("tenant", String(200), nullable=False),
    Column("answer_id", String(200), nullable=False),
    Column("reviewer", String(200), nullable=False),
    Column("labelled_at", DateTime, nullable=False, comment="UTC"),
    UniqueConstraint(
        "tenant", "answer_id", "reviewer", name="uq_review_queue_labels_answer_reviewer"
    ),
)

_skips = Table(
    "review_queue_skips",
    _metadata,
    Column("tenant", String(200), nullable=False),
    Column("answer_id", String(200), nullable=False),
    Column("reviewer", String(200), nullable=False),
    Column("skipped_at", DateTime, nullable=False, comment="UTC"),
    PrimaryKeyConstraint("tenant", "answer_id", "reviewer"),
)

_LEGACY = ("review_items", "review_labels", "review_skips")
"""The tables of stores keyed by answer id alone (copied over, then dropped)."""


def wanted_labels(
    answer_id: str, *, labels_per_item: int, second_label_share: float, seed: int
) -> int:
    """How many reviewers an item is asked of: ``labels_per_item``, one more for a seeded
    share of answers (the same answer id and seed always draw the same way)."""
    digest = hashlib.sha256(f"review-second-label:{seed}:{answer_id}".encode()).digest()
    draw = int.from_bytes(digest[:8], "big") / 2**64
    return labels_per_item + (1 if draw < second_label_share else 0)


def _utc(moment: datetime) -> datetime:
    """Naive UTC, as both databases store a plain DateTime."""
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


class ReviewQueueStore(SqlStore):
    """The queue of one review page (or several replicas sharing a database); the
    schema is made on first use (:class:`~streamproc.sql_store.SqlStore`)."""

    def __init__(
        self,
        url: str,
        *,
        labels_per_item: int = 1,
        second_label_share: float = 0.0,
        seed: int = 0,
    ) -> None:
        super().__init__(url, _metadata)
        self._labels_per_item = labels_per_item
        self._second_label_share = second_label_share
        self._seed = seed

    def wanted_labels(self, answer_id: str) -> int:
        return wanted_labels(
            answer_id,
            labels_per_item=self._labels_per_item,
            second_label_share=self._second_label_share,
            seed=self._seed,
        )

    def _upgrade(self, engine: Engine) -> None:
        """Copy the rows of a store keyed by answer id alone into the tenant-keyed tables
        (a label or skip takes its item's tenant), then drop the old tables."""
        present = set(sql_inspect(engine).get_table_names())
        if not present & set(_LEGACY):
            return
        with engine.begin() as conn:
            if "review_items" in present:
                conn.execute(
                    sql_text(
                        "INSERT INTO review_queue_items (tenant, answer_id, assistant_id, "
                        "task_type, sampled_because, judged_at, received_at, wanted_labels, "
                        "item_json) SELECT tenant, answer_id, assistant_id, task_type, "
                        "sampled_because, judged_at, received_at, wanted_labels, item_json "
                        "FROM review_items"
                    )
                )
                for table, columns in (
                    ("review_labels", "label_id, answer_id, reviewer, labelled_at"),
                    ("review_skips", "answer_id, reviewer, skipped_at"),
                ):
                    if table in present:
                        _copy_with_tenant(conn, table, columns)
            for table in reversed(_LEGACY):
                if table in present:
                    conn.execute(sql_text(f"DROP TABLE {table}"))

    # -- writing ---------------------------------------------------------------------

    def add(self, items: Iterable[ReviewItem], *, received_at: datetime | None = None) -> int:
        """Queue the items not queued yet (a redelivered item is skipped; another
        tenant's item of the same answer id is not); returns how many were new. One
        transaction: all of them or none."""
        batch: dict[tuple[str, str], ReviewItem] = {}
        for item in items:
            batch.setdefault((item.tenant, item.answer_id), item)
        if not batch:
            return 0
        now = _utc(received_at or datetime.now(UTC))
        answer_ids = sorted({answer_id for _, answer_id in batch})
        for attempt in range(_ADD_ATTEMPTS):
            try:
                with self._begin() as conn:
                    known = {
                        (row.tenant, row.answer_id)
                        for row in conn.execute(
                            select(_items.c.tenant, _items.c.answer_id).where(
                                _items.c.answer_id.in_(answer_ids)
                            )
                        )
                    }
                    rows = [self._row(item, now) for key, item in batch.items() if key not in known]
                    if rows:
                        conn.execute(insert(_items), rows)
                    return len(rows)
            except IntegrityError:
                # Another replica queued one of them in between: look again.
                if attempt == _ADD_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def _row(self, item: ReviewItem, received_at: datetime) -> dict[str, object]:
        return {
            "answer_id": item.answer_id,
            "tenant": item.tenant,
            "assistant_id": item.assistant_id,
            "task_type": item.task_type,
            "sampled_because": item.sampled_because.value,
            "judged_at": _utc(item.judged_at),
            "received_at": received_at,
            "wanted_labels": self.wanted_labels(item.answer_id),
            "item_json": item.model_dump_json(),
        }

    def record_label(
        self,
        answer_id: str,
        reviewer: str,
        label_id: str,
        labelled_at: datetime,
        *,
        tenant: str | None = None,
    ) -> bool:
        """Remember that ``reviewer`` labelled the answer; False if it already had."""
        try:
            with self._begin() as conn:
                conn.execute(
                    insert(_labels).values(
                        label_id=label_id,
                        tenant=self._tenant_of(conn, answer_id, tenant),
                        answer_id=answer_id,
                        reviewer=reviewer,
                        labelled_at=_utc(labelled_at),
                    )
                )
        except IntegrityError:
            return False
        return True

    def skip(
        self,
        answer_id: str,
        reviewer: str,
        *,
        at: datetime | None = None,
        tenant: str | None = None,
    ) -> None:
        """Put the answer at the back of this reviewer's queue (skipped again: further)."""
        moment = _utc(at or datetime.now(UTC))
        with self._begin() as conn:
            owner = self._tenant_of(conn, answer_id, tenant)
            done = conn.execute(
                _skips.update()
                .where(
                    _skips.c.tenant == owner,
                    _skips.c.answer_id == answer_id,
                    _skips.c.reviewer == reviewer,
                )
                .values(skipped_at=moment)
            )
            if done.rowcount == 0:
                conn.execute(
                    insert(_skips).values(
                        tenant=owner, answer_id=answer_id, reviewer=reviewer, skipped_at=moment
                    )
                )

    # -- reading ---------------------------------------------------------------------

    def next_item(self, reviewer: Reviewer) -> ReviewItem | None:
        """The oldest item of the reviewer's tenants that it has not labelled and that
        still wants labels; items it skipped come last, the longest skipped first."""
        skipped = _skips.alias("skipped")
        query = (
            select(_items.c.item_json)
            .select_from(
                _items.outerjoin(
                    skipped,
                    and_(
                        skipped.c.tenant == _items.c.tenant,
                        skipped.c.answer_id == _items.c.answer_id,
                        skipped.c.reviewer == reviewer.name,
                    ),
                )
            )
            .where(*self._open_for(reviewer))
            .order_by(
                case((skipped.c.skipped_at.is_(None), 0), else_=1),
                skipped.c.skipped_at,
                _items.c.judged_at,
                _items.c.tenant,
                _items.c.answer_id,
            )
            .limit(1)
        )
        with self._begin() as conn:
            found = conn.execute(query).scalar_one_or_none()
        return None if found is None else ReviewItem.model_validate_json(found)

    def waiting(self, reviewer: Reviewer) -> int:
        """How many items wait for this reviewer."""
        query = select(func.count()).select_from(_items).where(*self._open_for(reviewer))
        with self._begin() as conn:
            return int(conn.execute(query).scalar_one())

    def _open_for(self, reviewer: Reviewer) -> Sequence[Any]:
        same_answer = and_(
            _labels.c.tenant == _items.c.tenant, _labels.c.answer_id == _items.c.answer_id
        )
        label_count = select(func.count()).select_from(_labels).where(same_answer).scalar_subquery()
        mine = exists().where(same_answer, _labels.c.reviewer == reviewer.name)
        return (
            _items.c.tenant.in_(sorted(reviewer.tenants)),
            ~mine,
            label_count < _items.c.wanted_labels,
        )

    def item_for(
        self, reviewer: Reviewer, answer_id: str, tenant: str | None = None
    ) -> ReviewItem | None:
        """The item, if it is queued and of a tenant the reviewer may see (``tenant``, or
        the first of the reviewer's tenants holding that answer id); None otherwise
        (another tenant's item and an unknown id look alike)."""
        tenants = sorted(reviewer.tenants if tenant is None else reviewer.tenants & {tenant})
        if not tenants:
            return None
        with self._begin() as conn:
            found = conn.execute(
                select(_items.c.item_json)
                .where(_items.c.answer_id == answer_id, _items.c.tenant.in_(tenants))
                .order_by(_items.c.tenant)
                .limit(1)
            ).scalar_one_or_none()
        return None if found is None else ReviewItem.model_validate_json(found)

    def has_labelled(self, answer_id: str, reviewer: str, *, tenant: str | None = None) -> bool:
        """Whether ``reviewer`` labelled the answer (of ``tenant``; None: of any tenant)."""
        with self._begin() as conn:
            found = conn.execute(
                select(_labels.c.label_id).where(
                    _labels.c.answer_id == answer_id,
                    _labels.c.reviewer == reviewer,
                    *_of_tenant(_labels.c.tenant, tenant),
                )
            ).first()
        return found is not None

    def labels_of(self, answer_id: str, *, tenant: str | None = None) -> list[str]:
        """Who labelled the answer (of ``tenant``; None: of any tenant), in order."""
        with self._begin() as conn:
            return list(
                conn.execute(
                    select(_labels.c.reviewer)
                    .where(_labels.c.answer_id == answer_id, *_of_tenant(_labels.c.tenant, tenant))
                    .order_by(_labels.c.labelled_at, _labels.c.reviewer)
                ).scalars()
            )

    def wanted(self, answer_id: str, *, tenant: str | None = None) -> int | None:
        """The item's wanted label count (None when it is not queued)."""
        with self._begin() as conn:
            found = conn.execute(
                select(_items.c.wanted_labels)
                .where(_items.c.answer_id == answer_id, *_of_tenant(_items.c.tenant, tenant))
                .order_by(_items.c.tenant)
                .limit(1)
            ).scalar_one_or_none()
        return None if found is None else int(found)

    @staticmethod
    def _tenant_of(conn: Connection, answer_id: str, tenant: str | None) -> str:
        """``tenant``, or the tenant of the queued item of that answer id (the first by
        tenant; "" when none is queued), for callers that do not say."""
        if tenant is not None:
            return tenant
        found = conn.execute(
            select(_items.c.tenant)
            .where(_items.c.answer_id == answer_id)
            .order_by(_items.c.tenant)
            .limit(1)
        ).scalar_one_or_none()
        return "" if found is None else str(found)


def _of_tenant(column: Any, tenant: str | None) -> tuple[Any, ...]:
    return () if tenant is None else (column == tenant,)


def _copy_with_tenant(conn: Connection, table: str, columns: str) -> None:
    """Copy a legacy labels or skips table, each row taking its item's tenant (rows of
    answers no longer queued take "")."""
    target = "review_queue_labels" if table == "review_labels" else "review_queue_skips"
    selected = ", ".join(f"old.{name.strip()}" for name in columns.split(","))
    conn.execute(
        sql_text(
            f"INSERT INTO {target} (tenant, {columns}) "
            f"SELECT COALESCE(items.tenant, ''), {selected} FROM {table} old "
            "LEFT JOIN review_items items ON items.answer_id = old.answer_id"
        )
    )
