"""A loop's per-partition state on a changelog: restored on assignment, drained into
each transaction.

The window, labels and accuracy loops keep the state of each owned input partition in a
:class:`~streamproc.kafka.store.TrackedStore`; the state of input partition p
lives in partition p of the loop's compacted changelog topic. A member that takes p over
reads it back (:func:`restore_state`), and every transaction carries the changes since
the last one (:func:`changelog_records`) with the input offsets, so the two agree.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka.structs import TopicPartition

from streamproc.kafka.consumer import KafkaLoopOptions
from streamproc.kafka.store import TrackedStore, encode_entry, restore_partition
from streamproc.verdicts.output_topic import OutputTopic
from streamproc.verdicts.record import OutboundRecord

__all__ = ["changelog_records", "restore_state", "restore_states"]


async def restore_state(
    kafka: KafkaLoopOptions,
    changelog_topic: str,
    partition: int,
    client_options: Mapping[str, Any],
) -> dict[str, Any]:
    """The committed state of input partition ``partition``: its changelog partition read
    to the end, waiting as long as a previous owner's open transaction may stay open
    (the transaction timeout, plus 30 s)."""
    return await restore_partition(
        kafka.connection.bootstrap_servers,
        TopicPartition(changelog_topic, partition),
        dict(client_options),
        settle_timeout_s=kafka.worker.transaction_timeout_s + 30.0,
    )


async def restore_states(
    kafka: KafkaLoopOptions,
    changelog_topic: str,
    partitions: Iterable[int],
    client_options: Mapping[str, Any],
) -> dict[int, dict[str, Any]]:
    """:func:`restore_state` of several partitions at once: each read waits at least one
    fetch, so a member taking six partitions over would otherwise wait six times."""
    wanted = sorted(set(partitions))
    states = await asyncio.gather(
        *(restore_state(kafka, changelog_topic, p, client_options) for p in wanted)
    )
    return dict(zip(wanted, states, strict=True))


def changelog_records(
    changelog: OutputTopic[Any], stores: Iterable[tuple[int, TrackedStore]]
) -> list[OutboundRecord]:
    """Each ``(partition, store)``'s changes since its last drain, as records of
    ``changelog`` partition ``partition`` (a deleted key as a tombstone)."""
    records = []
    for partition, store in stores:
        for key, value in store.drain():
            encoded_key, encoded_value = encode_entry(key, value)
            records.append(changelog.forward(encoded_key, encoded_value, partition=partition))
    return records
