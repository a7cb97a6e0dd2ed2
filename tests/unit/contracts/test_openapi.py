"""The gate's OpenAPI 3.1 document: valid, checked in as generated, its request body the
answers topic's schema, its replies the schemas real replies and refusals meet."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, get_args

import jsonschema
import pytest
import yaml
from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from streamproc.config import Settings
from streamproc.contracts.gate_events import GateError, GateErrorCode, GateReply
from streamproc.contracts.openapi import CHECK_PATH, OPENAPI_FILE, components
from streamproc.contracts.schema_files import render_schemas
from streamproc.gate.http.server import CHECK_PATH as SERVED_PATH
from streamproc.inference.options import JudgeSettings
from streamproc.wiring import build_judge, gate_api_defaults, gate_service, topic_names
from tests.unit.gate.conftest import event, request, settings

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"
REFUSALS = ("400", "401", "403", "413", "415", "429", "503")


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return dict(json.loads((SCHEMAS / OPENAPI_FILE).read_text(encoding="utf-8")))


def check(document: dict[str, Any]) -> dict[str, Any]:
    return dict(document["paths"][CHECK_PATH]["post"])


def inline(schema: Any, definitions: dict[str, Any], prefix: str) -> Any:
    """``schema`` with every ``prefix + name`` reference replaced by the definition."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(prefix):
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return {**inline(definitions[ref.removeprefix(prefix)], definitions, prefix), **rest}
        return {k: inline(v, definitions, prefix) for k, v in schema.items()}
    if isinstance(schema, list):
        return [inline(item, definitions, prefix) for item in schema]
    return schema


def validator(document: dict[str, Any], component: str) -> jsonschema.Draft202012Validator:
    """Validates against ``component`` as the document defines it, references and all."""
    resource = Resource.from_contents(document, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource("urn:gate-openapi", resource)
    schema = {"$ref": f"urn:gate-openapi#/components/schemas/{component}"}
    return jsonschema.Draft202012Validator(schema, registry=registry)


def test_the_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    assert document["openapi"] == "3.1.0"
    validate(document)


def test_the_validator_would_catch_a_broken_document(document: dict[str, Any]) -> None:
    broken = json.loads(json.dumps(document))
    del broken["paths"][CHECK_PATH]["post"]["responses"]["200"]["description"]
    with pytest.raises(OpenAPIValidationError):
        validate(broken)


def test_the_checked_in_file_is_the_generated_one() -> None:
    defaults = Settings.model_construct()
    generated = render_schemas(topic_names(defaults), gate_api_defaults(defaults))[OPENAPI_FILE]
    assert (SCHEMAS / OPENAPI_FILE).read_text(encoding="utf-8") == generated, (
        "run: streamproc schemas write"
    )


def test_the_request_body_is_the_answers_topics_schema(document: dict[str, Any]) -> None:
    asyncapi = yaml.safe_load((SCHEMAS / "asyncapi.yaml").read_text(encoding="utf-8"))
    payload_file = asyncapi["components"]["messages"]["AnswerEvent"]["payload"]["$ref"]
    topic_schema = json.loads((SCHEMAS / payload_file).read_text(encoding="utf-8"))
    body = check(document)["requestBody"]
    assert body["required"] is True
    request_schema = body["content"]["application/json"]["schema"]

    from_openapi = inline(
        request_schema, document["components"]["schemas"], "#/components/schemas/"
    )
    from_topic = inline(
        {k: v for k, v in topic_schema.items() if k not in ("$schema", "$id", "$defs")},
        topic_schema["$defs"],
        "#/$defs/",
    )
    assert from_openapi == from_topic
    assert from_openapi["title"] == "AnswerEvent"


async def test_a_real_reply_meets_the_200_schema(document: dict[str, Any]) -> None:
    service = gate_service(settings(publish=False), build_judge(JudgeSettings(name="rules")))
    await service.start()
    try:
        result = await service.check(request(event("Incomplete orders cannot be delivered.")))
    finally:
        await service.close()
    (ok,) = check(document)["responses"]["200"]["content"].values()
    assert ok["schema"] == {"$ref": "#/components/schemas/GateReply"}
    replies = validator(document, "GateReply")
    dump = result.reply.model_dump(mode="json")
    replies.validate(dump)
    GateReply.model_validate(dump)
    assert not replies.is_valid({**dump, "decision": "maybe"})
    assert not replies.is_valid({k: v for k, v in dump.items() if k != "verdict"})


def test_every_refusal_is_a_gate_error_and_every_code_has_its_status(
    document: dict[str, Any],
) -> None:
    responses = check(document)["responses"]
    assert set(responses) == {"200", *REFUSALS, "default"}
    errors = validator(document, "GateError")
    for status in REFUSALS:
        (content,) = responses[status]["content"].values()
        assert content["schema"] == {"$ref": "#/components/schemas/GateError"}
    codes = [re.search(r"\(error: ([a-z_, ]+)\)", responses[s]["description"]) for s in REFUSALS]
    documented = [code for found in codes if found for code in found.group(1).split(", ")]
    assert sorted(documented) == sorted(get_args(GateErrorCode))  # each once
    errors.validate(GateError(error="forbidden", detail="not your tenant").model_dump(mode="json"))
    assert not errors.is_valid({"error": "teapot", "detail": "x"})
    assert "WWW-Authenticate" in responses["401"]["headers"]


def test_budget_header_bearer_security_and_open_probes(document: dict[str, Any]) -> None:
    operation = check(document)
    assert CHECK_PATH == SERVED_PATH
    (budget,) = [p for p in operation["parameters"] if p["name"] == "X-Budget-Ms"]
    assert budget["in"] == "header" and budget["required"] is False
    assert budget["schema"]["default"] == 500.0
    bearer = document["components"]["securitySchemes"]["bearer"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")
    assert document["security"] == [{"bearer": []}]
    assert "security" not in operation  # the document's: a bearer token
    assert set(document["paths"]) == {CHECK_PATH, "/healthz", "/readyz"}
    for probe in ("/healthz", "/readyz"):
        assert document["paths"][probe]["get"]["security"] == []
    assert set(document["paths"]["/readyz"]["get"]["responses"]) == {"200", "503"}


def test_two_different_definitions_of_one_name_are_refused() -> None:
    enum = {"$defs": {"Kind": {"enum": ["a"]}}, "title": "X"}
    other = {"$defs": {"Kind": {"enum": ["b"]}}, "title": "Y"}
    with pytest.raises(ValueError, match="'Kind'"):
        components({"answer-event": enum, "gate-reply": other, "gate-error": {}})
