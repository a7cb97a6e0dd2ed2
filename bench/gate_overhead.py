"""What the gate's service adds to its judge's own time, in one process, with no HTTP,
no Kafka and no queue: each answer checked alone (``GateService.check``, publishing off
unless ``--publish``: then the monitored records are built as a publishing gate builds
them, and sent nowhere; a 30 s budget), minus the judge call's own time inside it
(``GateResult.judge_ms``); also the intake parse and the reply's JSON. Splits
``python -m bench gate``'s "gate p50 - judge p50" into the service's part and the rest (the
HTTP round trip, waiting behind a batch, the load generator on the same cores).

    .venv/bin/python -m bench gate-overhead [--answers qa|ragtruth] [--count 80] [--publish]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from bench.gate import answer_pool
from streamproc.config import Settings
from streamproc.contracts.events import AnswerEvent
from streamproc.gate.request import GateRequest, http_origin
from streamproc.gate.sensor import NullGateSensor
from streamproc.telemetry.otel import Telemetry
from streamproc.wiring import build_gate


async def measure(events: list[AnswerEvent], *, publish: bool = False) -> dict[str, float]:
    """Per answer: the service's time beyond its judge call, the parse, the reply JSON
    (medians and 95th percentiles, ms); the first answer warms the models up."""
    service = build_gate(
        Settings(gate={"publish": publish}), telemetry=Telemetry.disabled(), sensor=NullGateSensor()
    )
    await service.start()
    beyond: list[float] = []
    parse: list[float] = []
    reply: list[float] = []
    try:
        for event in events:
            body = event.model_copy(update={"occurred_at": datetime.now(UTC)})
            raw = body.model_dump_json(exclude_none=True).encode()
            started = time.perf_counter()
            answer = service.parse(raw)
            parsed = time.perf_counter()
            if not isinstance(answer, AnswerEvent):
                raise SystemExit(f"intake refused a pool answer: {answer}")
            request = GateRequest(
                body=raw,
                answer=answer,
                budget_ms=30_000,
                arrived=time.monotonic(),
                origin=http_origin(),
                headers=(),
                trace_id=None,
            )
            result = await service.check(request)
            checked = time.perf_counter()
            result.reply.model_dump_json()
            replied = time.perf_counter()
            parse.append((parsed - started) * 1000)
            beyond.append((checked - parsed) * 1000 - (result.judge_ms or 0.0))
            reply.append((replied - checked) * 1000)
    finally:
        await service.close()
    out: dict[str, float] = {}
    for name, values in (("beyond_judge", beyond[1:]), ("parse", parse[1:]), ("reply", reply[1:])):
        ordered = sorted(values)
        out[f"{name}_p50_ms"] = statistics.median(ordered)
        out[f"{name}_p95_ms"] = ordered[int(0.95 * (len(ordered) - 1))]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench gate-overhead", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--answers", choices=["qa", "ragtruth"], default="qa")
    parser.add_argument("--count", type=int, default=80)
    parser.add_argument("--publish", action="store_true", help="build the monitored records")
    args = parser.parse_args(argv)
    events, _ = answer_pool(args.answers, None)
    figures = asyncio.run(measure(events[: args.count], publish=args.publish))
    records = ", monitored records built" if args.publish else ""
    print(f"{args.answers}, {args.count} answers one at a time{records}:")
    for name, value in figures.items():
        print(f"  {name}: {value:.2f}")
    return 0
