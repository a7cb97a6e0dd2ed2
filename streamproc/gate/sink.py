"""Where the HTTP path's monitored records go: a port the Kafka side implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from streamproc.verdicts.record import OutboundRecord

__all__ = ["RecordSink", "RecordsNotTaken"]


class RecordsNotTaken(Exception):
    """Some records were definitely not written (the broker refused them, or they never
    left the client): only these may be sent again without writing any record twice."""

    def __init__(self, failed: Sequence[OutboundRecord], cause: str) -> None:
        super().__init__(f"{len(failed)} record(s) not taken: {cause}")
        self.failed = list(failed)
        self.cause = cause


class RecordSink(Protocol):
    """Publishes monitored records (verdict, flag, outcome, audit record, review item) to
    their topics."""

    async def publish(self, records: Sequence[OutboundRecord]) -> None:
        """Return once the records are written. Raise :class:`RecordsNotTaken` naming the
        ones definitely not written; any other exception means none were."""
        ...
