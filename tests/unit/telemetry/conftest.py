"""Fixtures for the telemetry tests: a Telemetry with the SDK's in-memory exporters
(synchronous, so spans and records are readable as soon as they end), and real verdicts
from the rules judge."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from streamproc.contracts.events import Verdict
from streamproc.inference.options import JudgeSettings
from streamproc.telemetry.options import TelemetrySettings
from streamproc.telemetry.otel import Telemetry
from streamproc.verdicts.dead_letter import MessageOrigin
from streamproc.verdicts.stage import IncomingMessage, StageOutput, judge_messages
from streamproc.wiring import build_judge

TOPIC = "streamproc.answers"
GROUP = "streamproc.judge"
PARENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{PARENT_TRACE}-{PARENT_SPAN}-01".encode()
EVIDENCE = "The order 7 was shipped on 5 May from the Lyon warehouse."


@dataclass
class Otel:
    telemetry: Telemetry
    spans: InMemorySpanExporter
    logs: InMemoryLogRecordExporter


def make_otel(**settings: object) -> Otel:
    spans = InMemorySpanExporter()
    logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]  # SDK leaves it bare
    telemetry = Telemetry.from_settings(
        TelemetrySettings.model_validate(settings),
        span_exporter=spans,
        log_exporter=logs,
        synchronous=True,
    )
    return Otel(telemetry, spans, logs)


@pytest.fixture()
def otel() -> Iterator[Otel]:
    built = make_otel()
    yield built
    built.telemetry.shutdown()


def answer_event(event_id: str, text: str) -> dict[str, object]:
    return {
        "event_id": event_id,
        "answer_id": f"ans-{event_id}",
        "conversation_id": "conv",
        "tenant": "acme",
        "assistant_id": "bot",
        "model": "llm-1",
        "occurred_at": datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
        "question": "When was order 7 shipped?",
        "answer": text,
        "evidence": [{"id": "D1", "text": EVIDENCE}],
    }


GOOD = answer_event("e1", "The order 7 was shipped on 5 May [D1].")
BAD = answer_event("e2", "The order 7 was shipped on 3 May [D1].")


def judged(*documents: object, partition: int = 0) -> StageOutput:
    """The judging stage's output for ``documents`` (offsets 0, 1, ...)."""
    messages = [
        IncomingMessage(
            value=json.dumps(document).encode(),
            origin=MessageOrigin(TOPIC, partition, offset, b"conv"),
        )
        for offset, document in enumerate(documents)
    ]
    return judge_messages(messages, build_judge(JudgeSettings(name="rules")))


def verdict_of(document: object) -> Verdict:
    output = judged(document)
    assert len(output.verdicts) == 1, output.dead_letters
    return output.verdicts[0]
