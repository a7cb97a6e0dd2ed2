"""A store as the version before tenant keys made it: one answer id per store, unsigned
checkpoints. SQL both SQLite and PostgreSQL take."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import create_engine, text

from streamproc.audit import canonical_json, link
from tests.unit.audit.audit_samples import make_records

__all__ = ["make_old_store"]


def make_old_store(url: str) -> None:
    """A store as the version before tenant keys made it, holding one record."""
    record = make_records(1)[0]
    body = canonical_json(json.loads(record.model_dump_json()))
    row = link(1, bytes(32), body, record.answer_id)
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "CREATE TABLE audit_records (audit_partition INTEGER NOT NULL, seq BIGINT NOT "
                "NULL, audit_offset BIGINT NOT NULL, answer_id VARCHAR(200) NOT NULL, "
                "conversation_id VARCHAR(200) NOT NULL, tenant VARCHAR(200) NOT NULL, "
                "assistant_id VARCHAR(200) NOT NULL, model VARCHAR(200) NOT NULL, action "
                "VARCHAR(16) NOT NULL, hallucinated BOOLEAN NOT NULL, occurred_at TIMESTAMP NOT "
                "NULL, stored_at TIMESTAMP NOT NULL, record_json TEXT, leaf_hash VARCHAR(64) NOT "
                "NULL, prev_hash VARCHAR(64) NOT NULL, chain_hash VARCHAR(64) NOT NULL, "
                "purged_at TIMESTAMP, PRIMARY KEY (audit_partition, seq), CONSTRAINT "
                "uq_audit_records_answer_id UNIQUE (answer_id))"
            )
        )
        conn.execute(
            text("CREATE INDEX ix_audit_records_conversation ON audit_records (conversation_id)")
        )
        conn.execute(
            text(
                "CREATE TABLE audit_checkpoints (audit_partition INTEGER NOT NULL, seq BIGINT "
                "NOT NULL, chain_hash VARCHAR(64) NOT NULL, at TIMESTAMP NOT NULL, PRIMARY KEY "
                "(audit_partition, seq))"
            )
        )
        conn.execute(
            text(
                "INSERT INTO audit_records VALUES (0, 1, 0, :a, 'conv-1', 'acme', 'helpdesk', "
                ":m, :act, :h, :o, :o, :j, :l, :p, :c, NULL)"
            ),
            {
                "a": record.answer_id,
                "m": record.model,
                "act": record.action.value,
                "h": record.judgement.hallucinated,
                "o": (record.occurred_at - timedelta(0)).replace(tzinfo=None),
                "j": body.decode(),
                "l": row.leaf_hash.hex(),
                "p": row.prev_hash.hex(),
                "c": row.chain_hash.hex(),
            },
        )
    engine.dispose()
