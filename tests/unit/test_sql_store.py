"""The SQL stores' shared base: engine options per database, the schema on first use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, inspect, select
from sqlalchemy.exc import DBAPIError, OperationalError

from streamproc.sql_store import SqlStore, engine_options

_metadata = MetaData()
_things = Table("things", _metadata, Column("id", Integer, primary_key=True))


def test_sqlite_waits_for_the_lock_and_a_server_database_pings_its_pool() -> None:
    assert engine_options("sqlite:///x.db") == {"connect_args": {"timeout": 30}}
    assert engine_options("postgresql+psycopg://u@h/db") == {"pool_pre_ping": True}


def test_the_schema_is_made_on_first_use_only(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    with SqlStore(url, _metadata) as store:
        assert not inspect(store._engine).has_table("things")  # constructing opens nothing
        with store._begin() as conn:
            assert conn.execute(select(_things.c.id)).all() == []
        assert inspect(store._engine).has_table("things")


def test_a_lost_creation_race_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SqlStore(f"sqlite:///{tmp_path}/r.db", _metadata)
    real = _metadata.create_all
    calls: list[int] = []

    def flaky(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("CREATE TABLE things", {}, Exception("already exists"))
        real(*args, **kwargs)

    monkeypatch.setattr(_metadata, "create_all", flaky)
    with store._begin() as conn:
        assert conn.execute(select(_things.c.id)).all() == []
    assert len(calls) == 2
    store.close()


def test_a_schema_that_never_comes_raises_after_the_last_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqlStore(f"sqlite:///{tmp_path}/f.db", _metadata)
    calls: list[int] = []

    def failing(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        raise OperationalError("CREATE TABLE things", {}, Exception("disk I/O error"))

    monkeypatch.setattr(_metadata, "create_all", failing)
    with pytest.raises(DBAPIError):
        store._create_schema(attempts=3)
    assert len(calls) == 3
    store.close()
