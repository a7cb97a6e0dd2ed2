"""Build the labelled agent-answer set from its hand-written scenarios.

Each file ``datasets/agent_cases/scenarios/<kind>.json`` holds scenarios of one kind of
case (refunds, flights, ...): the evidence an agent saw (records, tool results - some
refused - and policy passages), the customer's question, one faithful answer and one
answer with exactly one hallucinated span. This script checks every scenario and writes
``datasets/agent_cases/agent_cases.jsonl``: one ``AnswerEvent`` per answer, with span
labels, in the shape ``streamproc eval benchmark --data`` reads. Deterministic: the same
scenarios give byte-identical output.

    .venv/bin/python modelwork/make_agent_cases.py           # check and write
    .venv/bin/python modelwork/make_agent_cases.py --check   # check only
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a plain script, without installing the package
    sys.path.insert(0, str(ROOT))

from streamproc.contracts.events import AnswerEvent  # noqa: E402

DATASET = ROOT / "datasets" / "agent_cases"
SCENARIOS = DATASET / "scenarios"
OUTPUT = DATASET / "agent_cases.jsonl"

LABEL_TYPES: Final = (
    "wrong_amount",
    "wrong_date",
    "wrong_time",
    "wrong_identifier",
    "wrong_count",
    "wrong_name",
    "state_ruled_out",
    "refused_action_reported_done",
    "claim_without_record",
)
EVIDENCE_KINDS: Final = ("record", "tool_result", "policy", "passage")
SOURCE: Final = "streamproc agent cases: written for the project (Apache-2.0)"


class ScenarioError(ValueError):
    """A scenario that cannot become labelled answers; the message says where and why."""


def _require(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise ScenarioError(f"{where}: {message}")


def _check_evidence(items: Any, where: str) -> None:
    _require(isinstance(items, list) and bool(items), where, "evidence must be a non-empty list")
    ids = [item.get("id") for item in items]
    _require(len(set(ids)) == len(ids), where, f"evidence ids repeat: {ids}")
    kinds = Counter(item.get("kind") for item in items)
    _require(set(kinds) <= set(EVIDENCE_KINDS), where, f"unknown evidence kinds {set(kinds)}")
    _require(
        kinds["record"] + kinds["tool_result"] >= 1,
        where,
        "needs at least one record or tool result",
    )
    for item in items:
        if item.get("kind") in ("record", "tool_result"):
            _require(
                isinstance(item.get("fields"), dict) and item["fields"],
                f"{where} {item.get('id')}",
                "a record or tool result needs non-empty fields",
            )


def _answer_event(
    scenario: dict[str, Any], kind: str, number: int, variant: str, answer: dict[str, Any]
) -> dict[str, Any]:
    where = f"{kind} #{number} {variant}"
    text = answer.get("answer")
    if not isinstance(text, str) or not text.strip():
        raise ScenarioError(f"{where}: answer text missing")
    spans: list[dict[str, Any]] = []
    if variant == "hallucinated":
        span = answer.get("span")
        if not isinstance(span, str) or not span.strip():
            raise ScenarioError(f"{where}: span missing")
        _require(text.count(span) == 1, where, f"span {span!r} must occur exactly once")
        label_type = answer.get("label_type")
        _require(label_type in LABEL_TYPES, where, f"label_type {label_type!r} unknown")
        verdict = answer.get("verdict")
        _require(verdict in ("contradicted", "unsupported"), where, f"verdict {verdict!r}")
        start = text.index(span)
        spans.append(
            {
                "start": start,
                "end": start + len(span),
                "text": span,
                "verdict": verdict,
                "label_type": label_type,
            }
        )
    case_id = f"agent-{kind}-{number:02d}"
    event = {
        "event_id": f"{case_id}-{variant}",
        "answer_id": f"{case_id}-{variant}",
        "conversation_id": case_id,
        "tenant": "demo",
        "assistant_id": f"casework-{kind.replace('_', '-')}-agent",
        "model": "hand-written",
        "occurred_at": scenario["occurred_at"],
        "question": scenario["question"],
        "answer": text,
        "evidence": scenario["evidence"],
        "labels": {
            "spans": spans,
            "response": "hallucinated" if spans else "faithful",
            "source": SOURCE,
        },
    }
    try:
        validated = AnswerEvent.model_validate(event)
    except ValueError as error:
        raise ScenarioError(f"{where}: not a valid AnswerEvent ({error})") from None
    return validated.model_dump(mode="json", exclude_none=True)


def build(scenario_dir: Path = SCENARIOS) -> list[dict[str, Any]]:
    """Every answer of every scenario file, in file and scenario order."""
    rows: list[dict[str, Any]] = []
    files = sorted(scenario_dir.glob("*.json"))
    if not files:
        raise ScenarioError(f"no scenario files in {scenario_dir}")
    for path in files:
        kind = path.stem
        try:
            scenarios = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise ScenarioError(f"{path.name}: not JSON ({error})") from None
        _require(isinstance(scenarios, list) and bool(scenarios), path.name, "expected a list")
        numbers = [s.get("scenario") for s in scenarios]
        _require(len(set(numbers)) == len(numbers), path.name, "scenario numbers repeat")
        for scenario in scenarios:
            number = scenario.get("scenario")
            where = f"{path.name} #{number}"
            _require(isinstance(number, int) and number >= 1, where, "scenario number")
            _require(bool(scenario.get("question")), where, "question missing")
            _require(str(scenario.get("occurred_at", "")).endswith("Z"), where, "occurred_at")
            _check_evidence(scenario.get("evidence"), where)
            for variant in ("faithful", "hallucinated"):
                answer = scenario.get(variant)
                _require(isinstance(answer, dict), where, f"{variant} answer missing")
                rows.append(_answer_event(scenario, kind, number, variant, answer))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="check only, write nothing")
    parser.add_argument("--scenarios", type=Path, default=SCENARIOS)
    args = parser.parse_args(argv)
    try:
        rows = build(args.scenarios)
    except ScenarioError as error:
        print(f"make_agent_cases: {error}", file=sys.stderr)
        return 1
    types = Counter(s["label_type"] for r in rows for s in r["labels"]["spans"])
    print(f"{len(rows)} answers; hallucinated spans by type: {dict(sorted(types.items()))}")
    if not args.check:
        lines = [json.dumps(row, ensure_ascii=False, sort_keys=True) for row in rows]
        OUTPUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
