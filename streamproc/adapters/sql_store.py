"""What the SQL stores (the audit store, the review queue) share: one engine per store
and a schema made on first use.

SQLite (``sqlite:///path``) or PostgreSQL by URL, through SQLAlchemy 2 Core. The engine
never quotes parameters into an error (they hold answers, evidence, reviewers' notes),
and on SQLite waits for the write lock instead of failing, since a writer and a reader
(a sink and an auditor's CLI, two page replicas) often share the file.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, Self

from sqlalchemy import MetaData, create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

__all__ = ["SqlStore", "engine_options"]


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

    def __init__(self, url: str, metadata: MetaData, *, echo: bool = False) -> None:
        self.url = url
        self._metadata = metadata
        self._engine: Engine = create_engine(
            url, echo=echo, hide_parameters=True, **engine_options(url)
        )
        self._ready = False

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
        if not self._ready:
            self._create_schema()
            self._ready = True
        return self._engine.begin()

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
