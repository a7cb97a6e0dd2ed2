"""The checked-in JSON Schemas match the models, and the examples validate against both."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from streamproc.config import Settings
from streamproc.contracts.schema_files import SCHEMA_MODELS, drifted_schemas, render_schemas
from streamproc.wiring import gate_api_defaults, topic_names

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"
NAMES = topic_names(Settings.model_construct())
GATE = gate_api_defaults(Settings.model_construct())


def test_checked_in_schemas_match_the_models() -> None:
    assert drifted_schemas(SCHEMAS, NAMES, GATE) == [], "run: streamproc schemas write"


def test_drift_is_detected(tmp_path: Path) -> None:
    for name, text in render_schemas(NAMES, GATE).items():
        (tmp_path / name).write_text(text)
    target = tmp_path / "verdict.schema.json"
    target.write_text(target.read_text().replace('"judgement"', '"judgment"'))
    assert drifted_schemas(tmp_path, NAMES, GATE) == ["verdict.schema.json"]


@pytest.mark.parametrize("name", sorted(SCHEMA_MODELS))
def test_example_validates_against_schema_and_model(name: str) -> None:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    example = json.loads((SCHEMAS / "examples" / f"{name}.json").read_text())
    jsonschema.validate(example, schema, cls=jsonschema.Draft202012Validator)
    SCHEMA_MODELS[name].model_validate(example)


def test_schema_rejects_an_answer_event_without_event_time() -> None:
    schema = json.loads((SCHEMAS / "answer-event.schema.json").read_text())
    example = json.loads((SCHEMAS / "examples" / "answer-event.json").read_text())
    del example["occurred_at"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(example, schema, cls=jsonschema.Draft202012Validator)


def test_schemas_check_reads_the_repositorys_folder_by_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from streamproc.cli.main import main

    assert main(["schemas", "check"]) == 0
    assert str(SCHEMAS) in capsys.readouterr().out
