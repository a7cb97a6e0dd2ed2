"""What tracing costs per answer: off (no SDK) against on, next to what judging costs.

One micro-batch of ``--batch`` answers (half pass, half withhold, each with a producer
``traceparent``) is traced the way the judge loop does it: ``Tracing.start_batch``, two
measured stages, ``verdict`` and output ``headers`` per answer, ``end`` (stage spans
under every answer, one ``gen_ai.evaluation.result`` per answer and per checked claim).
Modes:

- ``off``: ``exporter=none`` (no SDK; the producer's ``traceparent`` passed on), next to
  what it replaces, the trace-id parsing the judge loop did before;
- ``memory``: the SDK with batch processors into in-memory exporters;
- ``otlp``: the SDK with batch processors into exporters that encode every span and log
  record to OTLP protobuf bytes, as the OTLP exporters do, and drop them (no network).

With the SDK on, the timed region ends with ``force_flush``, so the background export is
counted too. Times are CPU seconds of this process (``time.process_time``: the machine is
shared), median over ``--repeats`` rounds in which every mode runs once, in a random
order, garbage collector paused while timing. The
judging stage itself (``judge_messages`` with the rules judge, the cheapest judge) on the
same batch is the reference the overhead is given against.

    .venv/bin/python -m bench tracing [--batch 64] [--repeats 200]
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from streamproc.inference.options import JudgeSettings
from streamproc.telemetry.options import TelemetrySettings
from streamproc.telemetry.otel import Telemetry
from streamproc.telemetry.tracing import MessageRef, Tracing
from streamproc.verdicts.dead_letter import MessageOrigin
from streamproc.verdicts.stage import (
    IncomingMessage,
    StageOutput,
    judge_messages,
    trace_id_from_traceparent,
)
from streamproc.wiring import build_judge

TOPIC = "streamproc.answers"
GROUP = "streamproc.judge"
EVIDENCE = "The order 7 was shipped on 5 May from the Lyon warehouse."


class OtlpEncodingSpanExporter(SpanExporter):
    """Encodes spans as the OTLP exporters do, then drops the bytes."""

    def __init__(self) -> None:
        self.bytes = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.bytes += len(encode_spans(spans).SerializeToString())
        return SpanExportResult.SUCCESS


class OtlpEncodingLogExporter(LogRecordExporter):
    """Encodes log records as the OTLP exporters do, then drops the bytes."""

    def __init__(self) -> None:
        self.bytes = 0

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        self.bytes += len(encode_logs(batch).SerializeToString())
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def answer_event(index: int) -> dict[str, object]:
    shipped = "5 May" if index % 2 == 0 else "3 May"
    return {
        "event_id": f"e{index}",
        "answer_id": f"ans-{index}",
        "conversation_id": f"conv-{index}",
        "tenant": "acme",
        "assistant_id": "bot",
        "model": "llm-1",
        "occurred_at": datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
        "question": "When was order 7 shipped?",
        "answer": f"The order 7 was shipped on {shipped} [D1].",
        "evidence": [{"id": "D1", "text": EVIDENCE}],
    }


def batch_of(size: int) -> tuple[list[IncomingMessage], list[MessageRef]]:
    incoming, refs = [], []
    for offset in range(size):
        traceparent = f"00-{offset + 1:032x}-{offset + 1:016x}-01".encode()
        origin = MessageOrigin(TOPIC, 0, offset, f"conv-{offset}".encode())
        incoming.append(IncomingMessage(json.dumps(answer_event(offset)).encode(), origin))
        refs.append(MessageRef(TOPIC, 0, offset, origin.key, [("traceparent", traceparent)]))
    return incoming, refs


def trace_batch(tracing: Tracing, refs: list[MessageRef], output: StageOutput) -> int:
    """The tracing work of one batch, as the judge loop does it; returns header bytes."""
    batch = tracing.start_batch(refs)
    now = time.time_ns()
    batch.clock.record("judge", now - 2_000_000, now - 1_000_000)
    batch.clock.record("publish", now - 1_000_000, now)
    size = 0
    for ref, verdict in zip(refs, output.verdicts, strict=True):
        traced = batch.verdict(ref, verdict)
        size += sum(len(value) for _, value in traced.headers)
    batch.end()
    tracing.telemetry.force_flush()
    return size


def before_adapter(refs: list[MessageRef]) -> list[str | None]:
    """What the judge loop did per message before this adapter: read the trace id."""
    return [
        trace_id_from_traceparent(
            {name.lower(): value for name, value in ref.headers}.get("traceparent")
        )
        for ref in refs
    ]


def median_cpu_s(works: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median CPU seconds of each work, the works interleaved in a fresh random order
    every round, so that a neighbour's load falls on all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in works}
    order = list(works)
    for work in works.values():
        work()  # warm up
    for _ in range(repeats):
        random.shuffle(order)
        for name in order:
            gc.collect()
            gc.disable()
            start = time.process_time()
            works[name]()
            times[name].append(time.process_time() - start)
            gc.enable()
    return {name: statistics.median(spent) for name, spent in times.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench tracing", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--batch", type=int, default=64, help="answers per micro-batch")
    parser.add_argument("--repeats", type=int, default=200, help="batches timed per mode")
    parser.add_argument(
        "--reference-ms",
        type=float,
        default=227.0,
        help="the default judge's time per answer, for scale (BENCHMARKS.md: owned verifier "
        "+ calibrator, 4.4 answers/s)",
    )
    args = parser.parse_args(argv)

    incoming, refs = batch_of(args.batch)
    judge = build_judge(JudgeSettings(name="rules"))
    output = judge_messages(incoming, judge)
    assert len(output.verdicts) == args.batch, output.dead_letters

    memory_spans = InMemorySpanExporter()
    memory_logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]  # bare in the SDK
    otlp = [(OtlpEncodingSpanExporter(), OtlpEncodingLogExporter()) for _ in range(2)]
    lean = TelemetrySettings(stage_spans=False)
    modes: dict[str, tuple[Telemetry, bool]] = {
        "off": (Telemetry.from_settings(TelemetrySettings(exporter="none")), True),
        "memory": (
            Telemetry.from_settings(
                TelemetrySettings(), span_exporter=memory_spans, log_exporter=memory_logs
            ),
            True,
        ),
        "otlp": (
            Telemetry.from_settings(
                TelemetrySettings(), span_exporter=otlp[0][0], log_exporter=otlp[0][1]
            ),
            True,
        ),
        "otlp-lean": (
            Telemetry.from_settings(lean, span_exporter=otlp[1][0], log_exporter=otlp[1][1]),
            False,
        ),
    }

    def run(mode: str) -> None:
        telemetry, claim_records = modes[mode]
        trace_batch(Tracing(telemetry, group=GROUP, claim_records=claim_records), refs, output)
        memory_spans.clear()
        memory_logs.clear()

    works: dict[str, Callable[[], Any]] = {mode: partial(run, mode) for mode in modes}
    works["judge"] = partial(judge_messages, incoming, judge)
    works["before"] = partial(before_adapter, refs)
    per_answer_us = {
        name: cpu_s / args.batch * 1e6 for name, cpu_s in median_cpu_s(works, args.repeats).items()
    }
    judge_us, before_us = per_answer_us.pop("judge"), per_answer_us.pop("before")
    trace_batch(Tracing(modes["memory"][0], group=GROUP), refs, output)
    spans_per_batch = len(memory_spans.get_finished_spans())
    logs_per_batch = len(memory_logs.get_finished_logs())
    for telemetry, _ in modes.values():
        telemetry.shutdown()

    batches = args.repeats + 1
    print(
        f"python {platform.python_version()}, {platform.machine()}, batch {args.batch}, "
        f"{args.repeats} repeats, CPU time medians per answer"
    )
    print(f"  judging stage (rules judge)   {judge_us:8.1f} us")
    print(f"  before: trace id from header  {before_us:8.1f} us  (what 'off' replaces)")
    for mode, cost in per_answer_us.items():
        print(f"  tracing {mode:<10}            {cost:8.1f} us  = {cost / judge_us:6.1%} of it")
    print(
        f"  'memory'/'otlp': {spans_per_batch} spans and {logs_per_batch} evaluation records "
        f"per batch; 'otlp-lean': stage_spans off, no per-claim records. OTLP bytes per "
        f"answer: {sum(e.bytes for e in otlp[0]) / (args.batch * batches):.0f} / "
        f"{sum(e.bytes for e in otlp[1]) / (args.batch * batches):.0f}"
    )
    off, on, leaner = per_answer_us["off"], per_answer_us["otlp"], per_answer_us["otlp-lean"]
    print(
        f"BENCHMARKS.md: tracing per answer (batches of {args.batch}, CPU median of "
        f"{args.repeats}): off {off:.1f} us, replacing {before_us:.1f} us of trace-id parsing "
        f"({off / judge_us:.1%} of the rules judge's {judge_us:.0f} us); "
        f"on with OTLP encoding {on:.0f} us ({on / off:.0f}x off, "
        f"{on / judge_us:.0%} of the rules judge, {on / (args.reference_ms * 10):.2f}% of the "
        f"default judge's ~{args.reference_ms:.0f} ms), {leaner:.0f} us without stage spans "
        f"and claim records"
    )
    return 0
