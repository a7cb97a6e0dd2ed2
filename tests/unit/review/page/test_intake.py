"""The intake's reading of the queue topic: unreadable records are skipped and counted,
and the offsets committed are those after each partition's last record."""

from __future__ import annotations

from dataclasses import dataclass

from aiokafka.structs import OffsetAndMetadata, TopicPartition

from streamproc.config import Settings
from streamproc.review.page.intake import intake_group, next_offsets, read_items
from streamproc.wiring import topic_names
from tests.unit.review.page.samples import review_item


@dataclass(frozen=True)
class Message:
    topic: str
    partition: int
    offset: int
    value: bytes | None


def test_review_items_are_read_and_unreadable_records_skipped() -> None:
    good = review_item("a1")
    messages = [
        Message("q", 0, 10, good.model_dump_json().encode()),
        Message("q", 0, 11, b"{not json"),
        Message("q", 0, 12, None),
        Message("q", 0, 13, b'{"answer_id": "only this"}'),
        Message("q", 0, 14, review_item("a2").model_dump_json().encode()),
    ]
    items, unreadable = read_items(messages)
    assert [i.answer_id for i in items] == ["a1", "a2"] and items[0] == good
    assert unreadable == 3


def test_the_offsets_committed_follow_each_partitions_last_record() -> None:
    batches = {
        TopicPartition("q", 0): [Message("q", 0, 4, b""), Message("q", 0, 5, b"")],
        TopicPartition("q", 1): [Message("q", 1, 9, b"")],
        TopicPartition("q", 2): [],
    }
    assert next_offsets(batches) == {
        TopicPartition("q", 0): OffsetAndMetadata(6, ""),
        TopicPartition("q", 1): OffsetAndMetadata(10, ""),
    }


def test_the_group_is_the_apps_review_page() -> None:
    assert intake_group(topic_names(Settings(app_id="prod"))) == "prod.review-page"
