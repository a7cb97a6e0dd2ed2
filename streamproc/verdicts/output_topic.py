"""One output topic: its name, how a record is keyed, encoded and fitted under its size.

A record's headers count against its topic's limit: what they take is kept free
(:func:`header_bytes`) besides the framing overhead.

Every loop that writes (the judging stage, the window loop, its alert hooks) turns a
model into the publisher's :class:`~streamproc.verdicts.record.OutboundRecord`
here and nowhere else, so a topic's key, wire form and ``max.message.bytes`` are decided
once, in :mod:`~streamproc.verdicts.catalog`, and a record changes shape once:
model in, outbound record out.

Two ways to ask, for two kinds of caller:

- :meth:`OutputTopic.prepare` answers :class:`~streamproc.verdicts.fit.TooLarge`
  when a record cannot be made to fit: the judging stage dead-letters that answer and
  goes on.
- :meth:`OutputTopic.record` and :meth:`OutputTopic.forward` raise
  :class:`RecordTooLarge`: for records bounded by construction (aggregates, alerts,
  window state), where one over the limit is a bug the broker would refuse anyway,
  aborting the transaction; raising names the topic before anything is sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from pydantic import BaseModel

from streamproc.verdicts.fit import OVERHEAD_BYTES, Fitter, TooLarge, fit_record, fits
from streamproc.verdicts.record import OutboundRecord

__all__ = ["OutHeaders", "OutputTopic", "Prepared", "RecordTooLarge", "header_bytes"]

M = TypeVar("M", bound=BaseModel)

OutHeaders: TypeAlias = tuple[tuple[str, bytes], ...]
"""Kafka record headers to send, e.g. the ``traceparent`` that continues an answer's
trace (as :mod:`streamproc.telemetry.trace_headers` makes them; named here too so the
output path does not import OpenTelemetry)."""


def header_bytes(headers: OutHeaders) -> int:
    """What ``headers`` take in a record, beyond the :data:`OVERHEAD_BYTES` every record
    keeps free (a name, a value and their varint lengths each): trace context may take
    up to about 9 KB (W3C's limits), more than the overhead holds."""
    return sum(len(name.encode()) + len(value) + 10 for name, value in headers)


class RecordTooLarge(ValueError):
    """A record over its topic's limit where the caller cannot degrade or divert it."""


@dataclass(frozen=True, slots=True)
class Prepared(Generic[M]):
    """A model as it will be published (a verdict possibly trimmed to fit) and its record."""

    model: M
    record: OutboundRecord


@dataclass(frozen=True, slots=True)
class OutputTopic(Generic[M]):
    """One topic the worker writes. Picklable (the judging stage may run in a process of
    its own): ``key`` and ``fit`` are module-level functions."""

    name: str
    max_bytes: int
    """The topic's ``max.message.bytes``, as :func:`~streamproc.kafka.topics.topic_specs`
    creates it."""
    key: Callable[[M], bytes | None] | None = None
    """The record key of a model; None for a topic whose records come already encoded
    (the window state's changelog), written with :meth:`forward` only."""
    fit: Fitter[M] = fit_record
    """How a model is encoded and made to fit (``fit_verdict`` trims a verdict)."""

    def prepare(self, model: M, *, headers: OutHeaders = ()) -> Prepared[M] | TooLarge:
        """The model's record, or why it cannot fit even degraded."""
        if self.key is None:
            raise TypeError(f"topic {self.name!r} takes encoded records only (forward)")
        key = self.key(model)
        fitted = self.fit(model, key, self.max_bytes - header_bytes(headers))
        if isinstance(fitted, TooLarge):
            return fitted
        return Prepared(fitted.model, OutboundRecord(self.name, key, fitted.value, headers=headers))

    def record(self, model: M, *, headers: OutHeaders = ()) -> OutboundRecord:
        """The model's record; :class:`RecordTooLarge` if it cannot fit."""
        prepared = self.prepare(model, headers=headers)
        if isinstance(prepared, TooLarge):
            raise RecordTooLarge(f"{self.name}: {prepared.detail}")
        return prepared.record

    def forward(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        headers: OutHeaders = (),
    ) -> OutboundRecord:
        """A record whose bytes are made already: a late outcome passed on exactly as the
        judging stage wrote it, a changelog entry (``value`` None: a tombstone) for its
        ``partition``. :class:`RecordTooLarge` if it cannot fit."""
        if value is not None and not fits(key, value, self.max_bytes - header_bytes(headers)):
            size = len(key or b"") + len(value)
            raise RecordTooLarge(
                f"{self.name}: record of {size} bytes does not fit the topic's limit of "
                f"{self.max_bytes} bytes ({OVERHEAD_BYTES} kept for framing, "
                f"{header_bytes(headers)} for headers)"
            )
        return OutboundRecord(self.name, key, value, partition, headers)
