"""The kcat command of docs/stream.md works as pasted: run by bash (kcat swapped for
``cat``, so bash fills in the date and the ids exactly as it would), every line it would
send is an answer the worker's intake accepts, on the worker's answers topic, keyed by its
conversation - not a dead letter for an event time months old."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from streamproc.contracts.events import AnswerEvent
from streamproc.verdicts.intake import parse_answer
from streamproc.verdicts.options import TopicSettings, WorkerSettings

DOC = Path(__file__).resolve().parents[2] / "docs" / "stream.md"
_FENCED = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def kcat_block() -> str:
    blocks: list[str] = _FENCED.findall(DOC.read_text(encoding="utf-8"))
    [block] = [b for b in blocks if "kcat -P" in b]
    return block


def run_as_pasted(block: str) -> list[str]:
    """What kcat would read on stdin: bash runs the block with kcat as a function that
    prints its input."""
    bash = shutil.which("bash")
    assert bash is not None
    done = subprocess.run(
        [bash, "-c", "kcat() { cat; }\n" + block],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    return done.stdout.splitlines()


def test_the_docs_kcat_command_sends_an_answer_the_intake_accepts() -> None:
    block = kcat_block()
    topic = re.search(r"\s-t\s+(\S+)", block)
    assert topic is not None and topic.group(1) == TopicSettings().answers
    assert re.search(r"\s-K\s+'\|'", block), "key and value split at '|'"
    before = int(time.time())
    lines = run_as_pasted(block)
    assert len(lines) == 1
    key, _, value = lines[0].partition("|")
    worker = WorkerSettings()
    parsed = parse_answer(
        value.encode(),
        worker.max_event_bytes,
        now=datetime.now(UTC),
        max_future_s=worker.event_time_max_future_s,
        max_past_s=worker.event_time_max_past_s,
    )
    assert isinstance(parsed, AnswerEvent), parsed
    assert key == parsed.conversation_id
    # Fresh per paste: the worker judges a repeated (tenant, event_id) once.
    stamp = int(parsed.event_id.removeprefix("kcat-"))
    assert before <= stamp <= int(time.time())
    assert abs((datetime.now(UTC) - parsed.occurred_at).total_seconds()) < 60
