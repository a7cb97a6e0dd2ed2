"""Committed offsets that no open transaction can still move (KIP-447 ``require_stable``).

A transaction commits its input offsets in two steps: the coordinator first writes them
as *pending*, and only the commit marker makes them the group's committed offsets. A
consumer given a partition in between (after a worker is killed mid-commit, or while a
restarted broker is still writing the markers of the transactions it had prepared) reads
the *previous* committed offset, judges the batch again, and its outputs appear twice to
a ``read_committed`` reader. Java and Go clients avoid this by asking OffsetFetch v7+
with ``require_stable``: the broker answers ``UNSTABLE_OFFSET_COMMIT`` (or waits) until
the pending offsets are committed or aborted. aiokafka 0.14 only speaks OffsetFetch v3,
so :func:`stable_committed` sends v7 itself over the consumer's coordinator connection.

The consumer loops call it when partitions are assigned, before restoring state or
reading a record (:class:`~streamproc.kafka.consumer.ConsumerLoop`).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, TypeAlias

from aiokafka import AIOKafkaConsumer
from aiokafka import errors as kafka_errors
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)
from aiokafka.structs import TopicPartition

__all__ = ["StableOffsetsUnavailable", "stable_committed"]

_UNSTABLE_OFFSET_COMMIT = 88
_RETRIABLE = frozenset(
    {
        _UNSTABLE_OFFSET_COMMIT,
        kafka_errors.GroupLoadInProgressError.errno,  # 14: the coordinator is loading
        kafka_errors.GroupCoordinatorNotAvailableError.errno,  # 15
        kafka_errors.NotCoordinatorForGroupError.errno,  # 16: it moved
    }
)
_RETRY_S = 0.1
_NO_OFFSET = -1


class StableOffsetsUnavailable(Exception):
    """The broker does not speak OffsetFetch v7 (Kafka before 2.5, or not Kafka)."""


class _OffsetFetchResponseV7(Response):  # type: ignore[misc]
    API_KEY = 9
    API_VERSION = 7
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "topics",
            CompactArray(
                ("name", CompactString("utf-8")),
                (
                    "partitions",
                    CompactArray(
                        ("partition_index", Int32),
                        ("committed_offset", Int64),
                        ("committed_leader_epoch", Int32),
                        ("metadata", CompactString("utf-8")),
                        ("error_code", Int16),
                        ("tags", TaggedFields),
                    ),
                ),
                ("tags", TaggedFields),
            ),
        ),
        ("error_code", Int16),
        ("tags", TaggedFields),
    )


class _OffsetFetchRequestV7(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 9
    API_VERSION = 7
    RESPONSE_TYPE = _OffsetFetchResponseV7
    SCHEMA = Schema(
        ("group_id", CompactString("utf-8")),
        (
            "topics",
            CompactArray(
                ("name", CompactString("utf-8")),
                ("partition_indexes", CompactArray(Int32)),
                ("tags", TaggedFields),
            ),
        ),
        ("require_stable", Boolean),
        ("tags", TaggedFields),
    )


_Struct: TypeAlias = _OffsetFetchRequestV7


class _StableOffsetFetch(Request[_Struct]):  # type: ignore[misc]
    API_KEY = 9

    def __init__(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in partitions:
            by_topic[tp.topic].append(tp.partition)
        self._group_id = group_id
        self._topics: list[tuple[str, list[int], dict[int, bytes]]] = [
            (topic, sorted(indexes), {}) for topic, indexes in sorted(by_topic.items())
        ]

    def build(self, request_struct_class: type[_Struct]) -> _Struct:
        return request_struct_class(self._group_id, self._topics, True, {})


async def stable_committed(
    consumer: AIOKafkaConsumer,
    group_id: str,
    partitions: Iterable[TopicPartition],
    *,
    timeout_s: float,
) -> dict[TopicPartition, int] | None:
    """The committed offset of each of ``partitions`` that has one, once no transaction
    holds pending offsets for them; None when they stay unstable for ``timeout_s`` (a
    transaction the broker has not aborted yet; 0 asks once). Raises
    :class:`StableOffsetsUnavailable` on a broker without v7."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    coordinator: Any = consumer._coordinator  # aiokafka has no public route to it
    deadline = time.monotonic() + timeout_s
    while True:
        await coordinator.ensure_coordinator_known()
        try:
            response = await coordinator._send_req(_StableOffsetFetch(group_id, wanted))
        except kafka_errors.IncompatibleBrokerVersion as exc:
            raise StableOffsetsUnavailable(str(exc)) from exc
        except NotImplementedError as exc:  # the broker's versions do not include v7
            raise StableOffsetsUnavailable(str(exc)) from exc
        except kafka_errors.KafkaError as exc:
            if not exc.retriable:
                raise
        else:
            offsets, unstable = _read(response, wanted)
            if not unstable:
                return offsets
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(_RETRY_S)


def _read(
    response: Any, wanted: list[TopicPartition]
) -> tuple[dict[TopicPartition, int], set[TopicPartition]]:
    """(committed offsets, partitions still unstable) of one v7 response; a non-retriable
    error raises as aiokafka's own fetch would."""
    if response.error_code in _RETRIABLE:
        return {}, set(wanted)
    if response.error_code:
        raise kafka_errors.for_code(response.error_code)()
    offsets: dict[TopicPartition, int] = {}
    unstable: set[TopicPartition] = set()
    for name, partitions, _tags in response.topics:
        for index, offset, _epoch, _metadata, error_code, _ptags in partitions:
            tp = TopicPartition(name, index)
            if error_code in _RETRIABLE:
                unstable.add(tp)
            elif error_code == kafka_errors.UnknownTopicOrPartitionError.errno:
                continue
            elif error_code:
                raise kafka_errors.for_code(error_code)()
            elif offset != _NO_OFFSET:
                offsets[tp] = offset
    return offsets, unstable
