"""The README's producer (examples/produce_answer.py), run as a user would, against real
Kafka: it says what it sent, each run under a fresh event id, its answers are judged by
the worker's loop, keyed by conversation, and the verdicts continue the producer's
trace."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from pathlib import Path

from streamproc.contracts.events import Verdict
from streamproc.kafka.clients import OutputTail
from streamproc.monitor.judging_loop import JudgeLoop
from streamproc.wiring import build_judge, kafka_loop_options, prepare_topics, stage_limits
from tests.integration.run_settings import run_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "produce_answer.py"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


async def test_the_example_producer_is_judged_and_its_trace_continues(
    kafka_bootstrap: str,
) -> None:
    settings = run_settings(kafka_bootstrap, "example", partitions=2, judge={"name": "rules"})
    await prepare_topics(settings)
    sent: list[str] = []
    for _ in range(2):  # run twice, as a user trying it would
        done = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                str(EXAMPLE),
                "--bootstrap",
                kafka_bootstrap,
                "--topic",
                settings.topics.answers,
                "--traceparent",
                f"00-{TRACE_ID}-00f067aa0ba902b7-01",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        said = re.fullmatch(
            rf"sent to {re.escape(settings.topics.answers)} partition \d+ offset \d+: "
            r"key=conv-42 event_id=([0-9a-f-]{36})\n",
            done.stdout,
        )
        assert said is not None, done.stdout
        sent.append(said.group(1))
    assert sent[0] != sent[1], "a fresh event id per run"
    loop = JudgeLoop(
        kafka_loop_options(settings), build_judge(settings.judge), limits=stage_limits(settings)
    )
    task = asyncio.create_task(loop.run())
    verdicts: list[Verdict] = []
    try:
        async with OutputTail(settings.bootstrap_servers, settings.topics) as tail:
            deadline = time.monotonic() + 60
            while len(verdicts) < 2 and time.monotonic() < deadline:
                verdicts += [r.event for r in await tail.poll(0.5) if isinstance(r.event, Verdict)]
    finally:
        loop.stop()
        await task
    # Both runs are judged: the worker's dedup drops only a repeated event id.
    assert sorted(v.event_id for v in verdicts) == sorted(sent)
    for verdict in verdicts:
        assert verdict.answer_id == "ans-0001"
        assert verdict.trace_id == TRACE_ID
        assert verdict.judgement.checked_claims >= 1
