"""The audit store on SQLite, the embedded default (the same contract runs on a real
PostgreSQL server in tests/integration/test_audit_store_postgres.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streamproc.audit import store as audit_store
from streamproc.audit.store import AuditStore
from streamproc.sql_store import StoreMissing
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


def test_a_reader_refuses_where_no_store_is_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    with (
        AuditStore(f"sqlite:///{path}", create=False) as reader,
        pytest.raises(StoreMissing, match="there is no file"),
    ):
        reader.find()
    assert not path.exists()
    with AuditStore(f"sqlite:///{path}") as writer:
        writer.open()
    with AuditStore(f"sqlite:///{path}", create=False) as reader:
        assert reader.open().find() == []


def test_no_module_of_the_audit_store_passes_600_lines() -> None:
    package = Path(audit_store.__file__).parent
    sizes = {p.name: len(p.read_text().splitlines()) for p in package.glob("*.py")}
    assert len(sizes) > 3 and max(sizes.values()) <= 600, sizes
