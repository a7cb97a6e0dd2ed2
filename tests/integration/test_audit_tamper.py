"""Every tamper class end to end: audit records and a reviewer's label go through a
real Kafka broker into the real audit sink (its own process, signing its checkpoints
and publishing them to the checkpoint topic), in PostgreSQL; then an auditor's CLI
verifies, a tamperer edits the store behind its back, and ``audit verify
--topic-checkpoints`` names what was done. Two tenants send the same answer ids: both
keep their records. SQLite: every tamper class in tests/unit/audit/test_tamper.py, and
the sink, verify and a tamper end to end in tests/integration/test_complaint_walk.py."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from sqlalchemy import MetaData, create_engine, delete, insert, select

from streamproc.audit.sink import (
    audit_checkpoint_topic_spec,
    audit_topic_spec,
    label_key,
)
from streamproc.audit.store import AuditStore
from streamproc.config import Settings
from streamproc.kafka.topics import ensure_topics
from streamproc.wiring import topic_layout
from tests.unit.audit.audit_samples import make_records
from tests.unit.audit.keys import FORGER, write_key_files
from tests.unit.audit.label_samples import make_label
from tests.unit.audit.store_contract import sql
from tests.unit.audit.tamper import append_forged_purge, rewrite_chain

_TABLES = ("audit_records", "audit_labels", "audit_purges", "audit_checkpoints")


@pytest.fixture
def store_url(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue("postgres_database")
    return url


@pytest.fixture()
def settings(kafka_bootstrap: str, tmp_path: Path, store_url: str) -> Settings:
    run = uuid.uuid4().hex[:8]
    private, public = write_key_files(tmp_path)
    return Settings(
        app_id=f"tamper-{run}",
        broker_url=f"kafka://{kafka_bootstrap}",
        topics={"partitions": 2},
        audit={
            "topic": f"tamper-{run}.audit",
            "checkpoint_topic": f"tamper-{run}.audit-checkpoints",
            "store_url": store_url,
            "checkpoint_every": 5,
            "checkpoint_interval_s": 1.0,
            "signing_key_file": str(private),
            "verify_key_file": str(public),
        },
    )


def audit(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m streamproc audit ARGS``, as an auditor types it."""
    return subprocess.run(
        [sys.executable, "-m", "streamproc", "audit", *args],
        env={**os.environ, **settings.to_env()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def verify(settings: Settings) -> subprocess.CompletedProcess[str]:
    return audit(settings, "verify", "--topic-checkpoints")


def assert_caught(settings: Settings, problem: str, who: str) -> str:
    done = verify(settings)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f": {problem}" in done.stderr and who in done.stderr, done.stdout + done.stderr
    return done.stdout


@pytest.fixture()
def sink(settings: Settings, tmp_path: Path) -> Iterator[Callable[[], str]]:
    log = tmp_path / "sink.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "streamproc", "audit-sink"],
        env={**os.environ, **settings.to_env()},
        stdin=subprocess.DEVNULL,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield lambda: log.read_text(errors="replace")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


async def publish(settings: Settings, values: list[tuple[str, bytes]]) -> None:
    """Publish as the judge and labels loops do: keyed, in one transaction."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap_servers,
        transactional_id=f"{settings.app_id}-test",
        enable_idempotence=True,
    )
    await producer.start()
    try:
        await producer.begin_transaction()
        for key, value in values:
            await producer.send_and_wait(settings.audit.topic, key=key.encode(), value=value)
        await producer.commit_transaction()
    finally:
        await producer.stop()


def snapshot(url: str) -> dict[str, list[dict[str, Any]]]:
    engine = create_engine(url)
    tables = MetaData()
    tables.reflect(engine, only=_TABLES)
    try:
        with engine.begin() as conn:
            return {
                name: [dict(row._mapping) for row in conn.execute(select(tables.tables[name]))]
                for name in _TABLES
            }
    finally:
        engine.dispose()


def restore(url: str, saved: dict[str, list[dict[str, Any]]]) -> None:
    """Put the store back as it was before a tamper."""
    engine = create_engine(url)
    tables = MetaData()
    tables.reflect(engine, only=_TABLES)
    try:
        with engine.begin() as conn:
            for name in _TABLES:
                conn.execute(delete(tables.tables[name]))
                if saved[name]:
                    conn.execute(insert(tables.tables[name]), saved[name])
    finally:
        engine.dispose()


def anchored(store: AuditStore) -> bool:
    """Every chain's head is checkpointed (so published, signed)."""
    heads = {p: store.head(p)[0] for p in store.partitions()}
    marks = {mark.partition: mark.seq for mark in store.latest_checkpoints()}
    return bool(heads) and all(marks.get(p) == seq for p, seq in heads.items())


async def test_every_tamper_class_is_caught_end_to_end(
    settings: Settings, sink: Callable[[], str]
) -> None:
    await ensure_topics(
        settings.bootstrap_servers,
        [
            audit_topic_spec(topic_layout(settings)),
            audit_checkpoint_topic_spec(topic_layout(settings)),
        ],
        settings.security,
    )
    a = make_records(12, tenant="tenant-a", conversation="conv-a")
    b = make_records(12, tenant="tenant-b", conversation="conv-b")
    label = make_label(b[2], "L-b2", answer_label="hallucinated")
    values = [(r.answer_id, r.model_dump_json().encode()) for r in [*a, *b]]
    values.append((label_key(label.answer_id, "L-b2"), label.model_dump_json().encode()))
    await publish(settings, values)

    store = AuditStore(settings.audit.store_url)
    deadline = time.monotonic() + 90
    while not (len(store.find(limit=None)) == 24 and anchored(store)):
        assert time.monotonic() < deadline, sink()[-3000:]
        await asyncio.sleep(0.3)
    store.close()

    # Colliding answer ids: both tenants' records kept, each shown for its tenant.
    shown = audit(settings, "show", "ans-2", "--tenant", "tenant-b", "--plain")
    assert shown.returncode == 0, shown.stderr
    assert "tenant: tenant-b" in shown.stdout and "conversation_id: conv-b" in shown.stdout
    assert "label L-b2 by alice" in shown.stdout
    assert audit(settings, "show", "ans-2", "--plain").returncode == 2, "which tenant?"
    clean = verify(settings)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "NOT PROVEN" not in clean.stdout and "OK: every chain verifies" in clean.stdout
    saved = snapshot(settings.audit.store_url)
    url = settings.audit.store_url
    where_b2 = "answer_id = 'ans-2' AND tenant = 'tenant-b'"

    # 1. Edited JSON.
    sql_update = (
        "UPDATE audit_records SET record_json = replace(record_json, 'withhold', 'pass') "
        f"WHERE {where_b2}"
    )
    assert sql(store, sql_update) == 1
    assert_caught(settings, "leaf_mismatch", "answer ans-2")
    restore(url, saved)

    # 2. Edited columns: caught, and show prints the hashed values.
    for column, value in (
        ("action", "'pass'"),
        ("hallucinated", "false"),
        ("conversation_id", "'conv-forged'"),
    ):
        assert sql(store, f"UPDATE audit_records SET {column} = {value} WHERE {where_b2}") == 1
        out = assert_caught(settings, "column_mismatch", "answer ans-2")
        assert f"column {column} reads" in out
        shown = audit(settings, "show", "ans-2", "--tenant", "tenant-b", "--plain")
        assert "action: withhold" in shown.stdout and "hallucinated: true" in shown.stdout
        assert "conv-forged" not in shown.stdout
        restore(url, saved)
    assert sql(store, "UPDATE audit_labels SET answer_label = 'faithful'") == 1
    assert_caught(settings, "column_mismatch", "answer ans-2, label L-b2")
    shown = audit(settings, "show", "ans-2", "--tenant", "tenant-b", "--plain")
    assert "label L-b2 by alice at 2026-03-02T13:00:00+00:00: hallucinated" in shown.stdout
    restore(url, saved)

    # 3. Deleted middle.
    assert sql(store, "DELETE FROM audit_records WHERE seq = 3 AND audit_partition = 0") == 1
    assert_caught(settings, "seq_gap", "partition 0, seq 4")
    restore(url, saved)

    # 4. Cut tail, checkpoint rows with it: only the published checkpoints show it.
    cut = "audit_partition = 0 AND seq > 2"
    for table in ("audit_records", "audit_labels", "audit_purges", "audit_checkpoints"):
        sql(store, f"DELETE FROM {table} WHERE {cut}")
    alone = audit(settings, "verify")
    assert alone.returncode == 0 and "NOT PROVEN: partition 0: the 2 links" in alone.stdout
    assert_caught(settings, "truncated", "partition 0")
    restore(url, saved)

    # 5. Rewritten chain: the record edited, every hash after it recomputed.
    rewrite_chain(url, 0, 1, '"answer":"', '"answer":"Not ')
    sql(store, "DELETE FROM audit_checkpoints")
    assert audit(settings, "verify").returncode == 0, "the store alone shows nothing"
    assert_caught(settings, "checkpoint_mismatch", "partition 0")
    restore(url, saved)

    # 6. Forged purges: rows emptied in SQL; a purge entry signed with another key.
    emptied = f"UPDATE audit_records SET record_json = NULL, purged_at = stored_at WHERE {where_b2}"
    assert sql(store, emptied) == 1
    assert_caught(settings, "unsigned_purge", "answer ans-2")
    restore(url, saved)
    append_forged_purge(url, 0, 2, FORGER)
    assert_caught(settings, "unsigned_purge", "partition 0, seq 2")
    restore(url, saved)

    # A signed purge verifies, anchored by the checkpoint it published.
    purged = audit(settings, "purge", "--conversation", "conv-a")
    assert purged.returncode == 0 and "purged 12 record(s)" in purged.stdout, purged.stderr
    assert "signed checkpoint(s)" in purged.stdout
    after = verify(settings)
    assert after.returncode == 0, after.stdout + after.stderr
    assert "NOT PROVEN" not in after.stdout and "purge entries" in after.stdout
