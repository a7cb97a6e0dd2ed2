"""The gate's HTTP API as an OpenAPI 3.1 document (``schemas/openapi.json``), generated.

Callers in other languages generate clients from it. The request body, the 200 reply and
the refusals are the JSON Schema documents checked in beside it (``answer-event``,
``gate-reply``, ``gate-error``), each under ``components.schemas`` by its title with its
``$defs`` beside it and ``#/$defs/X`` written ``#/components/schemas/X`` (resolvers and
generators read references from the document's root, not from an embedded ``$id``):
resolved, the body a caller sends is exactly the schema of the answers topic. Written
and checked with the other schema files by ``streamproc schemas write|check``
(:mod:`streamproc.contracts.schema_files` passes the documents in).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final

from streamproc.contracts.gate_events import BUDGET_HEADER, GateErrorCode

__all__ = [
    "CHECK_PATH",
    "OPENAPI_FILE",
    "OPENAPI_SCHEMAS",
    "GateApiDefaults",
    "components",
    "openapi_document",
    "render_openapi",
]

OPENAPI_FILE: Final = "openapi.json"
CHECK_PATH: Final = "/v1/check"
OPENAPI_SCHEMAS: Final = {
    "AnswerEvent": "answer-event",
    "GateReply": "gate-reply",
    "GateError": "gate-error",
}
"""Component name -> the schema file (without ``.schema.json``) it is."""

_BUDGET_PARAMETER: Final = "X-Budget-Ms"
_TRACEPARENT: Final = "^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"
_REFUSALS: Final[dict[int, tuple[str, tuple[GateErrorCode, ...]]]] = {
    400: (
        "Bad input: the body is not JSON, fails the answer event's schema or the event-time "
        "bounds, or X-Budget-Ms is not a positive number.",
        ("bad_json", "schema_violation", "event_time_out_of_range", "bad_budget", "bad_request"),
    ),
    401: ("No bearer token, or one the gate does not know.", ("unauthorized",)),
    403: ("The token does not name the answer's tenant.", ("forbidden",)),
    413: (
        "The body is over the intake limit (worker.max_event_bytes); refused before it is "
        "read when Content-Length says so.",
        ("oversized",),
    ),
    415: ("The Content-Type is not application/json.", ("unsupported_media_type",)),
    429: (
        "The caller already has its share of request bodies in flight "
        "(gate.max_caller_body_bytes_in_flight): retry after Retry-After.",
        ("caller_busy",),
    ),
    503: (
        "The gate is not ready (starting or stopping), or holds all the request bodies it "
        "may (gate.max_body_bytes_in_flight): retry another replica, or after Retry-After.",
        ("not_ready", "busy"),
    ),
}
"""Status -> what it means and the :class:`GateError` codes answered with it (the HTTP
server's own table, as the caller reads it)."""


@dataclass(frozen=True, slots=True)
class GateApiDefaults:
    """What the document says of the gate's settings (the checked-in document: their
    defaults, never the environment's ``STREAMPROC_*``)."""

    host: str
    """``gate.host``."""
    port: int
    """``gate.port``."""
    default_budget_ms: float
    """``gate.default_budget_ms``."""
    max_budget_ms: float
    """``gate.max_budget_ms``."""


def render_openapi(schemas: Mapping[str, Mapping[str, Any]], gate: GateApiDefaults) -> str:
    """The document's text, exactly as checked in (see :func:`openapi_document`)."""
    return json.dumps(openapi_document(schemas, gate), indent=2, sort_keys=False) + "\n"


def openapi_document(
    schemas: Mapping[str, Mapping[str, Any]], gate: GateApiDefaults
) -> dict[str, Any]:
    """The OpenAPI 3.1 document. ``schemas``: schema file name (``answer-event``, ...) ->
    its JSON Schema document, as written to ``schemas/``; ``gate``: the server and the
    budgets it names."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "streamproc gate",
            "version": _package_version(),
            "summary": "A groundedness decision on an answer before the user reads it.",
            "description": "POST an answer event exactly as on the answers topic; get back "
            "within the budget whether to pass, trim or withhold it, and whether that was "
            "verified or the failure policy's answer (verified false, with the reason). "
            "The caller's traceparent is continued; with publishing on, the verdict and "
            "audit record are published as for any streamed answer.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "servers": [{"url": f"http://{gate.host}:{gate.port}", "description": "The defaults."}],
        "security": [{"bearer": []}],
        "paths": {
            CHECK_PATH: {"post": _check(gate.default_budget_ms, gate.max_budget_ms)},
            "/healthz": {"get": _probe("healthz", "The process is up.", {200: ("ok", "Up.")})},
            "/readyz": {
                "get": _probe(
                    "readyz",
                    "The judge is loaded and the gate takes requests.",
                    {
                        200: ("ready", "Ready."),
                        503: (
                            "not_ready",
                            "Starting or stopping, or the monitored records cannot be "
                            "published (reason broker_unavailable or outbox_full).",
                        ),
                    },
                )
            },
        },
        "components": {
            "schemas": components(schemas),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A caller token from the gate's tokens file "
                    "(gate.tokens_file, stored as sha256; `streamproc gate token` makes one). "
                    "Each token names the tenants whose answers it may check.",
                }
            },
        },
    }


def components(schemas: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``components.schemas``: each of :data:`OPENAPI_SCHEMAS` and every definition they
    use, references rewritten to point there. Two definitions of one name must agree
    (``VerdictLabel`` is in both the answer and the reply): ValueError if not."""
    found: dict[str, Any] = {}

    def add(name: str, schema: Any) -> None:
        if name in found and found[name] != schema:
            raise ValueError(f"two different schemas are named {name!r}")
        found[name] = schema

    for component, file_name in OPENAPI_SCHEMAS.items():
        document = {
            key: value for key, value in schemas[file_name].items() if key not in ("$schema", "$id")
        }
        for name, definition in document.pop("$defs", {}).items():
            add(name, _rewrite(definition))
        add(component, _rewrite(document))
    return dict(sorted(found.items()))


def _rewrite(schema: Any) -> Any:
    """``schema`` with every ``#/$defs/X`` reference written ``#/components/schemas/X``."""
    if isinstance(schema, dict):
        return {
            key: _LOCAL.sub(_COMPONENTS, value)
            if key == "$ref" and isinstance(value, str)
            else _rewrite(value)
            for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [_rewrite(item) for item in schema]
    return schema


_LOCAL: Final = re.compile(r"^#/\$defs/")
_COMPONENTS: Final = "#/components/schemas/"


def _check(default_budget_ms: float, max_budget_ms: float) -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": {
            "description": "The decision.",
            "content": {"application/json": {"schema": _ref("GateReply")}},
        },
    }
    for status, (meaning, codes) in _REFUSALS.items():
        response: dict[str, Any] = {
            "description": f"{meaning} (error: {', '.join(codes)})",
            "content": {"application/json": {"schema": _ref("GateError")}},
        }
        if status == 401:
            response["headers"] = {
                "WWW-Authenticate": {"schema": {"type": "string", "const": "Bearer"}}
            }
        responses[str(status)] = response
    responses["default"] = {
        "description": "Any other error (404, 405, 500): one line of JSON in GateError's "
        "shape, its error the HTTP status's name (not_found, internal_server_error, ...).",
        "content": {"application/json": {"schema": _OTHER_ERROR}},
    }
    return {
        "operationId": "check",
        "summary": "Decide on an answer within a latency budget.",
        "parameters": [
            {
                "name": _BUDGET_PARAMETER,
                "in": "header",
                "required": False,
                "description": f"The latency budget in milliseconds ({BUDGET_HEADER}); "
                f"default gate.default_budget_ms ({default_budget_ms:g}), larger values "
                f"cut to gate.max_budget_ms ({max_budget_ms:g}).",
                "schema": {"type": "number", "exclusiveMinimum": 0, "default": default_budget_ms},
            },
            {
                "name": "traceparent",
                "in": "header",
                "required": False,
                "description": "W3C trace context: the decision's span, verdict and records "
                "continue the caller's trace.",
                "schema": {"type": "string", "pattern": _TRACEPARENT},
            },
        ],
        "requestBody": {
            "required": True,
            "description": "An answer event exactly as on the answers topic.",
            "content": {"application/json": {"schema": _ref("AnswerEvent")}},
        },
        "responses": responses,
    }


_OTHER_ERROR: Final = {
    "type": "object",
    "properties": {"error": {"type": "string"}, "detail": {"type": "string", "maxLength": 2000}},
    "required": ["error", "detail"],
    "additionalProperties": False,
}


def _probe(name: str, summary: str, statuses: Mapping[int, tuple[str, str]]) -> dict[str, Any]:
    return {
        "operationId": name,
        "summary": summary,
        "security": [],  # probes need no token
        "responses": {
            str(status): {
                "description": description,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {"status": {"type": "string", "const": value}},
                            "required": ["status"],
                        }
                    }
                },
            }
            for status, (value, description) in statuses.items()
        },
    }


def _ref(component: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{component}"}


def _package_version() -> str:
    try:
        return version("streamproc")
    except PackageNotFoundError:
        return "0+unknown"
