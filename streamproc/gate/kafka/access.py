"""Who may use the gate's Kafka request topic, and where its replies may go.

A request names its reply topic in a header, so without a rule any producer of the
request topic could make the gate write committed records into any topic it can see:
the verdicts, the audit trail, the review queue. :class:`ReplyTopicRule` allows only
``gate.replies_topic`` and names matching ``gate.reply_topic_pattern`` in full, and never
a topic streamproc itself reads or writes, whatever the pattern says.

Requests are authorised as the HTTP gate's are, by the callers' tokens file
(``gate.tokens_file``, ``[[caller]]``): a request carries ``authorization: Bearer
<token>`` as a Kafka record header, the token names a caller, and the caller's tenants
must hold the answer's tenant (:class:`KafkaCallerCheck`). The token travels in the
record, so the request topic should be readable only by the gate (Kafka ACLs); it is
never copied onto any record the gate writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from streamproc.contracts.gate_events import AUTHORIZATION_HEADER, GateError
from streamproc.gate.http.auth import Caller, Callers, callers_for
from streamproc.gate.options import GateSettings

__all__ = [
    "AUTHORIZATION_HEADER",
    "KafkaCallerCheck",
    "ReplyTopicRule",
]


@dataclass(frozen=True, slots=True)
class ReplyTopicRule:
    """Whether a reply may go to a topic (existence aside, see ``reply_topics``). The
    composition root makes it (:func:`streamproc.wiring.reply_topic_rule`): ``internal``
    is every topic streamproc reads or writes but ``default``."""

    default: str
    pattern: re.Pattern[str]
    internal: frozenset[str]
    internal_prefix: str
    """Topics named ``<app_id>.`` and ending in ``changelog`` are loop state."""

    def refusal(self, topic: str) -> str | None:
        """Why no reply may go to ``topic``, or None when one may."""
        if topic in self.internal or (
            topic.startswith(self.internal_prefix) and topic.endswith("changelog")
        ):
            return f"reply-topic {topic!r} is a topic streamproc reads or writes"
        if topic == self.default or self.pattern.fullmatch(topic):
            return None
        return (
            f"reply-topic {topic[:200]!r} does not match gate.reply_topic_pattern "
            f"{self.pattern.pattern!r}"
        )


class KafkaCallerCheck:
    """The token check of Kafka gate requests (``gate.kafka_auth``)."""

    def __init__(self, callers: Callers | None, *, required: bool) -> None:
        """``callers``: None refuses every request when ``required``."""
        self._callers = callers
        self._required = required

    @classmethod
    def for_gate(cls, gate: GateSettings) -> KafkaCallerCheck:
        """The check ``gate.kafka_auth`` asks for; reads ``gate.tokens_file``
        (``TokensFileError`` says what is wrong with it)."""
        required = gate.kafka_auth == "token"
        return cls(callers_for(gate) if required else None, required=required)

    def caller(self, authorization: bytes | None) -> Caller | GateError | None:
        """The caller of the header's token; a GateError when it is missing or unknown;
        None when no token is required."""
        if not self._required:
            return None
        if self._callers is None:
            return GateError(
                error="unauthorized",
                detail="the gate has no tokens file: Kafka requests are refused",
            )
        scheme, _, token = (authorization or b"").decode("latin-1").strip().partition(" ")
        caller = self._callers.authenticate(token.strip()) if scheme.lower() == "bearer" else None
        if caller is None:
            return GateError(
                error="unauthorized",
                detail=f"a valid '{AUTHORIZATION_HEADER}: Bearer <token>' header is required",
            )
        return caller

    @staticmethod
    def tenant_refusal(caller: Caller | None, tenant: str) -> GateError | None:
        """A GateError when ``caller`` may not check ``tenant``'s answers."""
        if caller is None or caller.may_see(tenant):
            return None
        return GateError(
            error="forbidden",
            detail=f"caller {caller.name!r} may not check answers of tenant {tenant[:200]!r}",
        )
