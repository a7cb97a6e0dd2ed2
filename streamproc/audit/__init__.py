"""The audit trail: one tamper-evident record per judged answer.

Pure code only: :mod:`.record` builds the record a worker publishes, :mod:`.chain` hashes
and verifies the chain the store keeps. The store, the sink and the auditor's commands
are edge adapters (``streamproc.audit.store``, ``audit_sink``, ``audit_cli``).
"""

from streamproc.audit.chain import (
    GENESIS,
    ChainBreak,
    ChainRow,
    ChainVerifier,
    Checkpoint,
    canonical_json,
    chain_hash,
    leaf_hash,
    link,
    verify_chain,
)
from streamproc.contracts.audit_record import (
    RECORD_VERSION,
    AuditRecord,
    InputOrigin,
    build_audit_record,
    code_version,
)

__all__ = [
    "GENESIS",
    "RECORD_VERSION",
    "AuditRecord",
    "ChainBreak",
    "ChainRow",
    "ChainVerifier",
    "Checkpoint",
    "InputOrigin",
    "build_audit_record",
    "canonical_json",
    "chain_hash",
    "code_version",
    "leaf_hash",
    "link",
    "verify_chain",
]
