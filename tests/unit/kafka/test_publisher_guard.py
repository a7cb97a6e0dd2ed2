"""Before sending, a publisher replaces each record it knows the broker would refuse
(over the producer's ``max_request_size`` or its topic's known limit) by its dead letter,
measured as the producer measures; the rest of the batch is left as it is."""

from __future__ import annotations

from pydantic import BaseModel

from streamproc.kafka.publisher import TransactionalPublisher
from streamproc.verdicts.fit import TooLarge
from streamproc.verdicts.output_topic import OutputTopic, header_bytes
from streamproc.verdicts.record import OutboundRecord


def _publisher(diverted: list[tuple[OutboundRecord, str]]) -> TransactionalPublisher:
    def divert(record: OutboundRecord, why: str) -> OutboundRecord:
        diverted.append((record, why))
        return OutboundRecord("dead-letters", record.key, b"letter")

    return TransactionalPublisher(
        group_id="g",
        transactional_id="t",
        timeout_s=1.0,
        client_options={"bootstrap_servers": "127.0.0.1:1", "max_request_size": 50_000},
        divert=divert,
        limits={"verdicts": 10_000},
    )


async def test_records_over_a_known_limit_are_diverted_before_sending() -> None:
    diverted: list[tuple[OutboundRecord, str]] = []
    publisher = _publisher(diverted)
    small = OutboundRecord("verdicts", b"a", b"x" * 100, headers=(("traceparent", b"00-..."),))
    over_topic = OutboundRecord("verdicts", b"b", b"x" * 100, headers=(("baggage", b"v" * 10_000),))
    over_request = OutboundRecord("elsewhere", b"c", b"x" * 60_000)
    unknown_topic = OutboundRecord("elsewhere", b"d", b"x" * 40_000)

    guarded = publisher._guard([small, over_topic, over_request, unknown_topic])

    assert guarded[0] is small and guarded[3] is unknown_topic
    assert [record.key for record, _ in diverted] == [b"b", b"c"]
    assert guarded[1] == OutboundRecord("dead-letters", b"b", b"letter")
    assert "over the limit of 10000 bytes" in diverted[0][1]
    assert "over the limit of 50000 bytes" in diverted[1][1]
    assert over_topic.describe()["header_bytes"] == len("baggage") + 10_000


async def test_without_a_divert_nothing_is_replaced() -> None:
    publisher = TransactionalPublisher(
        group_id="g",
        transactional_id="t",
        timeout_s=1.0,
        client_options={"bootstrap_servers": "127.0.0.1:1", "max_request_size": 1000},
    )
    record = OutboundRecord("verdicts", b"k", b"x" * 5000)
    assert publisher._guard([record]) == [record]


def test_an_output_keeps_its_headers_bytes_free_under_the_topic_limit() -> None:
    topic: OutputTopic[_Doc] = OutputTopic("t", 4000, _key)
    doc = _Doc(text="x" * 2000)
    headers = (("baggage", b"v" * 2000),)
    assert header_bytes(headers) == len("baggage") + 2000 + 10
    assert not isinstance(topic.prepare(doc), TooLarge)
    assert isinstance(topic.prepare(doc, headers=headers), TooLarge)


class _Doc(BaseModel):
    text: str


def _key(doc: _Doc) -> bytes:
    return b"k"
