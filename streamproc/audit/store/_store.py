"""The audit store: its reads, writes and verification over one schema."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from streamproc.audit.store._schema import _metadata, upgrade
from streamproc.audit.store._verify import _VerifyingStore
from streamproc.audit.store._write import _WritingStore

__all__ = ["AuditStore"]


class AuditStore(_WritingStore, _VerifyingStore):
    """The audit records of one deployment, in SQLite or PostgreSQL.

    Constructing it opens nothing; the first call connects and creates the schema if it
    is missing (:class:`~streamproc.sql_store.SqlStore`), or with
    ``create=False`` (a reader) refuses where there is no store. Methods are blocking
    (call them off the event loop)."""

    def __init__(self, url: str, *, echo: bool = False, create: bool = True) -> None:
        super().__init__(url, _metadata, echo=echo, create=create)

    def _upgrade(self, engine: Engine) -> None:
        upgrade(engine)
