"""The audit store's contract on a real PostgreSQL server (the fixture starts one)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamproc.adapters.audit_store import AuditStore
from tests.unit.audit.store_contract import StoreContract


class TestPostgresStore(StoreContract):
    @pytest.fixture()
    def store(self, postgres_database: str) -> Iterator[AuditStore]:
        assert postgres_database.startswith("postgresql+psycopg://")
        with AuditStore(postgres_database) as store:
            yield store
