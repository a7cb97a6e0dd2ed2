"""A producer as an assistant team would write it: one answer, with the evidence the model
was given, onto the answers topic (aiokafka, zstd, acks=all, idempotent, keyed by
conversation, traceparent header). Needs only aiokafka and cramjam; no streamproc import.

    python examples/produce_answer.py --bootstrap 127.0.0.1:9092 \\
        [--topic assistant.answers] [--traceparent 00-<32 hex>-<16 hex>-01] [FILE.json]

FILE.json is one AnswerEvent (default: schemas/examples/answer-event.json); occurred_at
is set to now, so the worker's event-time bounds accept it, and event_id to a fresh
uuid4, since the worker judges a repeated (tenant, event_id) once. Prints one line saying
what it sent: topic, partition, offset, key and event_id.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

from aiokafka import AIOKafkaProducer

EXAMPLE = Path(__file__).resolve().parent.parent / "schemas" / "examples" / "answer-event.json"


async def produce(
    bootstrap: str, topic: str, event: dict[str, object], traceparent: str | None
) -> str:
    """Send ``event``; returns where the broker stored it, as one line to print."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,  # a retried send is stored once
        compression_type="zstd",  # gzip, snappy and lz4 work too
        linger_ms=5,
    )
    await producer.start()
    try:
        headers = [("traceparent", traceparent.encode())] if traceparent else []
        key = str(event["conversation_id"])  # one conversation stays in order
        stored = await producer.send_and_wait(
            topic, key=key.encode(), value=json.dumps(event).encode(), headers=headers
        )
    finally:
        await producer.stop()
    return (
        f"sent to {stored.topic} partition {stored.partition} offset {stored.offset}: "
        f"key={key} event_id={event['event_id']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bootstrap", required=True, metavar="HOST:PORT")
    parser.add_argument("--topic", default="assistant.answers")
    parser.add_argument("--traceparent", help="W3C traceparent of the answer's own span")
    parser.add_argument("event", nargs="?", type=Path, default=EXAMPLE)
    args = parser.parse_args()
    event = json.loads(args.event.read_text(encoding="utf-8"))
    event["occurred_at"] = datetime.now(UTC).isoformat()
    event["event_id"] = str(uuid.uuid4())
    print(asyncio.run(produce(args.bootstrap, args.topic, event, args.traceparent)), flush=True)


if __name__ == "__main__":
    main()
