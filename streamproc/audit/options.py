"""Options of the audit trail: the store, signing and checkpoints."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from streamproc.options import OptionGroup

__all__ = ["AuditSettings"]


class AuditSettings(OptionGroup):
    """The audit trail: one record per answer on a compacted topic, stored by the sink."""

    enabled: bool = Field(default=True, description="Publish an audit record per answer.")
    topic: str = "streamproc.audit"
    store_url: str = Field(
        default="sqlite:///streamproc-audit.db",
        description="SQLAlchemy URL of the audit store: sqlite:///path (embedded default) "
        "or postgresql+psycopg://user:pass@host/db.",
    )
    retention_days: int = Field(
        default=400,
        ge=1,
        description="Audit records older than this are purged by 'audit purge --expired' "
        "(default above the 6 months record-keeping rules ask for).",
    )
    checkpoint_every: int = Field(
        default=1000, ge=1, description="Records between chain-head checkpoints per partition."
    )
    checkpoint_interval_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds at most between a partition's new links and a signed checkpoint "
        "that anchors them (also every checkpoint_every records).",
    )
    checkpoint_topic: str = Field(
        default="",
        description="Where the sink publishes signed chain-head checkpoints, apart from the "
        "store (empty: '<topic>.checkpoints').",
    )
    signing_key_file: Path | None = Field(
        default=None,
        description="Ed25519 private key (PEM) that signs checkpoints and purges "
        "('streamproc audit keygen'); kept outside the store. Required by 'audit purge'.",
    )
    verify_key_file: Path | None = Field(
        default=None,
        description="Ed25519 public key (PEM) 'audit verify' checks signatures with.",
    )

    @model_validator(mode="after")
    def _checkpoints_beside_the_audit_topic(self) -> AuditSettings:
        if not self.checkpoint_topic:
            # Frozen: set once, while validating.
            object.__setattr__(self, "checkpoint_topic", f"{self.topic}.checkpoints")
        return self

    log_texts: bool = Field(
        default=False,
        description="Allow evidence, question and answer text in logs (off: never logged).",
    )
