"""The complaint walk of docs/audit.md, end to end on real Kafka, as an auditor does it.

Answers go to the answers topic (one with the assistant's ``traceparent``, one the rules
judge flags, evidence full of byte-sensitive text); a worker judges them and the
``audit-sink`` process stores their audit records (SQLite; PostgreSQL runs the same
sink in test_audit_tamper.py). Then only the auditor's CLI: ``audit show`` prints the
exact evidence, each claim with its verdict, the action, the judge, a threshold and the trace id;
``audit find --conversation`` lists the conversation's answers; ``audit show --json``
holds the event's original bytes; ``audit verify`` passes, names the answer whose stored
record was altered by one character, passes again once it is restored, and names the gap
a deleted record leaves.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from streamproc.audit.store import AuditStore, RecordSummary
from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.kafka.brokers._process_group import stop_process_group
from streamproc.wiring import build_judge, prepare_topics
from tests.unit.audit.store_contract import sql

TRACE_ID = "5b8efff798038103d269b633813fc60c"
TRACEPARENT = f"00-{TRACE_ID}-eee19b7ec3c1b174-01"
# Byte-sensitive: a precomposed and a decomposed é (NFC would merge them), ≥, an em dash,
# a no-break space, a tab, doubled spaces and a 4-byte character.
EVIDENCE = (
    "Café ≥ 9 am — ouvert.  The store opens at 9 am on weekdays.\u00a0It is closed\ton  "
    "Sundays. Cafe\u0301 \U0001f558"
)
FLAGGED_ANSWER = "The store opens at 7 am. It is closed on Sundays."
FLAGGED_CLAIMS = [
    ("The store opens at 7 am.", "contradicted"),
    ("It is closed on Sundays.", "supported"),
]
CLI_TIMEOUT_S = 60
STORED_TIMEOUT_S = 60


@dataclass(frozen=True)
class Sent:
    """One answer as published: its ids and its exact bytes."""

    answer_id: str
    conversation_id: str
    value: bytes


def _settings(bootstrap: str, store_url: str) -> Settings:
    run = uuid.uuid4().hex[:8]
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return Settings(
        app_id=f"walk-{run}",
        broker_url=f"kafka://{bootstrap}",
        log_json=True,
        # Two partitions: two audit chains, as in production.
        topics={**{name: f"walk-{run}.{name}" for name in names}, "partitions": 2},
        judge={"name": "rules"},
        worker={"rebalance_timeout_s": 10.0, "session_timeout_s": 6.0},
        audit={"topic": f"walk-{run}.audit", "store_url": store_url},
    )


@pytest.fixture()
def store_url(tmp_path: Path) -> str:
    """SQLite: PostgreSQL's sink-to-verify path is tests/integration/test_audit_tamper.py's,
    its byte-exact records tests/integration/test_audit_store_postgres.py's."""
    return f"sqlite:///{tmp_path / 'audit.db'}"


@pytest.fixture()
def settings(kafka_bootstrap: str, store_url: str) -> Settings:
    return _settings(kafka_bootstrap, store_url)


def _event(answer_id: str, conversation_id: str, answer: str, occurred_at: datetime) -> bytes:
    """An answer event as an assistant might write it: keys in its own order, UTF-8 text
    unescaped, indented - nothing like the worker's own serialisation."""
    document: dict[str, Any] = {
        "evidence": [{"text": EVIDENCE, "id": "D1", "source": "hours.md"}],
        "answer": answer,
        "question": "When does the café open?",
        "event_id": f"evt-{answer_id}",
        "answer_id": answer_id,
        "conversation_id": conversation_id,
        "tenant": "acme",
        "assistant_id": "shop-bot",
        "model": "llm-2026-01",
        "occurred_at": occurred_at.isoformat(),
    }
    return json.dumps(document, ensure_ascii=False, indent=1).encode("utf-8")


