"""The worker as an outside producer meets it, killed mid-stream (the trial that was
scripts/try_worker_outside.sh; RELIABILITY.md, "Checks with outside clients").

kcat (librdkafka, Debian's) sends 30 answers in zstd batches with a producer's
``traceparent``, a gzip batch of two hostile records (truncated JSON; an unpaired
surrogate in 3,000 unclosed brackets), then 600 answers in lz4 batches, over three
partitions, to ``streamproc worker`` in a process of its own. The worker is killed with
SIGKILL while it judges the lz4 batches, and a replacement joins the same group. What a
``read_committed`` reader (kcat again) finds afterwards: every answer sent has exactly one
verdict - none lost with the killed worker's open transaction, none repeated by its
replacement - the traced ones in the producer's trace, and each hostile record exactly
one dead letter carrying its original bytes.
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.contracts.events import DeadLetter, Verdict
from tests.integration.kcat import kcat_or_skip, produce
from tests.integration.outside import TRACE_ID, TRACEPARENT, example_answers, read_committed
from tests.integration.run_settings import run_settings

PARTITIONS = 3
WAIT_S = 120.0
HOSTILE = [
    b'{"schema_version": 1, "answer_id": "trunc',
    b'{"schema_version":1,"event_id":"x\\ud800","answer_id":"a","evidence":' + b"[" * 3000,
]
_VERDICT_LINE = re.compile(rb'"event":\s*"verdict"')


def _settings(bootstrap: str) -> Settings:
    # Small batches: many transactions, so the kill lands between and inside them.
    return run_settings(
        bootstrap,
        "kcat-kill",
        partitions=PARTITIONS,
        judge={"name": "rules"},
        worker={"batch_max": 4, "rebalance_timeout_s": 10.0, "session_timeout_s": 6.0},
    )


def _logged(worker: WorkerProcess, pattern: re.Pattern[bytes]) -> int:
    if not worker.log_path.exists():
        return 0
    return len(pattern.findall(worker.log_path.read_bytes()))


async def _until(
    what: str, worker: WorkerProcess, done: Callable[[], bool], timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if done():
            return
        if not worker.running:
            pytest.fail(f"the worker exited before {what}:\n{worker.log_tail(60)}", pytrace=False)
        await asyncio.sleep(0.05)
    pytest.fail(f"no {what} after {timeout_s:.0f} s:\n{worker.log_tail(60)}", pytrace=False)


def _send(
    kcat: str,
    bootstrap: str,
    topic: str,
    lines: list[bytes],
    codec: str,
    headers: Mapping[str, str] | None = None,
) -> None:
    """One kcat run per partition, the lines dealt out in turn."""
    for partition in range(PARTITIONS):
        lines_here = lines[partition::PARTITIONS]
        produce(
            kcat, bootstrap, topic, lines_here, codec=codec, headers=headers, partition=partition
        )


async def test_a_worker_killed_mid_stream_leaves_every_kcat_answer_exactly_one_verdict(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    kcat = kcat_or_skip()
    settings = _settings(kafka_bootstrap)
    topics = settings.topics
    traced = example_answers("wk-traced", range(30))
    bulk = example_answers("wk-bulk", range(600))
    sent = set(traced) | set(bulk)

    def verdicts() -> list[Verdict]:
        records = read_committed(kcat, kafka_bootstrap, topics.verdicts)
        return [Verdict.model_validate_json(value) for _, value in records]

    killed = WorkerProcess(settings, tmp_path / "worker-1.log").start()
    try:
        # The worker creates its topics (three partitions) before its judge loop starts.
        started = re.compile(rb"judge_loop_started")
        await _until("judge loop", killed, lambda: _logged(killed, started) > 0, 90)
        send = asyncio.to_thread
        trace = {"traceparent": TRACEPARENT}
        await send(_send, kcat, kafka_bootstrap, topics.answers, [*traced.values()], "zstd", trace)
        await send(produce, kcat, kafka_bootstrap, topics.answers, HOSTILE, codec="gzip")
        await send(_send, kcat, kafka_bootstrap, topics.answers, [*bulk.values()], "lz4")
        # Into the lz4 answers: judged, but not all of them, when the worker dies.
        into_bulk = len(traced) + 40
        await _until(
            "verdicts of the lz4 batches",
            killed,
            lambda: _logged(killed, _VERDICT_LINE) >= into_bulk,
            WAIT_S,
        )
    finally:
        killed.kill()
    at_kill = {v.answer_id for v in await asyncio.to_thread(verdicts)}
    assert 0 < len(at_kill) < len(sent), f"not killed mid-stream: {len(at_kill)} verdicts"

    replacement = WorkerProcess(settings, tmp_path / "worker-2.log").start()
    try:

        def all_committed() -> bool:
            return len(verdicts()) >= len(sent)

        await _until("verdict for every answer", replacement, all_committed, WAIT_S)
        await asyncio.sleep(3.0)  # a verdict published twice would show by now
    finally:
        replacement.stop()

    final = await asyncio.to_thread(verdicts)
    counts = Counter(v.answer_id for v in final)
    assert set(counts) == sent, f"missing {len(sent - set(counts))}, extra {set(counts) - sent}"
    assert [a for a, n in counts.items() if n > 1] == [], "answers with more than one verdict"
    assert {v.answer_id for v in final if v.trace_id == TRACE_ID} == set(traced)
    assert _logged(replacement, _VERDICT_LINE) > 0, "the replacement judged nothing"

    letters = [
        DeadLetter.model_validate_json(value)
        for _, value in await asyncio.to_thread(
            read_committed, kcat, kafka_bootstrap, topics.dead_letter
        )
    ]
    assert sorted(base64.b64decode(letter.value_b64) for letter in letters) == sorted(HOSTILE)
