"""The audit store's tables, the columns its reads select, and the upgrade of
stores made by older versions."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    inspect,
)
from sqlalchemy import text as sql_text
from sqlalchemy.engine import Engine

_metadata = MetaData()

_records = Table(
    "audit_records",
    _metadata,
    Column("audit_partition", Integer, primary_key=True, comment="audit-topic partition"),
    Column("seq", BigInteger, primary_key=True, comment="1-based place in the chain"),
    Column("audit_offset", BigInteger, nullable=False, comment="audit-topic offset"),
    Column("answer_id", String(200), nullable=False),
    Column("conversation_id", String(200), nullable=False),
    Column("tenant", String(200), nullable=False),
    Column("assistant_id", String(200), nullable=False),
    Column("model", String(200), nullable=False),
    Column("action", String(16), nullable=False),
    Column("hallucinated", Boolean, nullable=False),
    Column("occurred_at", DateTime, nullable=False, comment="UTC"),
    Column("stored_at", DateTime, nullable=False, comment="UTC"),
    Column("record_json", Text, nullable=True, comment="canonical JSON; NULL once purged"),
    Column("leaf_hash", String(64), nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("chain_hash", String(64), nullable=False),
    Column("purged_at", DateTime, nullable=True, comment="UTC"),
    UniqueConstraint("tenant", "answer_id", name="uq_audit_records_tenant_answer"),
    Index("ix_audit_records_answer", "answer_id"),
    Index("ix_audit_records_conversation", "conversation_id"),
    Index("ix_audit_records_tenant_time", "tenant", "occurred_at"),
    Index("ix_audit_records_assistant_time", "assistant_id", "occurred_at"),
    Index("ix_audit_records_time", "occurred_at"),
)

_checkpoints = Table(
    "audit_checkpoints",
    _metadata,
    Column("audit_partition", Integer, primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("chain_hash", String(64), nullable=False),
    Column("at", DateTime, nullable=False, comment="UTC"),
    Column("key_id", String(64), nullable=True, comment="signing key; NULL: unsigned"),
    Column("signature", String(128), nullable=True, comment="Ed25519, hex"),
)

_purges = Table(
    "audit_purges",
    _metadata,
    Column("audit_partition", Integer, primary_key=True, comment="audit-topic partition"),
    Column("seq", BigInteger, primary_key=True, comment="place in the chain, shared with records"),
    Column("purge_id", String(64), nullable=False),
    Column("stored_at", DateTime, nullable=False, comment="UTC"),
    Column("entry_json", Text, nullable=False, comment="canonical JSON of the signed entry"),
    Column("leaf_hash", String(64), nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("chain_hash", String(64), nullable=False),
    comment="signed purge entries: which rows a purge emptied, links of the chain",
)

_labels = Table(
    "audit_labels",
    _metadata,
    Column("audit_partition", Integer, primary_key=True, comment="audit-topic partition"),
    Column("seq", BigInteger, primary_key=True, comment="place in the chain, shared with records"),
    Column("audit_offset", BigInteger, nullable=False, comment="audit-topic offset"),
    Column("label_id", String(200), nullable=False),
    Column("answer_id", String(200), nullable=False),
    Column("tenant", String(200), nullable=False),
    Column("reviewer", String(200), nullable=False),
    Column("answer_label", String(16), nullable=True, comment="NULL: could not tell"),
    Column("agrees_with_judge", Boolean, nullable=True),
    Column("labelled_at", DateTime, nullable=False, comment="UTC"),
    Column("stored_at", DateTime, nullable=False, comment="UTC"),
    Column("entry_json", Text, nullable=True, comment="canonical JSON; NULL once purged"),
    Column("leaf_hash", String(64), nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("chain_hash", String(64), nullable=False),
    Column("purged_at", DateTime, nullable=True, comment="UTC"),
    UniqueConstraint("label_id", name="uq_audit_labels_label_id"),
    Index("ix_audit_labels_answer", "answer_id"),
)

_chain_locks = Table(
    "audit_chain_locks",
    _metadata,
    Column("audit_partition", Integer, primary_key=True),
    Column("last_append_at", DateTime, nullable=False, comment="UTC"),
    comment="one row per chain, written first by every append: appends take turns",
)

_SUMMARY_COLUMNS = (
    _records.c.answer_id,
    _records.c.audit_partition,
    _records.c.seq,
    _records.c.audit_offset,
    _records.c.conversation_id,
    _records.c.tenant,
    _records.c.assistant_id,
    _records.c.model,
    _records.c.action,
    _records.c.hallucinated,
    _records.c.occurred_at,
    _records.c.stored_at,
    _records.c.purged_at,
    _records.c.record_json,
)
"""With the record's JSON: what a summary shows is read from the hashed document, the
columns only once it is purged (then a signed purge entry vouches for them)."""

_STORED_COLUMNS = (
    *_SUMMARY_COLUMNS,
    _records.c.leaf_hash,
    _records.c.prev_hash,
    _records.c.chain_hash,
)

_LABEL_COLUMNS = (
    _labels.c.audit_partition,
    _labels.c.seq,
    _labels.c.audit_offset,
    _labels.c.label_id,
    _labels.c.answer_id,
    _labels.c.tenant,
    _labels.c.reviewer,
    _labels.c.answer_label,
    _labels.c.agrees_with_judge,
    _labels.c.labelled_at,
    _labels.c.stored_at,
    _labels.c.purged_at,
    _labels.c.entry_json,
    _labels.c.leaf_hash,
    _labels.c.prev_hash,
    _labels.c.chain_hash,
)


def upgrade(engine: Engine) -> None:
    """Stores made before answers were keyed by tenant: one answer id per store
    becomes one per (tenant, answer id), and checkpoints gain their signature."""
    found = inspect(engine)
    checkpoint_columns = {c["name"] for c in found.get_columns("audit_checkpoints")}
    unique = {c["name"] for c in found.get_unique_constraints("audit_records")}
    with engine.begin() as conn:
        for name in ("key_id", "signature"):
            if name not in checkpoint_columns:
                kind = _checkpoints.c[name].type.compile(engine.dialect)
                conn.execute(sql_text(f"ALTER TABLE audit_checkpoints ADD COLUMN {name} {kind}"))
        if "uq_audit_records_answer_id" not in unique:
            return
        if engine.dialect.name == "sqlite":
            _rebuild_sqlite_records(conn)
        else:
            conn.execute(
                sql_text("ALTER TABLE audit_records DROP CONSTRAINT uq_audit_records_answer_id")
            )
            conn.execute(
                sql_text(
                    "ALTER TABLE audit_records ADD CONSTRAINT uq_audit_records_tenant_answer "
                    "UNIQUE (tenant, answer_id)"
                )
            )
            for index in _records.indexes:
                if index.name == "ix_audit_records_answer":
                    index.create(conn, checkfirst=True)


def _rebuild_sqlite_records(conn: Connection) -> None:
    """SQLite cannot drop a constraint: copy the records into a table of the new shape,
    in one transaction (a crash leaves the old table as it was)."""
    conn.execute(sql_text("DROP TABLE IF EXISTS audit_records_upgrade"))
    for index in _records.indexes:
        conn.execute(sql_text(f"DROP INDEX IF EXISTS {index.name}"))
    conn.execute(sql_text("ALTER TABLE audit_records RENAME TO audit_records_upgrade"))
    _records.create(conn)
    names = ", ".join(column.name for column in _records.columns)
    conn.execute(
        sql_text(f"INSERT INTO audit_records ({names}) SELECT {names} FROM audit_records_upgrade")
    )
    conn.execute(sql_text("DROP TABLE audit_records_upgrade"))
