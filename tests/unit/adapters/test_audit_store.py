"""The audit store on SQLite, the embedded default (the same contract runs on a real
PostgreSQL server in tests/integration/test_audit_store_postgres.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streamproc.adapters.audit_store import AuditStore
from tests.unit.audit.store_contract import StoreContract


class TestSqliteStore(StoreContract):
    @pytest.fixture()
    def store(self, tmp_path: Path) -> Iterator[AuditStore]:
        with AuditStore(f"sqlite:///{tmp_path / 'audit.db'}") as store:
            yield store


def test_the_schema_is_created_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    store = AuditStore(f"sqlite:///{path}")
    assert not path.exists(), "constructing a store opens nothing"
    assert store.find() == [] and store.verify().ok
    assert path.exists()
    store.close()
