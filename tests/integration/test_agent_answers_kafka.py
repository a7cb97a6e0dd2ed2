"""A worker with the default judge on real Kafka settles agents' answers by their records.

kcat (librdkafka, a client that is not ours) publishes the demo's agent answers - a
refund said approved while it waits for review, a wrong amount, a refused direct-debit
retry reported done, a blocked invoice said released, and the faithful twin of each -
compressed, keyed by conversation. The worker runs the shipped default judge (NLI
verifier, calibrator v3, record checks). Every wrong answer must come back hallucinated
with the record's reason code on the claim that carries the mistake, and every faithful
twin must pass with no such code: the verdicts a platform team acts on.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent, Verdict
from streamproc.judge.records.findings import RecordReason
from streamproc.kafka.clients import OutputTail
from streamproc.samples import AGENT_CASES, load_answers
from streamproc.wiring import prepare_topics
from tests.integration.kcat import KEY_DELIMITER, kcat_or_skip, produce

WAIT_S = 180.0  # the first verdicts wait for the verifier model to load
# What a record settles: a claim carrying one of these is contradicted whatever a model says.
RECORD_CODES = frozenset(
    reason.value
    for reason in RecordReason
    if reason not in {RecordReason.RECORD_CONFIRMED, RecordReason.FIELD_UNPARSED}
)


def _settings(bootstrap: str) -> Settings:
    run = uuid.uuid4().hex[:8]
    names = ("answers", "verdicts", "flags", "aggregates", "dead_letter", "outcomes")
    return Settings(  # the default judge: nothing under ``judge`` is set
        app_id=f"agent-{run}",
        broker_url=f"kafka://{bootstrap}",
        topics={**{name: f"agent-{run}.{name}" for name in names}, "partitions": 2},
        window={"size_s": 60.0, "grace_s": 1.0, "idle_close_s": 2.0, "tick_s": 0.5},
        worker={"rebalance_timeout_s": 10.0, "session_timeout_s": 10.0},
    )


def _agent_answers() -> list[AnswerEvent]:
    """The demo's agent answers with ids unique to this run, occurring now: their answers
    write no relative date, so the time they are stamped with changes nothing."""
    now = datetime.now(UTC)
    run = uuid.uuid4().hex[:6]
    return [
        answer.model_copy(
            update={
                "event_id": f"{run}-{answer.event_id}",
                "occurred_at": now - timedelta(seconds=index),
            }
        )
        for index, answer in enumerate(load_answers(AGENT_CASES))
    ]


def _codes(verdict: Verdict) -> set[str]:
    return {
        reason.split(":", 1)[0]
        for claim in verdict.judgement.claims
        for reason in claim.reasons
        if reason.split(":", 1)[0] in RECORD_CODES
    }


async def _verdicts(settings: Settings, worker: WorkerProcess, wanted: set[str]) -> list[Verdict]:
    seen: dict[str, Verdict] = {}
    deadline = time.monotonic() + WAIT_S
    async with OutputTail(settings.bootstrap_servers, settings.topics) as tail:
        while time.monotonic() < deadline and not wanted <= set(seen):
            for record in await tail.poll(1.0):
                if isinstance(record.event, Verdict):
                    seen[record.event.event_id] = record.event
            if not worker.running:
                pytest.fail(f"the worker died:\n{worker.log_tail(60)}", pytrace=False)
    if not wanted <= set(seen):
        pytest.fail(
            f"{len(seen)}/{len(wanted)} verdicts after {WAIT_S:.0f} s\n{worker.log_tail(60)}",
            pytrace=False,
        )
    return [seen[event_id] for event_id in sorted(wanted)]


async def test_the_default_judge_settles_agent_answers_kcat_sent_by_their_records(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    kcat = kcat_or_skip()
    settings = _settings(kafka_bootstrap)
    await prepare_topics(settings)
    answers = _agent_answers()
    lines = [
        a.conversation_id.encode() + KEY_DELIMITER + a.model_dump_json(exclude_none=True).encode()
        for a in answers
    ]
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        sent = await asyncio.to_thread(
            produce, kcat, kafka_bootstrap, settings.topics.answers, lines, codec="zstd", keyed=True
        )
        verdicts = await _verdicts(settings, worker, {a.event_id for a in answers})
        assert worker.running, worker.log_tail(60)
    finally:
        worker.stop()

    assert set(sent) == {"zstd"}, "librdkafka compressed every set: the worker decoded zstd"
    wrong = [v for v in verdicts if v.answer_id.endswith("-hallucinated")]
    faithful = [v for v in verdicts if v.answer_id.endswith("-faithful")]
    assert len(wrong) == len(faithful) == len(answers) // 2
    for verdict in wrong:
        assert verdict.judgement.hallucinated, verdict.answer_id
        assert _codes(verdict), (verdict.answer_id, verdict.judgement.claims)
    for verdict in faithful:
        assert not verdict.judgement.hallucinated, (verdict.answer_id, verdict.judgement)
        assert not _codes(verdict), (verdict.answer_id, _codes(verdict))
    assert all(v.judge.name == "nli" for v in verdicts), "the shipped default judge"