def _answers() -> tuple[Sent, list[Sent]]:
    """The flagged answer (the complaint) and every answer sent, it first."""
    now = datetime.now(UTC) - timedelta(seconds=5)
    complaint, other = "conv-complaint", "conv-other"
    rows = [
        ("ans-flagged", complaint, FLAGGED_ANSWER),
        ("ans-fine", complaint, "The store opens at 9 am on weekdays."),
        ("ans-sunday", complaint, "It is closed on Sundays."),
        ("ans-elsewhere", other, "The store opens at 9 am on weekdays."),
    ]
    sent = [
        Sent(
            answer_id,
            conversation,
            _event(answer_id, conversation, text, now + timedelta(milliseconds=i)),
        )
        for i, (answer_id, conversation, text) in enumerate(rows)
    ]
    return sent[0], sent


async def _publish(settings: Settings, answers: list[Sent], flagged: Sent) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
    await producer.start()
    try:
        for answer in answers:
            headers = [("traceparent", TRACEPARENT.encode())] if answer is flagged else []
            await producer.send_and_wait(
                settings.topics.answers,
                key=answer.conversation_id.encode(),
                value=answer.value,
                headers=headers,
            )
    finally:
        await producer.stop()


@dataclass
class SinkProcess:
    """``python -m streamproc audit-sink`` with the settings' environment."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_started(self, timeout_s: float) -> None:
        """Until the sink has created the store's schema and joined its group: polling
        the store before that would race it creating the tables."""
        deadline = time.monotonic() + timeout_s
        while "audit_sink_started" not in self.log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the audit sink did not start:\n{self.log()[-3000:]}", pytrace=False)
            time.sleep(0.2)

    def stop(self) -> int:
        return stop_process_group(self.process, signal.SIGTERM, 20.0)


@pytest.fixture()
def sink(settings: Settings, tmp_path: Path) -> Iterator[SinkProcess]:
    log_path = tmp_path / "sink.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "streamproc", "audit-sink"],
            env={**os.environ, **settings.to_env()},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = SinkProcess(process, log_path)
    try:
        yield running
    finally:
        if process.poll() is None:
            running.stop()


def _audit(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m streamproc audit ARGS --store URL``, as an auditor types it."""
    return subprocess.run(
        [sys.executable, "-m", "streamproc", "audit", *args, "--store", settings.audit.store_url],
        env={**os.environ, **settings.to_env()},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def _wait_stored(
    store: AuditStore, answer_ids: list[str], worker: WorkerProcess, sink: SinkProcess
) -> None:
    deadline = time.monotonic() + STORED_TIMEOUT_S
    missing = list(answer_ids)
    while missing:
        missing = [answer_id for answer_id in missing if store.get(answer_id) is None]
        if not missing:
            return
        if time.monotonic() > deadline:
            pytest.fail(
                f"not stored after {STORED_TIMEOUT_S} s: {missing}\n--- worker:\n"
                f"{worker.log_tail()}\n--- sink:\n{sink.log()[-3000:]}",
                pytrace=False,
            )
        time.sleep(0.3)


def _chains(store: AuditStore) -> list[RecordSummary]:
    return [stored.summary for stored in store.export()]


def test_an_auditor_walks_a_complaint_and_catches_tampering(
    settings: Settings, sink: SinkProcess, tmp_path: Path
) -> None:
    flagged, answers = _answers()
    ids = [answer.answer_id for answer in answers]
    asyncio.run(prepare_topics(settings))
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        sink.wait_started(60)
        asyncio.run(_publish(settings, answers, flagged))
        with AuditStore(settings.audit.store_url) as store:
            _wait_stored(store, ids, worker, sink)
    finally:
        worker.stop()
    assert sink.stop() == 0, f"the sink did not stop cleanly:\n{sink.log()[-3000:]}"
    logs = (tmp_path / "worker.log").read_text(errors="replace") + sink.log()
    for text in ("ouvert", FLAGGED_ANSWER, "When does the café open?"):
        assert text not in logs, "evidence, answers and questions reach no log by default"

    # 1. The complaint: everything about the flagged answer, in plain text.
    shown = _audit(settings, "show", flagged.answer_id, "--plain")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert f"  evidence D1: {EVIDENCE}" in lines, "the evidence exactly as given"
    for text, verdict in FLAGGED_CLAIMS:
        assert any(
            line.startswith("claim ") and f"] {verdict} (" in line and line.endswith(f": {text}")
            for line in lines
        ), (text, verdict, shown.stdout)
    assert "  reason: NUMBER_MISMATCH: 7 not in the evidence" in lines
    assert f"answer: {FLAGGED_ANSWER}" in lines
    assert "action: trim" in lines
    assert "hallucinated: true" in lines
    assert f"trace_id: {TRACE_ID}" in lines
    assert "model: llm-2026-01" in lines
    judge = build_judge(settings.judge).info
    assert f"judge: {judge.name} {judge.version} ({judge.granularity})" in lines
    assert judge.thresholds, "the rules judge has thresholds to show"
    for key, value in judge.thresholds.items():
        assert f"threshold: {key} = {value:g}" in lines
    assert f"input: {settings.topics.answers} partition " in shown.stdout

    # 2. The conversation's answers, and only those.
    found = _audit(settings, "find", "--conversation", flagged.conversation_id, "--json")
    assert found.returncode == 0, found.stderr
    listed = {row["answer_id"]: row for row in map(json.loads, found.stdout.splitlines())}
    assert set(listed) == {a.answer_id for a in answers if a.conversation_id == "conv-complaint"}
    assert {answer_id: row["action"] for answer_id, row in listed.items()} == {
        "ans-flagged": "trim",
        "ans-fine": "pass",
        "ans-sunday": "pass",
    }

    # 3. The event exactly as the worker received it, bytes and hash.
    as_json = _audit(settings, "show", flagged.answer_id, "--json")
    assert as_json.returncode == 0, as_json.stderr
    record = json.loads(as_json.stdout)["record"]
    assert base64.b64decode(record["event_b64"]) == flagged.value
    assert record["event_sha256"] == hashlib.sha256(flagged.value).hexdigest()
    assert record["evidence"][0]["text"] == EVIDENCE

    # 4. Tamper evidence.
    verified = _audit(settings, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "OK: every chain verifies" in verified.stdout

    with AuditStore(settings.audit.store_url) as store:
        stored = store.get(flagged.answer_id)
        assert stored is not None and stored.record_json is not None
        chains = _chains(store)
    assert sorted(s.answer_id for s in chains) == sorted(ids)
    original = stored.record_json
    # The cover-up: the answer said 7 am; make the stored record say 9 am. One character.
    altered = original.replace('"The store opens at 7 am.', '"The store opens at 9 am.', 1)
    assert len(altered) == len(original)
    assert sum(a != b for a, b in zip(altered, original, strict=True)) == 1
    where = "UPDATE audit_records SET record_json = :j WHERE answer_id = :a"
    assert sql(store, where, j=altered, a=flagged.answer_id) == 1
    broken = _audit(settings, "verify")
    assert broken.returncode != 0, broken.stdout
    place = stored.summary
    assert (
        f"first bad record: partition {place.partition}, seq {place.seq}, "
        f"answer {flagged.answer_id}: leaf_mismatch" in broken.stderr
    ), broken.stdout + broken.stderr
    assert f"(answer {flagged.answer_id}): leaf_mismatch" in broken.stdout

    assert sql(store, where, j=original, a=flagged.answer_id) == 1
    restored = _audit(settings, "verify")
    assert restored.returncode == 0, restored.stdout + restored.stderr

    # A deleted record: the next one in its chain names the gap. Two partitions, four
    # records: some chain holds two, so some record has a successor.
    successors = {(s.partition, s.seq): s for s in chains}
    gone, after = next(
        (s, successors[(s.partition, s.seq + 1)])
        for s in chains
        if (s.partition, s.seq + 1) in successors
    )
    assert sql(store, "DELETE FROM audit_records WHERE answer_id = :a", a=gone.answer_id) == 1
    cut = _audit(settings, "verify")
    assert cut.returncode != 0, cut.stdout
    assert (
        f"first bad record: partition {gone.partition}, seq {after.seq}, "
        f"answer {after.answer_id}: seq_gap" in cut.stderr
    ), cut.stdout + cut.stderr
    assert f"seq {gone.seq}..{gone.seq} missing before this record" in cut.stdout
