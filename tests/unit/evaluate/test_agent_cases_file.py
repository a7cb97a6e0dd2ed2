"""The agent set's JSONL is what its hand-written scenarios build, and its shape is the
one the dataset's README promises: two answers a case, at least 12 kinds of case, half
faithful, one labelled span on each hallucinated answer."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from modelwork.make_agent_cases import ScenarioError, build

REPO = Path(__file__).resolve().parents[3]
DATASET = REPO / "datasets" / "agent_cases"


def _rows() -> list[dict[str, object]]:
    lines = (DATASET / "agent_cases.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_the_jsonl_is_what_the_scenarios_build() -> None:
    built = [json.dumps(row, ensure_ascii=False, sort_keys=True) for row in build()]
    written = (DATASET / "agent_cases.jsonl").read_text(encoding="utf-8").splitlines()
    assert built == written, "run modelwork/make_agent_cases.py after editing a scenario"


def test_the_set_has_the_shape_its_readme_promises() -> None:
    rows = _rows()
    responses = Counter(row["labels"]["response"] for row in rows)  # type: ignore[index]
    kinds = {str(row["conversation_id"]).split("-")[1] for row in rows}
    assert len(rows) >= 240 and len(kinds) >= 12
    assert responses["faithful"] == responses["hallucinated"] == len(rows) // 2
    for row in rows:
        spans = row["labels"]["spans"]  # type: ignore[index]
        assert len(spans) == (1 if row["labels"]["response"] == "hallucinated" else 0)  # type: ignore[index]
    readme = (DATASET / "README.md").read_text(encoding="utf-8")
    assert f"{len(rows):,} answers" in readme


def test_a_span_that_is_not_in_its_answer_is_refused(tmp_path: Path) -> None:
    scenario = json.loads((DATASET / "scenarios" / "refund.json").read_text(encoding="utf-8"))[0]
    scenario["hallucinated"]["span"] = "a span this answer never writes"
    (tmp_path / "refund.json").write_text(json.dumps([scenario]), encoding="utf-8")
    with pytest.raises(ScenarioError, match="must occur exactly once"):
        build(tmp_path)
