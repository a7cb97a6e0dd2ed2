"""What the outside-client trials share: answers as an outside producer writes them (the
documented example event, ``schemas/examples/answer-event.json``, with fresh ids) and
kcat reading a topic the way a ``read_committed`` consumer of another team would."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["TRACEPARENT", "TRACE_ID", "example_answers", "read_committed"]

EXAMPLE = Path(__file__).resolve().parents[2] / "schemas" / "examples" / "answer-event.json"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
_TIMEOUT_S = 60.0


def example_answers(prefix: str, numbers: range) -> dict[str, bytes]:
    """One JSON line per number: the example event with event id ``<prefix>-e<n>``,
    answer id ``<prefix>-a<n>`` and conversation ``<prefix>-c<n>``, occurring now; keyed
    by answer id."""
    example = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    now = datetime.now(UTC).isoformat()
    answers = {}
    for n in numbers:
        event = example | {
            "event_id": f"{prefix}-e{n}",
            "answer_id": f"{prefix}-a{n}",
            "conversation_id": f"{prefix}-c{n}",
            "occurred_at": now,
        }
        answers[event["answer_id"]] = json.dumps(event, separators=(",", ":")).encode()
    return answers


def read_committed(kcat: str, bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    """Every committed record of ``topic`` as kcat reads it with
    ``isolation.level=read_committed``, from the beginning to the end: (key, value), an
    absent key as b""."""
    command = [kcat, "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q"]
    command += ["-X", "isolation.level=read_committed", "-f", "%k\t%s\n"]
    done = subprocess.run(
        command,
        capture_output=True,
        timeout=_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"kcat -C exited {done.returncode}: {done.stderr.decode()}")
    records = []
    for line in done.stdout.splitlines():
        key, _, value = line.partition(b"\t")
        records.append((key, value))
    return records
