"""One record to publish, as the verdict pipeline hands it to a publisher.

Kafka-free: its size is measured as the producer measures it (a record batch of format v2
holding this record alone, an upper bound of what the broker checks against
``max.message.bytes``), with the same arithmetic as aiokafka's
``DefaultRecordBatchBuilder.estimate_size_in_bytes``, which a unit test compares it with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["OutboundRecord", "estimate_size_in_bytes"]

_BATCH_HEADER_BYTES = 61
"""A record batch's header in format v2 (magic 2)."""
_MAX_RECORD_OVERHEAD = 21
"""A record's own framing at most: length, attributes, timestamp and offset deltas."""


def _varint_size(value: int) -> int:
    """Bytes of ``value`` as a zigzag varint, as Kafka encodes lengths and counts."""
    encoded = (value << 1) ^ (value >> 63)
    size = 1
    while encoded >= 0x80:
        encoded >>= 7
        size += 1
    return size


def _field_size(data: bytes | None) -> int:
    return 1 if data is None else _varint_size(len(data)) + len(data)


def estimate_size_in_bytes(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]
) -> int:
    """The upper bound of one record's size in a batch of its own, in bytes."""
    size = _field_size(key) + _field_size(value) + _varint_size(len(headers))
    for name, data in headers:
        size += _field_size(name.encode("utf-8")) + _field_size(data)
    return _BATCH_HEADER_BYTES + _MAX_RECORD_OVERHEAD + size


@dataclass(frozen=True, slots=True)
class OutboundRecord:
    """One record to send: the topic it goes to, its key, its serialised value (None: a
    tombstone, which deletes the key from a compacted topic) and, where it matters, the
    partition. The loops make theirs with
    :class:`~streamproc.verdicts.output_topic.OutputTopic`, which keys, encodes and sizes
    them for their topic."""

    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None = None
    """None: the producer's partitioner picks by key (murmur2, as Java clients do)."""
    headers: tuple[tuple[str, bytes], ...] = ()
    """Kafka record headers, e.g. the ``traceparent`` that continues the answer's trace."""

    @property
    def size(self) -> int:
        """Its size as the producer measures it against ``max_request_size`` (an upper
        bound of what the broker measures against ``max.message.bytes``)."""
        return estimate_size_in_bytes(self.key, self.value, self.headers)

    def describe(self) -> dict[str, str | int]:
        """Topic, key (cut), size and headers' size, for a log line."""
        key = "" if self.key is None else self.key[:80].decode("utf-8", "backslashreplace")
        return {
            "topic": self.topic,
            "key": key,
            "size": self.size,
            "header_bytes": sum(len(name) + len(value) for name, value in self.headers),
        }
