"""Write the in-repo samples (``streamproc/samples/``) from the shared labelled data.

A user's fresh clone has no ``../shared``: these small files let ``streamproc eval`` and
the demo run anyway. Deterministic: the same input files give byte-identical output.

    .venv/bin/python modelwork/make_samples.py [--shared /work/shared]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a plain script, without installing the package
    sys.path.insert(0, str(ROOT))

# Imported after the path is set, for the reason above.
from streamproc.contracts.events import AnswerEvent  # noqa: E402
from streamproc.evaluate.loaders import (  # noqa: E402
    benchmark_row_to_event,
    lab_case_to_event,
)

SAMPLES = ROOT / "streamproc" / "samples"
PER_GROUP = 9  # RAGTruth rows per (task, response label): 9 x 2 x 2 = 36
AGENT_SET = ROOT / "datasets" / "agent_cases" / "agent_cases.jsonl"
# Agent cases of the calibrate split the demo opens with: both answers of each, a record
# mismatch caught and its faithful twin passed (the set's own README says how it was made).
# Their answers write no relative date ("yesterday", "on Monday"): the demo re-stamps
# every answer to the moment it runs, and these read the same at any time.
AGENT_DEMO_CASES = (
    "agent-refund-01",
    "agent-hotel_booking-12",
    "agent-payment-03",
    "agent-invoice-02",
)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _write(path: Path, events: Iterable[AnswerEvent]) -> int:
    lines = []
    for event in events:
        AnswerEvent.model_validate_json(event.model_dump_json())  # every line must validate
        lines.append(
            json.dumps(event.model_dump(mode="json", exclude_none=True), ensure_ascii=False)
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def _stable_order(row: dict[str, Any]) -> str:
    """A fixed, content-independent shuffle: no cherry-picking of easy rows."""
    return hashlib.sha256(str(row["id"]).encode()).hexdigest()


def ragtruth_selection(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """18 Summary + 18 Data2txt rows, half of each hallucinated, in a fixed order."""
    chosen: list[dict[str, Any]] = []
    for task in ("Summary", "Data2txt"):
        for label in ("hallucinated", "faithful"):
            group = [r for r in rows if r["task_type"] == task and r["response_label"] == label]
            chosen += sorted(group, key=_stable_order)[:PER_GROUP]
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared"
    )
    parser.add_argument("--out", type=Path, default=SAMPLES, help="default: streamproc/samples")
    args = parser.parse_args(argv)
    data = args.shared / "data"

    notes = json.loads((data / "seed_notes.json").read_text(encoding="utf-8"))
    seed = [lab_case_to_event(c, notes, i) for i, c in enumerate(_jsonl(data / "seed_cases.jsonl"))]
    n_seed = _write(args.out / "seed_lab.answers.jsonl", seed)

    rows = ragtruth_selection(_jsonl(data / "ragtruth_dev.jsonl"))
    n_rag = _write(
        args.out / "ragtruth.answers.jsonl",
        (benchmark_row_to_event(r, i) for i, r in enumerate(rows)),
    )
    agents = [
        AnswerEvent.model_validate(row)
        for row in _jsonl(AGENT_SET)
        if row["conversation_id"] in AGENT_DEMO_CASES
    ]
    n_agent = _write(args.out / "agent_cases.answers.jsonl", agents)
    print(
        f"wrote {n_agent} agent answers, {n_seed} seed-lab answers and {n_rag} RAGTruth "
        f"answers to {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
