"""The audit store's contract on a real PostgreSQL server (the fixture starts one):
records, and reviewers' labels sharing their chain."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamproc.audit.store import AuditStore
from tests.unit.audit.audit_samples import make_records
from tests.unit.audit.keys import CHECKER, SIGNER
from tests.unit.audit.old_store import make_old_store
from tests.unit.audit.store_contract import StoreContract
from tests.unit.audit.test_audit_store_labels import LabelStoreContract


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


def test_a_postgres_store_made_before_tenant_keys_is_upgraded_in_place(
    postgres_database: str,
) -> None:
    make_old_store(postgres_database)
    with AuditStore(postgres_database) as store:
        assert store.verify().ok
        other = make_records(1, tenant="other")[0]
        assert store.append(0, [(9, other.model_dump_json().encode())]).stored == ["ans-0"]
        assert store.checkpoint(0, signer=SIGNER) is not None
        report = store.verify(checker=CHECKER)
        assert report.ok and report.partitions[0].anchored_seq == 2, report.describe()
    with AuditStore(postgres_database) as store:
        assert {s.tenant for s in store.find()} == {"acme", "other"}
