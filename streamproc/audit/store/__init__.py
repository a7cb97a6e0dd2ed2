"""The audit store: audit records in SQL, chained, searchable, verifiable and purgeable.

Searches and exports take one :class:`AuditQuery`. The package splits by reason to
change: ``_schema`` (tables, upgrades), ``_results`` (what reads hand back), ``_read``,
``_write`` (appends, checkpoints, purges) and ``_verify``.

SQLite (``sqlite:///path``) is the embedded default; PostgreSQL
(``postgresql+psycopg://user:pass@host/db``) is for production. Both go through
SQLAlchemy 2 Core, and the schema is created on first use.

Each audit-topic partition is one hash chain (:mod:`streamproc.audit.chain`); a record's
place in it is ``(partition, seq)``. The row keeps the canonical JSON of the record as
published, its leaf hash, the previous head and the new head. Every
``checkpoint_every`` records a checkpoint row remembers the head; the sink also
publishes it to the audit topic, so a store whose tail was cut (checkpoints included)
is still caught by ``verify`` given the topic's checkpoints.

**Reviewers' labels** share the chain: a
:class:`~streamproc.contracts.label_events.LabelAuditEntry` on the audit topic is a leaf like a
record (``leaf = sha256(0x00 || canonical_json(entry))``), kept in ``audit_labels``. One
seq space spans both tables per partition - the head is the highest seq of either - so
``verify`` walks records and labels together, by seq, and a changed, deleted or cut-off
label row breaks the chain exactly as a record row does. :meth:`AuditStore.append` tells
the two apart by content (:func:`~streamproc.audit.label_rows.is_label_entry`: a JSON
object whose ``entry`` is ``"label"``), not by Kafka key, so the store needs nothing of
the stream; labels are deduplicated by ``label_id``. Both tables (and the
``audit_chain_locks`` row each append takes first, which keeps two writers from giving
a record and a label the same seq) are made by the schema creation, so a store from
0.1.0 gains them on first use, with no migration.

A purge (by conversation, or by age) sets ``record_json`` to NULL and stamps
``purged_at``: the texts and evidence are gone, the leaf and chain hashes stay, so the
chain still verifies; for a purged row ``verify`` trusts the stored leaf hash and counts
it (``trusted_leaves``). The labels of a purged answer lose their ``entry_json`` (a
reviewer's note is free text) in the same way, and a label arriving for an answer
already purged is stored purged.
"""

from streamproc.audit.store._results import (
    AmbiguousAnswer,
    AppendResult,
    RecordSummary,
    StoredCheckpoint,
    StoredLabel,
    StoredPurge,
    StoredRecord,
)
from streamproc.audit.store._store import AuditStore
from streamproc.audit.store._verify import PartitionCheck, VerifyReport
from streamproc.audit.store.query import AuditQuery

__all__ = [
    "AmbiguousAnswer",
    "AppendResult",
    "AuditQuery",
    "AuditStore",
    "PartitionCheck",
    "RecordSummary",
    "StoredCheckpoint",
    "StoredLabel",
    "StoredPurge",
    "StoredRecord",
    "VerifyReport",
]
