"""What a tamperer with write access to the store's database (and no signing key) does:
shared by the SQLite tamper tests and the end-to-end ones on Kafka and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlalchemy import create_engine, text

from streamproc.audit import canonical_json, chain_hash, leaf_hash
from streamproc.audit.anchors import purge_document
from streamproc.audit.signing import Signer

__all__ = ["append_forged_purge", "rewrite_chain"]

_TABLES = (
    ("audit_records", "record_json"),
    ("audit_labels", "entry_json"),
    ("audit_purges", "entry_json"),
)


def rewrite_chain(url: str, partition: int, seq: int, old: str, new: str) -> None:
    """Edit the JSON of the record at ``seq``, then recompute its leaf and every chain
    hash after it - a chain that verifies on its own, unless something outside vouches
    for the old head."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            content = conn.execute(
                text(
                    "SELECT record_json FROM audit_records WHERE seq = :s AND audit_partition = :p"
                ),
                {"s": seq, "p": partition},
            ).scalar_one()
            edited = content.replace(old, new, 1)
            assert edited != content, "nothing to edit"
            conn.execute(
                text(
                    "UPDATE audit_records SET record_json = :j WHERE seq = :s "
                    "AND audit_partition = :p"
                ),
                {"j": edited, "s": seq, "p": partition},
            )
            links = []
            for table, column in _TABLES:
                links += [
                    (int(row.seq), table, row.content, row.leaf_hash)
                    for row in conn.execute(
                        text(
                            f"SELECT seq, {column} AS content, leaf_hash FROM {table} "
                            "WHERE audit_partition = :p"
                        ),
                        {"p": partition},
                    )
                ]
            prev = bytes(32)
            for place, table, content, stored_leaf in sorted(links):
                leaf = (
                    bytes.fromhex(stored_leaf)
                    if content is None
                    else leaf_hash(content.encode("utf-8"))
                )
                head = chain_hash(prev, leaf)
                conn.execute(
                    text(
                        f"UPDATE {table} SET leaf_hash = :l, prev_hash = :v, chain_hash = :c "
                        "WHERE audit_partition = :p AND seq = :s"
                    ),
                    {"l": leaf.hex(), "v": prev.hex(), "c": head.hex(), "p": partition, "s": place},
                )
                prev = head
    finally:
        engine.dispose()


def append_forged_purge(url: str, partition: int, seq: int, forger: Signer) -> None:
    """Empty the record at ``seq`` by hand and append a purge entry naming it, signed with a key
    that is not the store's, with correct chain hashes."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            row = conn.execute(
                text(
                    "SELECT seq, leaf_hash FROM audit_records WHERE seq = :s "
                    "AND audit_partition = :p"
                ),
                {"s": seq, "p": partition},
            ).one()
            conn.execute(
                text(
                    "UPDATE audit_records SET record_json = NULL, purged_at = :t "
                    "WHERE seq = :s AND audit_partition = :p"
                ),
                {"t": datetime.now(UTC).replace(tzinfo=None), "s": seq, "p": partition},
            )
            heads = []
            for table, _ in _TABLES:
                heads += list(
                    conn.execute(
                        text(
                            f"SELECT seq, chain_hash FROM {table} WHERE audit_partition = :p "
                            "ORDER BY seq DESC LIMIT 1"
                        ),
                        {"p": partition},
                    )
                )
            last, head = max((int(h.seq), h.chain_hash) for h in heads)
            document = forger.sign(
                purge_document(
                    partition, "forged", "by hand", datetime.now(UTC).isoformat(), [(row.seq, "0")]
                )
            )
            body = canonical_json(document)
            leaf = leaf_hash(body)
            conn.execute(
                text(
                    "INSERT INTO audit_purges (audit_partition, seq, purge_id, stored_at, "
                    "entry_json, leaf_hash, prev_hash, chain_hash) VALUES "
                    "(:p, :s, 'forged', :t, :j, :l, :v, :c)"
                ),
                {
                    "p": partition,
                    "s": last + 1,
                    "t": datetime.now(UTC).replace(tzinfo=None),
                    "j": json.dumps(document, sort_keys=True, separators=(",", ":")),
                    "l": leaf.hex(),
                    "v": head,
                    "c": chain_hash(bytes.fromhex(head), leaf).hex(),
                },
            )
    finally:
        engine.dispose()
