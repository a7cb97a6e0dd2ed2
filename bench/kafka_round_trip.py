"""What a request / reply through a Kafka broker costs with no gate in it, and what that
traffic on the same cores costs the judge: the floor under the gate's Kafka path.

A responder in a process of its own answers each request at once with the gate's reply
producer settings (``acks=all``, idempotent, no linger) from a ``read_committed``
consumer; the caller sends with :class:`~streamproc.gate.client.GateClient`'s producer
settings and reads the reply topic as it does (``read_committed``, 500 ms long poll).
One request at a time, ``--gap-ms`` apart (a quiet gate's traffic): the round trip, and
its two legs from wall-clock stamps (one machine, one clock).

With ``--judge`` it then times the default judge alone, one QA-like answer per call
``--gap-ms`` apart, in rounds that alternate quiet and with that traffic flowing (the
caller in a process of its own): the judge's slowdown that no gate code causes.

    .venv/bin/python -m bench kafka-round-trip [--bootstrap HOST:PORT] [--requests 300]
        [--gap-ms 80] [--judge] [--rounds 2] [--judge-answers 150] [--json PATH]

Without ``--bootstrap`` a private broker comes from ``scripts/kafka.sh``. The broker's
security and the topics' replication factor are read from ``STREAMPROC_*`` as the gate
reads them; the script creates two topics of its own (``round-trip-<run>.*``) and
deletes them when done.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import TopicPartition

from bench import command_line
from bench.gate import answer_pool, summarise_ms
from bench.machine import machine_info
from bench.stream import kafka_broker
from streamproc.config import Settings
from streamproc.kafka.security import aiokafka_options

RECEIVED_HEADER = "received-at"
REPLY_TIMEOUT_S = 5.0
WARM_UP_REQUESTS = 20


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def client_options() -> dict[str, Any]:
    """The broker's security from ``STREAMPROC_*`` (as the gate and its client read it);
    each process builds its own (a TLS context does not pickle)."""
    return dict(aiokafka_options(Settings().security))


def _producer(bootstrap: str) -> AIOKafkaProducer:
    """As the gate's replies at once and ``GateClient``'s requests: no linger."""
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=0,
        **client_options(),
    )


def _consumer(bootstrap: str) -> AIOKafkaConsumer:
    """A ``read_committed`` reader with no group (partitions assigned), long-polling
    500 ms as ``GateClient`` does."""
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        fetch_max_wait_ms=500,
        **client_options(),
    )


# ------------------------------------------------------------------------ the responder


def respond(bootstrap: str, requests: str, replies: str, ready: Event, stop: Event) -> None:
    """In a spawned process: answer every request on ``requests`` until ``stop``."""
    asyncio.run(_respond(bootstrap, requests, replies, ready, stop))


async def _respond(bootstrap: str, requests: str, replies: str, ready: Event, stop: Event) -> None:
    consumer = _consumer(bootstrap)
    producer = _producer(bootstrap)
    await consumer.start()
    await producer.start()
    try:
        partition = TopicPartition(requests, 0)
        consumer.assign([partition])
        await consumer.seek_to_end(partition)
        await consumer.position(partition)
        ready.set()
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            for record in (each for records in batch.values() for each in records):
                received = str(time.time()).encode()
                await producer.send_and_wait(
                    replies, record.value, key=record.key, headers=[(RECEIVED_HEADER, received)]
                )
    finally:
        await producer.stop()
        await consumer.stop()


# --------------------------------------------------------------------------- the caller


async def call(
    bootstrap: str, requests: str, replies: str, count: int, gap_s: float, stop: Event | None
) -> dict[str, list[float]]:
    """``count`` requests one at a time (or until ``stop``): each round trip and its legs
    (ms), after untimed warm-up requests."""
    producer = _producer(bootstrap)
    consumer = _consumer(bootstrap)
    await producer.start()
    await consumer.start()
    legs: dict[str, list[float]] = {"round_trip_ms": [], "there_ms": [], "back_ms": []}
    try:
        partition = TopicPartition(replies, 0)
        consumer.assign([partition])
        await consumer.seek_to_end(partition)
        await consumer.position(partition)
        for index in range(WARM_UP_REQUESTS + count):
            if stop is not None and stop.is_set():
                break
            key = uuid.uuid4().hex.encode()
            sent = time.time()
            await producer.send_and_wait(requests, b'{"request": "ping"}', key=key)
            received = await _reply(consumer, key)
            back = time.time()
            if index >= WARM_UP_REQUESTS:
                legs["round_trip_ms"].append((back - sent) * 1000)
                legs["there_ms"].append((received - sent) * 1000)
                legs["back_ms"].append((back - received) * 1000)
            await asyncio.sleep(gap_s)
    finally:
        await consumer.stop()
        await producer.stop()
    return legs


async def _reply(consumer: AIOKafkaConsumer, key: bytes) -> float:
    """When the responder read the request whose reply has ``key``."""
    deadline = time.monotonic() + REPLY_TIMEOUT_S
    while time.monotonic() < deadline:
        batch = await consumer.getmany(timeout_ms=500)
        for record in (each for records in batch.values() for each in records):
            if record.key == key:
                stamp = dict(record.headers)[RECEIVED_HEADER]
                return float(stamp.decode())
    raise TimeoutError(f"no reply in {REPLY_TIMEOUT_S:g} s")


def traffic(bootstrap: str, requests: str, replies: str, gap_s: float, stop: Event) -> None:
    """In a spawned process: requests one at a time until ``stop`` (traffic to judge by)."""
    asyncio.run(call(bootstrap, requests, replies, 1_000_000, gap_s, stop))


# ---------------------------------------------------------------------------- the judge


def judge_rounds(
    bootstrap: str, requests: str, replies: str, gap_s: float, rounds: int, answers: int
) -> list[dict[str, Any]]:
    """The default judge's own time per answer (its embedding cache off), quiet and with
    traffic, ``rounds`` times."""
    from streamproc.wiring import build_judge

    events, _ = answer_pool("qa", None)
    # No embedding cache: every round judges the same answers, and a cached round would
    # read faster for that alone.
    judge = build_judge(Settings(judge={"inference": {"embedding_cache_entries": 0}}).judge)
    for event in events[-10:]:  # warm-up, not timed
        judge.judge_batch([event])
    context = multiprocessing.get_context("spawn")
    results: list[dict[str, Any]] = []
    for round_no in range(1, rounds + 1):
        for condition in ("quiet", "traffic"):
            stop = context.Event()
            caller = None
            if condition == "traffic":
                caller = context.Process(
                    target=traffic, args=(bootstrap, requests, replies, gap_s, stop)
                )
                caller.start()
                time.sleep(5)  # connected and past its warm-up
            times = []
            for event in events[:answers]:
                started = time.perf_counter()
                judge.judge_batch([event])
                times.append((time.perf_counter() - started) * 1000)
                time.sleep(gap_s)
            stop.set()
            if caller is not None:
                caller.join(timeout=30)
            results.append(
                {"round": round_no, "condition": condition, **(summarise_ms(times) or {})}
            )
            log(f"judge alone, round {round_no}, {condition}: p50 {results[-1]['p50']:.1f} ms")
    return results


# ------------------------------------------------------------------------------- main


async def _topics(bootstrap: str, topics: Sequence[str], *, create: bool) -> None:
    """Create ``topics`` (one partition each), or delete them."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **client_options())
    replicas = Settings().topics.replication_factor
    await admin.start()
    try:
        if create:
            await admin.create_topics([NewTopic(name, 1, replicas) for name in topics])
        else:
            await admin.delete_topics(list(topics))
    finally:
        await admin.close()


