"""The schema examples are what the default judge makes of the documented answer."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.slow  # loads the default judge's models

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_schema_examples", ROOT / "scripts" / "make_schema_examples.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_checked_in_examples_are_the_default_judges() -> None:
    script = _script()
    for name, model in script.examples().items():
        path = ROOT / "schemas" / "examples" / f"{name}.json"
        assert path.read_text() == script.rendered(name, model), (
            f"{path.name} is stale: run scripts/make_schema_examples.py"
        )


def test_the_example_answer_is_trimmed_for_the_wrong_count() -> None:
    verdict = json.loads((ROOT / "schemas" / "examples" / "verdict.json").read_text())
    judgement = verdict["judgement"]
    assert judgement["action"] in ("trim", "withhold")
    first = judgement["claims"][0]
    assert "80" in first["text"] and first["verdict"] == "contradicted"
    assert first["reasons"][0].startswith("COUNT_MISMATCH: claim says 80")
    reply = json.loads((ROOT / "schemas" / "examples" / "gate-reply.json").read_text())
    assert reply["decision"] == judgement["action"]
    assert "80" not in reply["answer_text"]
