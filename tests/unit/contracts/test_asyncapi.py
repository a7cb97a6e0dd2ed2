"""schemas/asyncapi.yaml: a valid AsyncAPI 3.0.0 document (against the specification's
own JSON Schema), generated from the settings and models so it cannot drift (the schema
files' drift test covers it), naming topics the worker really creates, with payloads that
are the checked-in JSON Schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from streamproc.cli.main import main
from streamproc.config import Settings
from streamproc.contracts.asyncapi import ASYNCAPI_FILE, render_asyncapi
from streamproc.contracts.gate_stream_events import (
    STREAM_PATH,
    StreamDelta,
    StreamEnd,
    StreamError,
    StreamFinal,
    StreamSentence,
    StreamStart,
)
from streamproc.contracts.topic_names import TopicNames
from streamproc.kafka.topics import topic_specs
from streamproc.wiring import topic_layout, topic_names

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"
SPEC = Path(__file__).resolve().parent / "vendor" / "asyncapi-3.0.0-without-$id.json"

# Created by the worker, not in the contract: the window loop's own compacted state.
NOT_IN_CONTRACT = {
    "streamproc.window-state-changelog",
    "streamproc.labels-state-changelog",
    "streamproc.accuracy-state-changelog",
    "streamproc.judge-dedup-changelog",  # the judging loop's (tenant, event_id) marks
    "streamproc.label-deltas",  # internal, between the labels and the accuracy loop
}

# Messages whose payload is another message's model: a gate request is an answer event.
PAYLOAD_OF = {"GateRequest": "AnswerEvent"}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((SCHEMAS / ASYNCAPI_FILE).read_text())
    return loaded


def test_the_document_is_valid_asyncapi_3(document: dict[str, Any]) -> None:
    spec = json.loads(SPEC.read_text())
    jsonschema.Draft7Validator(spec).validate(document)
    assert document["asyncapi"] == "3.0.0"


def test_an_invalid_document_is_caught(document: dict[str, Any]) -> None:
    spec = jsonschema.Draft7Validator(json.loads(SPEC.read_text()))
    broken = json.loads(json.dumps(document))
    broken["operations"]["receiveAnswers"]["action"] = "consume"  # AsyncAPI 2 wording
    assert not spec.is_valid(broken)


def test_channels_are_the_topics_the_worker_creates(document: dict[str, Any]) -> None:
    created = {spec.name for spec in topic_specs(topic_layout(Settings.model_construct()))}
    addresses = {
        channel["address"]
        for channel in document["channels"].values()
        if channel["servers"] == [{"$ref": "#/servers/kafka"}]
    }
    assert addresses == created - NOT_IN_CONTRACT


def test_the_streaming_gate_is_a_websocket_channel_with_every_message(
    document: dict[str, Any],
) -> None:
    channel = document["channels"]["gateStream"]
    assert channel["address"] == STREAM_PATH
    assert document["servers"]["gate"]["protocol"] == "ws"
    assert set(channel["messages"]) == {
        model.__name__
        for model in (StreamStart, StreamDelta, StreamEnd, StreamSentence, StreamFinal, StreamError)
    }
    received = document["operations"]["receiveGateStream"]["messages"]
    assert [m["$ref"].rsplit("/", 1)[1] for m in received] == [
        "StreamStart",
        "StreamDelta",
        "StreamEnd",
    ]


def test_payloads_are_the_checked_in_schemas_and_the_group_is_the_workers(
    document: dict[str, Any],
) -> None:
    for name, message in document["components"]["messages"].items():
        payload = SCHEMAS / message["payload"]["$ref"]
        assert payload.is_file(), name
        assert json.loads(payload.read_text())["title"] == PAYLOAD_OF.get(name, name)
    [group] = document["operations"]["receiveAnswers"]["bindings"]["kafka"]["groupId"]["enum"]
    assert group == f"{Settings.model_construct().app_id}.judge"


def test_the_names_are_the_settings_defaults() -> None:
    """The contract's defaults (what the judging stage uses when told no topics) are the
    settings' own."""
    assert topic_names(Settings.model_construct()) == topic_names(Settings()) == TopicNames()
    assert render_asyncapi(TopicNames()) == (SCHEMAS / ASYNCAPI_FILE).read_text()


def test_the_environment_does_not_leak_into_the_contract(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STREAMPROC_TOPICS__ANSWERS", "somebody.elses")
    assert main(["schemas", "write", "--output", str(tmp_path)]) == 0
    assert (tmp_path / ASYNCAPI_FILE).read_text() == (SCHEMAS / ASYNCAPI_FILE).read_text()
