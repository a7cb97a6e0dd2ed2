"""A worker reads what real producers send, not only what our aiokafka helpers send.

kcat (librdkafka) publishes answers in every compression codec, with and without keys,
with W3C ``traceparent`` headers, plus garbage and tombstones. One worker must judge
every answer, dead-letter every unreadable record with its original bytes, and still be
running at the end: one lz4 batch once killed the worker because aiokafka had no codec
library (cramjam) to decompress it with.

A second test starts the worker with faust's own unprefixed variables pointing
somewhere wrong; only ``STREAMPROC_*`` may configure it.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent, DeadLetter, DeadLetterReason, Verdict
from streamproc.kafka.clients import OutputTail, publish_answers
from streamproc.samples import SEED_LAB, load_answers
from streamproc.wiring import prepare_topics
from tests.integration.kcat import CODECS, KEY_DELIMITER, kcat_or_skip, produce, read_back

PARTITIONS = 3
WAIT_S = 60.0


def _settings(bootstrap: str, prefix: str) -> Settings:
    run = uuid.uuid4().hex[:8]
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return Settings(
        app_id=f"{prefix}-{run}",
        broker_url=f"kafka://{bootstrap}",
        topics={**{name: f"{prefix}-{run}.{name}" for name in names}, "partitions": PARTITIONS},
        judge={"name": "rules"},
        window={"size_s": 60.0, "grace_s": 1.0, "idle_close_s": 2.0, "tick_s": 0.5},
        worker={"rebalance_timeout_s": 10.0, "session_timeout_s": 10.0},
    )


def _answers(label: str, count: int) -> list[AnswerEvent]:
    """``count`` seed answers with ids unique to ``label``, occurring now (inside the
    worker's accepted event-time range)."""
    seed = load_answers(SEED_LAB)
    now = datetime.now(UTC)
    return [
        seed[index % len(seed)].model_copy(
            update={
                "event_id": f"{label}-{index}-{seed[index % len(seed)].event_id}",
                "answer_id": f"{label}-{index}",
                "occurred_at": now - timedelta(seconds=index),
            }
        )
        for index in range(count)
    ]


def _json(answer: AnswerEvent) -> bytes:
    return answer.model_dump_json(exclude_none=True).encode()


@dataclass
class Expected:
    """What the worker owes us for the records kcat sent."""

    verdicts: set[str] = field(default_factory=set)
    trace_ids: dict[str, str] = field(default_factory=dict)  # event id -> traceparent's
    garbage: set[bytes] = field(default_factory=set)
    codecs_sent: dict[str, list[str]] = field(default_factory=dict)


def _send_codec(kcat: str, bootstrap: str, topic: str, codec: str, partition: int) -> Expected:
    """Three kcat runs in ``codec``: unkeyed answers and garbage; keyed answers and
    tombstones; answers with headers. Each run is one message set."""
    expected = Expected()
    plain, keyed, traced, keyed_traced = _answers(f"{codec}-{uuid.uuid4().hex[:6]}", 4)
    garbage = b"\xff\xfe garbage from kcat, " + codec.encode() + b" {not json"
    trace_id, span_id = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    tombstone_key = f"tombstone-{codec}".encode()
    sets = produce(
        kcat, bootstrap, topic, [_json(plain), garbage], codec=codec, partition=partition
    )
    sets += produce(
        kcat,
        bootstrap,
        topic,
        [
            keyed.conversation_id.encode() + KEY_DELIMITER + _json(keyed),
            tombstone_key + KEY_DELIMITER,  # NULL value: a tombstone
            KEY_DELIMITER,  # NULL key and NULL value
        ],
        codec=codec,
        keyed=True,
        partition=partition,
    )
    sets += produce(
        kcat,
        bootstrap,
        topic,
        [
            KEY_DELIMITER + _json(traced),  # NULL key
            keyed_traced.conversation_id.encode() + KEY_DELIMITER + _json(keyed_traced),
        ],
        codec=codec,
        keyed=True,
        headers={"traceparent": f"00-{trace_id}-{span_id}-01", "other": "x"},
        partition=partition,
    )
    expected.verdicts = {a.event_id for a in (plain, keyed, traced, keyed_traced)}
    expected.trace_ids = {traced.event_id: trace_id, keyed_traced.event_id: trace_id}
    expected.garbage = {garbage}
    expected.codecs_sent = {codec: sets}
    return expected


async def _collect(
    settings: Settings,
    worker: WorkerProcess,
    done: Callable[[dict[str, list[object]]], bool],
    describe: Callable[[dict[str, list[object]]], str],
    settle_s: float = 0.0,
) -> dict[str, list[object]]:
    """Outputs until ``done``, then ``settle_s`` more (so duplicates or stray records
    show); fails early if the worker dies, or after WAIT_S."""
    seen: dict[str, list[object]] = {"verdict": [], "flag": [], "aggregate": [], "dead_letter": []}
    deadline = time.monotonic() + WAIT_S
    async with OutputTail(settings.bootstrap_servers, settings.topics) as tail:
        while time.monotonic() < deadline:
            for record in await tail.poll(1.0):
                seen[record.kind].append(record.event)
            if done(seen):
                settled = time.monotonic() + settle_s
                while time.monotonic() < settled:
                    for record in await tail.poll(0.5):
                        seen[record.kind].append(record.event)
                return seen
            if not worker.running:
                pytest.fail(
                    f"the worker died; {describe(seen)}\nworker log:\n{worker.log_tail(60)}",
                    pytrace=False,
                )
    pytest.fail(
        f"timed out after {WAIT_S:.0f} s; {describe(seen)}\nworker log:\n{worker.log_tail(60)}",
        pytrace=False,
    )


def _verdicts(seen: dict[str, list[object]]) -> dict[str, Verdict]:
    return {v.event_id: v for v in seen["verdict"] if isinstance(v, Verdict)}


def _letters(seen: dict[str, list[object]]) -> list[DeadLetter]:
    return [d for d in seen["dead_letter"] if isinstance(d, DeadLetter)]


@pytest.fixture()
def kcat() -> str:
    return kcat_or_skip()


@pytest.fixture()
def worker_log(tmp_path: Path) -> Path:
    return tmp_path / "worker.log"


async def test_worker_reads_every_codec_header_null_and_garbage_from_kcat(
    kcat: str, kafka_bootstrap: str, worker_log: Path
) -> None:
    settings = _settings(kafka_bootstrap, "kcat")
    await prepare_topics(settings)
    topic = settings.topics.answers
    worker = WorkerProcess(settings, worker_log).start()
    try:
        expected = Expected()
        for index, codec in enumerate(CODECS):
            sent = await asyncio.to_thread(
                _send_codec, kcat, kafka_bootstrap, topic, codec, index % PARTITIONS
            )
            expected.verdicts |= sent.verdicts
            expected.trace_ids |= sent.trace_ids
            expected.garbage |= sent.garbage
            expected.codecs_sent |= sent.codecs_sent
        stored = await asyncio.to_thread(read_back, kcat, kafka_bootstrap, topic)
        nulls = {(r.partition, r.offset): r for r in stored if r.value_length is None}
        unreadable = len(expected.garbage) + len(nulls)

        def done(seen: dict[str, list[object]]) -> bool:
            return expected.verdicts <= set(_verdicts(seen)) and len(_letters(seen)) >= unreadable

        def describe(seen: dict[str, list[object]]) -> str:
            missing = sorted(expected.verdicts - set(_verdicts(seen)))
            reasons = Counter(d.reason.value for d in _letters(seen))
            return (
                f"{len(_verdicts(seen))}/{len(expected.verdicts)} verdicts (missing {missing}), "
                f"{reasons.total()}/{unreadable} dead letters by reason {dict(reasons)}"
            )

        seen = await _collect(settings, worker, done, describe, settle_s=2.0)
        assert worker.running, f"the worker exited:\n{worker.log_tail(60)}"
    finally:
        worker.stop()

    # librdkafka really compressed every message set (it silently does not when that
    # would not save space), so each codec was actually decoded by the worker.
    for codec, sets in expected.codecs_sent.items():
        assert sets and set(sets) == {"uncompressed" if codec == "none" else codec}, (
            codec,
            sets,
        )
    assert len(stored) == 7 * len(CODECS), stored
    assert len(nulls) == 2 * len(CODECS), "kcat -Z sent the empty values as NULL"
    assert sum(r.key is None for r in nulls.values()) == len(CODECS)

    verdicts = _verdicts(seen)
    assert set(verdicts) == expected.verdicts
    assert len(seen["verdict"]) == len(expected.verdicts), "each answer judged exactly once"
    for event_id, trace_id in expected.trace_ids.items():
        assert verdicts[event_id].trace_id == trace_id, event_id

    letters = _letters(seen)
    assert len(letters) == len(expected.garbage) + len(nulls), letters
    assert {d.reason for d in letters} == {DeadLetterReason.BAD_JSON}
    assert all(d.topic == topic for d in letters)
    by_place = {(d.partition, d.offset): d for d in letters}
    for place, record in nulls.items():
        letter = by_place[place]
        assert letter.value_b64 == "", letter
        assert letter.key_b64 == (
            None if record.key is None else base64.b64encode(record.key).decode()
        )
    garbage_letters = [d for place, d in by_place.items() if place not in nulls]
    assert {base64.b64decode(d.value_b64) for d in garbage_letters} == expected.garbage
    assert all(d.key_b64 is None for d in garbage_letters)


FAUST_VARIABLES = {
    "BROKER_URL": "kafka://127.0.0.1:1",
    "BROKER_CONSUMER_URL": "kafka://127.0.0.1:1",
    "BROKER_PRODUCER_URL": "kafka://127.0.0.1:1",
    "APP_ID": "hijacked",
    "APP_WEB_ENABLED": "true",
    "WEB_ENABLED": "true",
    "WEB_BIND": "127.0.0.1",
    "PRODUCER_ACKS": "0",
    "CONSUMER_AUTO_OFFSET_RESET": "latest",
    "TOPIC_PARTITIONS": "1",
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture()
def faust_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """faust's unprefixed variables, all pointing somewhere wrong, plus a web port."""
    web_port = _free_port()
    for name, value in {**FAUST_VARIABLES, "WEB_PORT": str(web_port)}.items():
        monkeypatch.setenv(name, value)
    yield web_port


async def test_worker_ignores_faust_unprefixed_environment(
    kafka_bootstrap: str, worker_log: Path, faust_environment: int
) -> None:
    settings = _settings(kafka_bootstrap, "fenv")
    await prepare_topics(settings)
    answers = _answers(f"env-{uuid.uuid4().hex[:6]}", 3)
    # Published before the worker joins: auto_offset_reset=latest from the environment
    # would skip them.
    await publish_answers(settings.bootstrap_servers, settings.topics.answers, answers)
    worker = WorkerProcess(settings, worker_log).start()  # copies os.environ, variables too
    try:
        wanted = {a.event_id for a in answers}
        seen = await _collect(
            settings,
            worker,
            lambda seen: wanted <= set(_verdicts(seen)),
            lambda seen: f"verdicts for {sorted(_verdicts(seen))}, wanted {sorted(wanted)}",
        )
        assert set(_verdicts(seen)) == wanted
        assert not _listening(faust_environment), "faust's web server came up from WEB_PORT"
        assert worker.running, f"the worker exited:\n{worker.log_tail(60)}"
    finally:
        worker.stop()
