"""One label per reviewer, item and form, however often the form is sent.

A double click, a browser retry or a replayed request sends the same label form more than
once, sometimes at the same instant. Each rendered form carries a random form token; the
label it makes has an id derived from (tenant, answer, reviewer, form token), so even a
label sent twice is one label id downstream. Before publishing, the page claims
(tenant, answer, reviewer) in this ledger - a row with a primary key, in the page's
database, so replicas sharing the database agree too. Only the claim's winner publishes;
a request with the same form token is a replay (answered like the first), one with
another form finds the answer labelled.

A claim is forgotten ``memory_s`` after it was made (by then the queue store records the
label, which refuses a second one anyway). A claim left "publishing" by a page that died
mid-publish may be taken over after ``stale_s``; that replay keeps the label id.

:class:`KeyedLocks` serialises the requests of one key inside a page, so a replay waits
for the first request's outcome instead of racing it.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

from sqlalchemy import (
    Column,
    DateTime,
    Index,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    and_,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import ColumnElement

from streamproc.sql_store import SqlStore

__all__ = [
    "FORM_TOKEN",
    "Claim",
    "KeyedLocks",
    "SubmissionKey",
    "SubmissionLedger",
    "form_label_id",
]

FORM_TOKEN: Final = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
"""What a form token looks like (``secrets.token_urlsafe``); anything else is refused."""
_NAMESPACE: Final = uuid.UUID("0b7f2a9e-5c61-4f0e-9d2b-3a6c8e1f7d40")
_ATTEMPTS: Final = 3

State = Literal["publishing", "published"]

_metadata = MetaData()
_submissions = Table(
    "review_submissions",
    _metadata,
    Column("tenant", String(200), nullable=False),
    Column("answer_id", String(200), nullable=False),
    Column("reviewer", String(200), nullable=False),
    Column("form_token", String(64), nullable=False),
    Column("label_id", String(64), nullable=False),
    Column("state", String(16), nullable=False),
    Column("claimed_at", DateTime, nullable=False, comment="UTC"),
    PrimaryKeyConstraint("tenant", "answer_id", "reviewer"),
    Index("ix_review_submissions_claimed", "claimed_at"),
)


@dataclass(frozen=True, slots=True)
class SubmissionKey:
    """Whose label of which answer: at most one label each."""

    tenant: str
    answer_id: str
    reviewer: str


@dataclass(frozen=True, slots=True)
class Claim:
    """The outcome of :meth:`SubmissionLedger.claim`: ``won`` means publish now; else
    ``form_token``/``state`` are those of the request that holds the claim."""

    won: bool
    form_token: str
    label_id: str
    state: State


def form_label_id(key: SubmissionKey, form_token: str) -> str:
    """The label id of a form: the same form sent again makes the same label id."""
    parts = ("review-page", key.tenant, key.answer_id, key.reviewer, form_token)
    return str(uuid.uuid5(_NAMESPACE, "\x1f".join(parts)))


def _naive(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None)


class SubmissionLedger(SqlStore):
    """Claims of (tenant, answer, reviewer). Blocking: call it off the event loop."""

    def __init__(self, url: str, *, memory_s: float = 3600.0, stale_s: float = 120.0) -> None:
        super().__init__(url, _metadata)
        self._memory = timedelta(seconds=memory_s)
        self._stale = timedelta(seconds=stale_s)

    @staticmethod
    def _where(key: SubmissionKey) -> ColumnElement[bool]:
        return and_(
            _submissions.c.tenant == key.tenant,
            _submissions.c.answer_id == key.answer_id,
            _submissions.c.reviewer == key.reviewer,
        )

    def claim(self, key: SubmissionKey, form_token: str, now: datetime) -> Claim:
        """Claim the key for this form; a lost claim says who holds it."""
        moment = _naive(now)
        label_id = form_label_id(key, form_token)
        with self._begin() as conn:
            conn.execute(
                delete(_submissions).where(_submissions.c.claimed_at < moment - self._memory)
            )
        for _ in range(_ATTEMPTS):
            try:
                with self._begin() as conn:
                    conn.execute(
                        insert(_submissions).values(
                            tenant=key.tenant,
                            answer_id=key.answer_id,
                            reviewer=key.reviewer,
                            form_token=form_token,
                            label_id=label_id,
                            state="publishing",
                            claimed_at=moment,
                        )
                    )
                return Claim(True, form_token, label_id, "publishing")
            except IntegrityError:
                pass
            with self._begin() as conn:
                row = conn.execute(select(_submissions).where(self._where(key))).one_or_none()
                if row is None:
                    continue  # forgotten in between: claim again
                if row.state == "publishing" and row.claimed_at < moment - self._stale:
                    # Its page died mid-publish: take it over, keeping a replay's label id.
                    taken = conn.execute(
                        update(_submissions)
                        .where(self._where(key), _submissions.c.claimed_at == row.claimed_at)
                        .values(form_token=form_token, label_id=label_id, claimed_at=moment)
                    )
                    if taken.rowcount == 1:
                        return Claim(True, form_token, label_id, "publishing")
                return Claim(False, row.form_token, row.label_id, row.state)
        raise RuntimeError(f"could not claim the label of answer {key.answer_id!r}")

    def published(self, key: SubmissionKey, form_token: str) -> None:
        """The claim's label is on the labels topic."""
        with self._begin() as conn:
            conn.execute(
                update(_submissions)
                .where(self._where(key), _submissions.c.form_token == form_token)
                .values(state="published")
            )

    def release(self, key: SubmissionKey, form_token: str) -> None:
        """Give the claim up (nothing was published): the reviewer may send again."""
        with self._begin() as conn:
            conn.execute(
                delete(_submissions).where(
                    self._where(key), _submissions.c.form_token == form_token
                )
            )


class KeyedLocks:
    """One asyncio lock per key while anyone holds or waits for it (then forgotten)."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)
