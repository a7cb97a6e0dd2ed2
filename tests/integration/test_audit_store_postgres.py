"""The audit store's contract on a real PostgreSQL server (the fixture starts one):
records, and reviewers' labels sharing their chain."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamproc.adapters.audit_store import AuditStore
from tests.unit.adapters.test_audit_store_labels import LabelStoreContract
from tests.unit.audit.store_contract import StoreContract


class TestPostgresStore(StoreContract):
    @pytest.fixture()
    def store(self, postgres_database: str) -> Iterator[AuditStore]:
        assert postgres_database.startswith("postgresql+psycopg://")
        with AuditStore(postgres_database) as store:
            yield store


class TestPostgresLabels(LabelStoreContract):
    """Mixed appends, dedup, tampering caught, purges and concurrent writers taking
    turns on the row lock - on PostgreSQL's own locking, not SQLite's."""

    @pytest.fixture()
    def store(self, postgres_database: str) -> Iterator[AuditStore]:
        with AuditStore(postgres_database) as store:
            yield store
