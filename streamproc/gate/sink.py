"""Where the HTTP path's monitored records go: a port the Kafka side implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from streamproc.stream.loop.publisher import OutboundRecord

__all__ = ["RecordSink"]


class RecordSink(Protocol):
    """Publishes the records of one decision (verdict, flag, outcome, audit record,
    review item) to their topics."""

    async def publish(self, records: Sequence[OutboundRecord]) -> None:
        """Return once the records are written; raise when they could not be."""
        ...
