"""The one-command demo: embedded broker, one worker, sample answers, live output.

Starts Tansu (memory-only, shipped in a PyPI wheel), creates the topics, starts a worker
process, publishes the in-repo sample answers (event time = now, so they fall into live
windows) plus one malformed event, and prints verdicts (with the claims that failed), dead
letters and window aggregates as they arrive. Stops everything on the way out, also on Ctrl-C.
A verdict line names the answer's outcome in one vocabulary, the action the verdicts and
flags carry (pass, trim, withhold); whether the answer abstained is not a second outcome.
Tansu comes with the ``demo`` extra (``pip install 'streamproc[demo]'``); without it the
demo says so in one line and exits with code 2, before starting anything.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from streamproc.cli.child_process import WorkerProcess
from streamproc.config import Settings
from streamproc.contracts.events import (
    AnswerEvent,
    DeadLetter,
    Flag,
    Verdict,
    VerdictLabel,
    WindowAggregate,
)
from streamproc.kafka.brokers import EmbeddedTansu, TansuNotInstalledError, tansu_binary
from streamproc.kafka.clients import OutputRecord, OutputTail, publish_answers, publish_raw
from streamproc.samples import load_sample_answers
from streamproc.telemetry.logging import configure_logging
from streamproc.wiring import prepare_topics

__all__ = ["EXIT_EXTRA_MISSING", "demo_settings", "run_demo", "verdict_line"]

EXIT_EXTRA_MISSING = 2  # like a missing model (streamproc.cli.EXIT_MODEL_MISSING)

MALFORMED = b'{"event_id": "broken-1", "answer": "no closing brace"'


def demo_settings(broker_url: str) -> Settings:
    """Small windows and fast group joins, so the demo shows closed windows in seconds."""
    return Settings(
        app_id="streamproc-demo",
        broker_url=broker_url,
        broker_flavour="tansu",
        log_json=True,
        topics={"partitions": 3},
        window={"size_s": 10.0, "grace_s": 2.0, "idle_close_s": 5.0, "tick_s": 0.5},
        worker={"rebalance_timeout_s": 6.0, "session_timeout_s": 10.0, "batch_max": 8},
    )


def run_demo(timeout_s: float = 180.0) -> int:
    """Run the demo; 0 when every answer came back judged and counted in a window,
    ``EXIT_EXTRA_MISSING`` (one line on stderr) without the demo extra."""
    try:
        binary = tansu_binary()
    except TansuNotInstalledError as exc:
        print(f"streamproc: {exc}", file=sys.stderr, flush=True)
        return EXIT_EXTRA_MISSING
    configure_logging("WARNING", json_logs=False)
    answers = _live(load_sample_answers())
    with tempfile.TemporaryDirectory(prefix="streamproc-demo-") as workdir:
        logs = Path(workdir)
        print(f"starting embedded Tansu broker (logs in {logs})", flush=True)
        with EmbeddedTansu(log_path=logs / "tansu.log", binary=binary) as broker:
            settings = demo_settings(broker.url)
            asyncio.run(prepare_topics(settings))
            print(f"broker pid {broker.pid} at {broker.bootstrap}", flush=True)
            with WorkerProcess(settings, logs / "worker.log") as worker:
                print(f"worker pid {worker.pid} (judge: {settings.judge.name})", flush=True)
                try:
                    ok = asyncio.run(_drive(settings, answers, timeout_s))
                except KeyboardInterrupt:
                    ok = False
                if not ok:
                    print("worker log (last lines):\n" + worker.log_tail(), flush=True)
        print("stopped the worker and the broker", flush=True)
    return 0 if ok else 1


def _live(answers: list[AnswerEvent]) -> list[AnswerEvent]:
    """Re-stamp the samples as if they happened now, a few tens of ms apart."""
    start = datetime.now(UTC)
    return [
        answer.model_copy(update={"occurred_at": start + timedelta(milliseconds=40 * index)})
        for index, answer in enumerate(answers)
    ]


async def _drive(settings: Settings, answers: list[AnswerEvent], timeout_s: float) -> bool:
    bootstrap = settings.bootstrap_servers
    await publish_answers(bootstrap, settings.topics.answers, answers, security=settings.security)
    await publish_raw(
        bootstrap, settings.topics.answers, [(b"broken", MALFORMED, [])], security=settings.security
    )
    print(f"published {len(answers)} sample answers and 1 malformed event\n", flush=True)

    expected = {answer.event_id for answer in answers}
    judged: set[str] = set()
    windows: dict[tuple[str, str, str, datetime], WindowAggregate] = {}
    dead_letters = 0
    flags = 0
    deadline = time.monotonic() + timeout_s
    async with OutputTail(bootstrap, settings.topics, security=settings.security) as tail:
        while time.monotonic() < deadline:
            for record in await tail.poll(1.0):
                _print(record)
                event = record.event
                if isinstance(event, Verdict):
                    judged.add(event.event_id)
                elif isinstance(event, WindowAggregate):
                    key = (event.tenant, event.assistant_id, event.model, event.window_start)
                    windows[key] = event  # the latest revision of each window
                elif isinstance(event, DeadLetter):
                    dead_letters += 1
                elif isinstance(event, Flag):
                    flags += 1
            counted = sum(window.answers for window in windows.values())
            if judged >= expected and dead_letters >= 1 and counted >= len(expected):
                print(
                    f"\nall {len(judged)} answers judged, {flags} flagged for action, "
                    f"{dead_letters} dead letter(s); {len(windows)} windows closed",
                    flush=True,
                )
                return True
    print(
        f"\ntimed out after {timeout_s:.0f}s: {len(judged)}/{len(expected)} verdicts, "
        f"{sum(w.answers for w in windows.values())} answers in closed windows",
        flush=True,
    )
    return False


def verdict_line(verdict: Verdict) -> str:
    """One answer's line: its action is the only outcome word, so an abstaining answer
    the judge trims reads "trim", as on the verdicts and flags topics."""
    judgement = verdict.judgement
    faithfulness = "-" if judgement.faithfulness is None else f"{judgement.faithfulness:.0%}"
    return (
        f"verdict  {verdict.answer_id:<22} {verdict.assistant_id:<18} "
        f"{judgement.action.value:<8} faithfulness {faithfulness:>4}  "
        f"claims {judgement.checked_claims}"
    )


def _print(record: OutputRecord) -> None:
    event = record.event
    if isinstance(event, Verdict):
        judgement = event.judgement
        print(verdict_line(event), flush=True)
        for claim in judgement.claims:
            if claim.verdict not in (None, VerdictLabel.SUPPORTED):
                print(f"           {claim.verdict.value:<12} {claim.text[:90]}", flush=True)
                if claim.reasons:  # what decided it: "COUNT_MISMATCH: claim says 80, ..."
                    print(f"           {'':<12} {claim.reasons[0][:110]}", flush=True)
    elif isinstance(event, DeadLetter):
        print(
            f"dead     offset {event.offset} on {event.topic}: {event.reason.value}: "
            f"{event.error[:80]}",
            flush=True,
        )
    elif isinstance(event, WindowAggregate):
        print(_window_line(event), flush=True)


def _window_line(window: WindowAggregate) -> str:
    rate = "-" if window.rate is None else f"{window.rate:.0%}"
    interval = (
        ""
        if window.rate_low is None or window.rate_high is None
        else f" [95% CI {window.rate_low:.0%}-{window.rate_high:.0%}]"
    )
    return (
        f"WINDOW   {window.tenant:<10} {window.assistant_id:<18} {window.model:<12} "
        f"{window.window_start:%H:%M:%S}-"
        f"{window.window_end:%H:%M:%S}  answers {window.answers:>3}  answered "
        f"{window.answered:>3}  hallucinated {window.hallucinated:>3}  rate {rate}{interval}  "
        f"contradicted {window.contradicted_claims} unsupported {window.unsupported_claims}  "
        f"revision {window.revision}"
    )