def measure(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    requests, replies = f"round-trip-{run}.requests", f"round-trip-{run}.replies"
    asyncio.run(_topics(bootstrap, [requests, replies], create=True))
    context = multiprocessing.get_context("spawn")
    ready, stop = context.Event(), context.Event()
    responder = context.Process(target=respond, args=(bootstrap, requests, replies, ready, stop))
    responder.start()
    try:
        if not ready.wait(60):
            raise SystemExit("the responder did not start")
        gap_s = args.gap_ms / 1000
        legs = asyncio.run(call(bootstrap, requests, replies, args.requests, gap_s, None))
        report: dict[str, Any] = {"topics": [requests, replies]}
        report |= {name: summarise_ms(values) for name, values in legs.items()}
        log(
            f"round trip p50 {report['round_trip_ms']['p50']:.2f} ms (there "
            f"{report['there_ms']['p50']:.2f}, back {report['back_ms']['p50']:.2f})"
        )
        if args.judge:
            report["judge_alone"] = judge_rounds(
                bootstrap, requests, replies, gap_s, args.rounds, args.judge_answers
            )
        return report
    finally:
        stop.set()
        responder.join(timeout=30)
        asyncio.run(_topics(bootstrap, [requests, replies], create=False))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench kafka-round-trip", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--bootstrap", help="a running broker (default: a private one)")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--gap-ms", type=float, default=80.0, help="between requests")
    parser.add_argument("--judge", action="store_true", help="also the judge, quiet and not")
    parser.add_argument("--rounds", type=int, default=2, help="judge rounds of each condition")
    parser.add_argument("--judge-answers", type=int, default=150, help="per round and condition")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args(argv)
    with kafka_broker(args.bootstrap) as (bootstrap, broker):
        report = {
            "command": command_line(),
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine_info(),
            "broker": broker,
            "requests": args.requests,
            "gap_ms": args.gap_ms,
            "judge": Settings().judge.name if args.judge else None,
            **measure(bootstrap, args),
        }
    text = json.dumps(report, indent=2)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0
