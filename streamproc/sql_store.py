"""What the SQL stores (the audit store, the review queue) share: one engine per store
and a schema made on first use.

SQLite (``sqlite:///path``) or PostgreSQL by URL, through SQLAlchemy 2 Core. The engine
never quotes parameters into an error (they hold answers, evidence, reviewers' notes),
and on SQLite waits for the write lock instead of failing, since a writer and a reader
(a sink and an auditor's CLI, two page replicas) often share the file. A reader opens
a store with ``create=False``: it then refuses (:class:`StoreMissing`) where no store is,
instead of leaving an empty one behind.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sqlalchemy import MetaData, create_engine, inspect
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

__all__ = ["SqlStore", "StoreMissing", "engine_options", "engine_url", "shown_url"]


class StoreMissing(LookupError):
    """No store at the URL a reader was given: readers never create one."""

    def __init__(self, url: str, why: str) -> None:
        super().__init__(f"no store at {shown_url(url)}: {why}")
        self.url = url
        self.why = why


def shown_url(url: str) -> str:
    """``url`` fit to print: its password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(an unreadable URL)"


def engine_url(url: str) -> URL | str:
    """The URL the engine opens: a bare ``postgresql://`` means psycopg 3, the driver
    installed with streamproc (SQLAlchemy's own default, psycopg2, is not)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url
    if parsed.drivername == "postgresql":
        return parsed.set(drivername="postgresql+psycopg")
    return parsed


def _missing_sqlite(url: str) -> str | None:
    """Why a ``sqlite:`` URL names no existing store (no file, or an in-memory
    database); None when the file is there, or for another database."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if database in ("", ":memory:"):
        return "an in-memory database holds no store to read"
    if parsed.query.get("uri") != "true" and not Path(database).is_file():
        return f"there is no file {database}"
    return None


def engine_options(url: str) -> dict[str, Any]:
    """The engine's options for ``url``: SQLite waits 30 s for the lock, a server
    database's pooled connections are checked before use."""
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": 30}}
    return {"pool_pre_ping": True}


class SqlStore:
    """A store over the tables of ``metadata``. Constructing it opens nothing; the first
    :meth:`_begin` connects and creates the missing tables. Blocking: call its methods
    off the event loop."""

    def __init__(
        self, url: str, metadata: MetaData, *, echo: bool = False, create: bool = True
    ) -> None:
        self.url = url
        self._metadata = metadata
        self._create = create
        self._engine: Engine = create_engine(
            engine_url(url), echo=echo, hide_parameters=True, **engine_options(url)
        )
        self._ready = False

    def open(self) -> Self:
        """Connect now, as the first call would: make the schema, or with
        ``create=False`` raise :class:`StoreMissing` where there is no store. Errors of
        an unreachable database surface here (SQLAlchemy's)."""
        self._ensure_ready()
        return self

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _begin(self) -> Any:
        """A transaction (``with store._begin() as conn``), the schema made first."""
        self._ensure_ready()
        return self._engine.begin()

    def _ensure_ready(self) -> None:
        if self._ready:
            return
        if not self._create:
            self._require_existing()
        self._create_schema()
        self._ready = True

    def _require_existing(self) -> None:
        """Raise :class:`StoreMissing` unless the store exists: a SQLite file is looked
        for before connecting (connecting would create it), a server database is asked
        for any of the store's tables. An existing store still gains the tables and
        columns of this version on first use."""
        why = _missing_sqlite(self.url)
        if why is not None:
            raise StoreMissing(self.url, why)
        found = inspect(self._engine)
        if not any(found.has_table(name) for name in self._metadata.tables):
            raise StoreMissing(self.url, "the database holds none of the store's tables")

    def _upgrade(self, engine: Engine) -> None:
        """Bring tables made by an older version to this one's shape (after the missing
        tables are created). Each store overrides it when its schema changed; it must be
        idempotent, since every process opening the store runs it."""

    def _create_schema(self, attempts: int = 5) -> None:
        """Create the tables on first use. Two processes opening a fresh store at once
        race between "is it there?" and "create it": the loser gets "already exists",
        which only means the winner made it, so check again instead of failing."""
        for attempt in range(attempts):
            try:
                self._metadata.create_all(self._engine)
                self._upgrade(self._engine)
                return
            except DBAPIError:
                if attempt == attempts - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
