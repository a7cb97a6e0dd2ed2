"""End to end on a real Kafka broker: the 12 seed answers and one malformed event in;
verdicts, flags, a dead letter and a window aggregate out, matching the offline judge."""

from __future__ import annotations

import base64
import socket
import time
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.contracts.events import (
    Action,
    AnswerEvent,
    DeadLetter,
    DeadLetterReason,
    Flag,
    Verdict,
    WindowAggregate,
)
from streamproc.kafka.clients import OutputTail, publish_answers, publish_raw
from streamproc.rates.stats import wilson_interval
from streamproc.samples import SEED_LAB, load_answers
from streamproc.wiring import build_judge, prepare_topics

MALFORMED = b'{"event_id": "broken", "answer": '
WINDOW_START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
REPLAY_HORIZON_S = 10 * 365 * 24 * 3600.0
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _settings(bootstrap: str) -> Settings:
    run = uuid.uuid4().hex[:8]
    return Settings(
        app_id=f"e2e-{run}",
        broker_url=f"kafka://{bootstrap}",
        log_json=True,
        topics={
            "answers": f"e2e-{run}.answers",
            "verdicts": f"e2e-{run}.verdicts",
            "flags": f"e2e-{run}.flags",
            "aggregates": f"e2e-{run}.aggregates",
            "dead_letter": f"e2e-{run}.dead-letter",
            "outcomes": f"e2e-{run}.outcomes",
            "partitions": 3,
        },
        window={"size_s": 60.0, "grace_s": 1.0, "idle_close_s": 2.0, "tick_s": 0.5},
        worker={
            "rebalance_timeout_s": 10.0,
            "session_timeout_s": 10.0,
            "event_time_max_past_s": REPLAY_HORIZON_S,  # fixed timestamps from January
        },
        metrics={"port": _free_port()},
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _scrape(settings: Settings) -> dict[str, float]:
    """The worker's /metrics, summed per sample name and label set as ``name{a=b,...}``."""
    url = f"http://127.0.0.1:{settings.metrics.port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}"] = sample.value
    return samples


def _seed_answers() -> list[AnswerEvent]:
    """The seed cases, all inside one 60 s event-time window."""
    return [
        answer.model_copy(update={"occurred_at": WINDOW_START + timedelta(seconds=2 * index)})
        for index, answer in enumerate(load_answers(SEED_LAB))
    ]


@pytest.fixture()
def settings(kafka_bootstrap: str) -> Settings:
    return _settings(kafka_bootstrap)


@pytest.fixture()
def worker(settings: Settings, tmp_path: Path) -> Iterator[WorkerProcess]:
    import asyncio

    asyncio.run(prepare_topics(settings))
    process = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        yield process
    finally:
        process.stop()


async def _collect(
    settings: Settings,
    *,
    verdicts: int,
    dead_letters: int,
    answers_in_windows: int,
    timeout_s: float,
    worker: WorkerProcess,
) -> dict[str, list[object]]:
    found: dict[str, list[object]] = {"verdict": [], "flag": [], "aggregate": [], "dead_letter": []}
    deadline = time.monotonic() + timeout_s
    async with OutputTail(settings.bootstrap_servers, settings.topics) as tail:
        while time.monotonic() < deadline:
            for record in await tail.poll(1.0):
                found[record.kind].append(record.event)
            counted = sum(a.answers for a in found["aggregate"] if isinstance(a, WindowAggregate))
            if (
                len(found["verdict"]) >= verdicts
                and len(found["dead_letter"]) >= dead_letters
                and counted >= answers_in_windows
            ):
                return found
    pytest.fail(
        f"timed out: { {k: len(v) for k, v in found.items()} }\n{worker.log_tail()}",
        pytrace=False,
    )


async def test_seed_answers_flow_through_real_kafka(
    settings: Settings, worker: WorkerProcess
) -> None:
    answers = _seed_answers()
    await publish_answers(
        settings.bootstrap_servers,
        settings.topics.answers,
        answers,
        traceparents={answers[0].event_id: TRACEPARENT},
    )
    await publish_raw(
        settings.bootstrap_servers, settings.topics.answers, [(b"bad", MALFORMED, [])]
    )

    found = await _collect(
        settings, verdicts=12, dead_letters=1, answers_in_windows=12, timeout_s=120, worker=worker
    )

    verdicts = {v.event_id: v for v in found["verdict"] if isinstance(v, Verdict)}
    assert set(verdicts) == {answer.event_id for answer in answers}
    assert len(found["verdict"]) == 12, "each answer is judged exactly once"

    offline = build_judge(settings.judge).judge_batch(answers)
    for answer, expected in zip(answers, offline, strict=True):
        got = verdicts[answer.event_id].judgement
        assert got.outcome == expected.outcome, answer.event_id
        assert got.action == expected.action, answer.event_id
        assert [c.verdict for c in got.claims] == [c.verdict for c in expected.claims]
    assert verdicts[answers[0].event_id].trace_id == TRACEPARENT.split("-")[1]

    flagged = {f.event_id for f in found["flag"] if isinstance(f, Flag)}
    needing_action = {
        answer.event_id
        for answer, judgement in zip(answers, offline, strict=True)
        if judgement.action is not Action.PASS
    }
    assert needing_action, "the seed cases contain hallucinations"
    assert flagged == needing_action

    [letter] = [d for d in found["dead_letter"] if isinstance(d, DeadLetter)]
    assert letter.reason is DeadLetterReason.BAD_JSON
    assert letter.topic == settings.topics.answers
    assert base64.b64decode(letter.value_b64) == MALFORMED
    assert letter.key_b64 is not None and base64.b64decode(letter.key_b64) == b"bad"

    [window] = [a for a in found["aggregate"] if isinstance(a, WindowAggregate)]
    answered = [j for j in offline if not j.abstained]
    hallucinated = sum(j.hallucinated for j in answered)
    assert window.assistant_id == answers[0].assistant_id
    assert window.window_start == WINDOW_START
    assert window.window_end == WINDOW_START + timedelta(seconds=60)
    assert window.answers == 12
    assert window.abstentions == 12 - len(answered)
    assert window.answered == len(answered)
    assert window.hallucinated == hallucinated
    assert window.contradicted_claims == sum(j.contradicted_claims for j in offline)
    assert window.unsupported_claims == sum(j.unsupported_claims for j in offline)
    assert window.rate == pytest.approx(hallucinated / len(answered))
    assert (window.rate_low, window.rate_high) == pytest.approx(
        wilson_interval(hallucinated, len(answered))
    )
    assert window.revision == 0

    # The same numbers on the worker's Prometheus endpoint.
    scraped = _scrape(settings)
    key = f"assistant={answers[0].assistant_id},model={answers[0].model},tenant={answers[0].tenant}"
    by_action = {
        action: scraped.get(f"streamproc_answers_total{{action={action.value},{key}}}", 0.0)
        for action in Action
    }
    assert sum(by_action.values()) == 12
    assert by_action == {action: sum(j.action is action for j in offline) for action in Action}
    assert scraped[f"streamproc_answers_answered_total{{{key}}}"] == len(answered)
    assert scraped[f"streamproc_answers_hallucinated_total{{{key}}}"] == hallucinated
    assert scraped["streamproc_dead_letters_total{reason=bad_json}"] == 1
