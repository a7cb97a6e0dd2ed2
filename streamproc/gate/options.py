"""Options of the inline gate: budgets, tenants' failure policies, Kafka replies and HTTP
serving.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from streamproc.options import OptionGroup
from streamproc.web.options import HttpLimitSettings

__all__ = ["FailurePolicy", "GateSettings", "KafkaReplyMode", "TenantPolicy"]

FailurePolicy = Literal["fail-open", "fail-closed"]
"""As :data:`streamproc.contracts.gate_events.FailurePolicy` (the settings import no contract)."""


KafkaReplyMode = Literal["in-transaction", "immediate"]
"""How the gate sends a Kafka reply (``gate.kafka_reply``)."""
_KAFKA_REPLY_RESERVE_MS: dict[KafkaReplyMode, float] = {"in-transaction": 150.0, "immediate": 50.0}


class TenantPolicy(OptionGroup):
    """One tenant's failure policy (``gate.policies``)."""

    tenant: str = Field(min_length=1)
    policy: FailurePolicy


class GateSettings(OptionGroup):
    """The inline gate (``streamproc gate``): HTTP ``POST /v1/check`` and Kafka request /
    reply over the same judge; its verdicts are published as the worker's are."""

    host: str = Field(default="127.0.0.1", description="Address the gate binds to.")
    port: int = Field(default=8790, ge=0, le=65535)
    default_budget_ms: float = Field(
        default=500.0, gt=0, description="The budget of a request without X-Budget-Ms."
    )
    max_budget_ms: float = Field(
        default=30_000.0, gt=0, description="Larger X-Budget-Ms values are cut to this."
    )
    policy: FailurePolicy = Field(
        default="fail-open",
        description="What an answer that cannot be checked in time gets: fail-open passes "
        "it (verified false), fail-closed withholds it.",
    )
    policies: list[TenantPolicy] = Field(
        default_factory=list, description="Per-tenant overrides of policy (JSON list)."
    )
    batch_max: int = Field(
        default=8, ge=1, description="Most answers judged together in one judge call."
    )
    max_pending_factor: int = Field(
        default=5,
        ge=1,
        description="Requests held (queued or being judged) at most this many times "
        "batch_max; beyond, a request is answered at once by policy (OVERLOADED).",
    )
    settle_reserve_ms: float = Field(
        default=50.0,
        ge=0,
        description="Time kept back from each budget to answer with the cheap checks "
        "(token confidence, records, values) when the model stage has not finished "
        "(at 25 ms, RAGTruth-like answers settled under load replied up to 12 ms late).",
    )
    kafka_reply: KafkaReplyMode = Field(
        default="in-transaction",
        description="Kafka request / reply: in-transaction sends each reply in the "
        "transaction of its verdict (a caller never sees a reply whose verdict was not "
        "published); immediate sends it as soon as it is decided, apart from the "
        "transaction (faster; should the gate fail before the verdict's transaction "
        "commits, the request is decided again and the verdict published may differ "
        "from the reply the caller acted on).",
    )
    kafka_reply_reserve_ms: float | None = Field(
        default=None,
        ge=0,
        description="Kafka request / reply: time kept back from each request's budget for "
        "its reply's way to the caller (the decision is made within the budget less this; "
        "the reply's budget_ms says so). Unset: 150 for in-transaction replies (a decided "
        "reply waits for the transaction under way, then goes in the next), 50 for "
        "immediate ones (BENCHMARKS.md).",
    )
    publish: bool = Field(
        default=True,
        description="Publish each gated answer's verdict, flag, outcome and audit record "
        "(as the worker does). False: a gate with no Kafka at all, for trying it.",
    )
    requests_topic: str = Field(
        default="groundedness.gate-requests",
        description="Kafka request / reply: requests read here, replies sent to each "
        "request's reply-topic header.",
    )
    replies_topic: str = Field(
        default="groundedness.gate-replies",
        description="Kafka request / reply: the default reply topic, created with the "
        "gate's topics; a caller may name its own in each request's reply-topic header.",
    )
    kafka_requests: bool = Field(
        default=True, description="Serve the Kafka request topic too (needs publish)."
    )
    tokens_file: Path | None = Field(
        default=None,
        description="Caller tokens (TOML: [[caller]] name, tenants, token_sha256). Without "
        "it every request is refused (401).",
    )
    reply_topic_pattern: str = Field(
        default=r"gate\.replies\..+",
        description="Kafka request / reply: a reply-topic header must match this regular "
        "expression in full (or be replies_topic); a topic streamproc reads or writes is "
        "refused whatever it matches.",
    )
    kafka_auth: Literal["token", "none"] = Field(
        default="token",
        description="Kafka request / reply: 'token' needs an 'authorization: Bearer <token>' "
        "header naming a caller of tokens_file whose tenants hold the answer's tenant "
        "(none configured: every request refused); 'none' trusts the topic's ACLs.",
    )
    tls_cert: Path | None = Field(default=None, description="PEM certificate: serve HTTPS.")
    tls_key: Path | None = Field(default=None, description="PEM private key of tls_cert.")
    outbox_max_records: int = Field(
        default=20_000,
        ge=1,
        description="HTTP: monitored records held for publishing at most; once reached, new "
        "requests are answered at once by policy (OUTBOX_FULL) and /readyz is 503.",
    )
    outbox_max_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1,
        description="HTTP: bytes of monitored records held for publishing at most (as "
        "outbox_max_records).",
    )
    outbox_stall_s: float = Field(
        default=5.0,
        gt=0,
        description="HTTP: /readyz is 503 (broker_unavailable) while a record has waited "
        "longer than this to be published, or publishing failed this recently.",
    )
    outbox_drain_s: float = Field(
        default=10.0,
        ge=0,
        description="HTTP: on shutdown, wait at most this long for held records to be "
        "published; what is left is logged and counted as lost.",
    )
    max_body_bytes_in_flight: int = Field(
        default=8 * 1024 * 1024,
        ge=1,
        description="HTTP: request bodies held at once (read, queued or judged), in bytes; "
        "beyond, a request is refused at once (503 busy, Retry-After).",
    )
    max_caller_body_bytes_in_flight: int = Field(
        default=2 * 1024 * 1024,
        ge=1,
        description="HTTP: the same for one caller (token), so one caller's large bodies "
        "cannot take the others' share (429 caller_busy, Retry-After).",
    )
    max_streams: int = Field(
        default=256,
        ge=1,
        description="WebSocket /v1/stream: answers streaming at once; beyond, a new stream "
        "is refused at once (busy). Each holds at most worker.max_event_bytes of text, and "
        "its sentence checks queue for the judge as requests do.",
    )
    stream_idle_s: float = Field(
        default=30.0,
        gt=0,
        description="WebSocket /v1/stream: a stream that sends nothing this long is ended "
        "with its answer so far (final, then close code 4000).",
    )
    stream_max_s: float = Field(
        default=600.0,
        gt=0,
        description="WebSocket /v1/stream: a stream open this long is ended with its answer "
        "so far (final, then close code 4001).",
    )

    http: HttpLimitSettings = Field(
        default_factory=HttpLimitSettings,
        description="Timeouts and the connection cap of the HTTP gate.",
    )

    @property
    def reply_reserve_ms(self) -> float:
        """``kafka_reply_reserve_ms``, or the default of ``kafka_reply``."""
        if self.kafka_reply_reserve_ms is not None:
            return self.kafka_reply_reserve_ms
        return _KAFKA_REPLY_RESERVE_MS[self.kafka_reply]

    @model_validator(mode="after")
    def _reply_topic_pattern_compiles(self) -> GateSettings:
        try:
            re.compile(self.reply_topic_pattern)
        except re.error as exc:
            raise ValueError(f"reply_topic_pattern is not a regular expression: {exc}") from None
        return self

    def policy_for(self, tenant: str) -> FailurePolicy:
        """The tenant's failure policy: its override, else ``policy``."""
        for each in self.policies:
            if each.tenant == tenant:
                return each.policy
        return self.policy
