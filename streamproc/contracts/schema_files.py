"""JSON Schema files in ``schemas/``, generated from the pydantic event models, and the
AsyncAPI document that names the topics they travel on (:mod:`streamproc.contracts.asyncapi`), and
the OpenAPI document of the gate's HTTP API that embeds some of them
(:mod:`streamproc.contracts.openapi`).

The models are the source of truth; the files are for people and for producers in other
languages. ``streamproc schemas write`` regenerates them, ``streamproc schemas check``
(and a unit test) fails when they drift. The topic names and the gate's defaults the
AsyncAPI and OpenAPI documents show are passed in (the settings' defaults, read by the
command).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode

from streamproc.contracts.alert_events import AlertEvent
from streamproc.contracts.asyncapi import ASYNCAPI_FILE, render_asyncapi
from streamproc.contracts.audit_record import AuditRecord
from streamproc.contracts.events import (
    AnswerEvent,
    AnswerOutcome,
    DeadLetter,
    Flag,
    Verdict,
    WindowAggregate,
)
from streamproc.contracts.gate_events import GateError, GateReply
from streamproc.contracts.gate_stream_events import (
    StreamDelta,
    StreamEnd,
    StreamError,
    StreamFinal,
    StreamSentence,
    StreamStart,
)
from streamproc.contracts.label_events import (
    JudgeAccuracyEvent,
    JudgeDriftAlert,
    LabelAuditEntry,
    LabelDelta,
    LabelEvent,
    ReviewItem,
)
from streamproc.contracts.openapi import OPENAPI_FILE, GateApiDefaults, render_openapi
from streamproc.contracts.topic_names import TopicNames

__all__ = ["SCHEMA_MODELS", "drifted_schemas", "render_schemas", "write_schemas"]

SCHEMA_MODELS: dict[str, type[BaseModel]] = {
    "answer-event": AnswerEvent,  # input: described as producers must write it
    "verdict": Verdict,
    "flag": Flag,
    "window-aggregate": WindowAggregate,
    "dead-letter": DeadLetter,
    "alert-event": AlertEvent,  # the alerts topic: firing / resolved
    "audit-record": AuditRecord,  # the audit topic: one answer, as an auditor replays it
    "answer-outcome": AnswerOutcome,  # the outcomes (internal) and late-events topics
    "review-item": ReviewItem,  # the review queue
    "label-event": LabelEvent,  # input: reviewers' labels, as producers must write them
    "label-audit-entry": LabelAuditEntry,  # accepted labels, on the audit topic
    "label-delta": LabelDelta,  # internal: the labels loop to the accuracy loop
    "judge-accuracy-event": JudgeAccuracyEvent,  # the judge's live accuracy per cell
    "judge-drift-alert": JudgeDriftAlert,  # on the alerts topic
    "gate-reply": GateReply,  # the gate's decision: HTTP 200 body, Kafka reply value
    "gate-error": GateError,  # the gate's refusal: HTTP 4xx/503 body, Kafka reply value
    "gate-stream-start": StreamStart,  # the streaming gate's WebSocket, client to gate
    "gate-stream-delta": StreamDelta,
    "gate-stream-end": StreamEnd,
    "gate-stream-sentence": StreamSentence,  # gate to client
    "gate-stream-final": StreamFinal,
    "gate-stream-error": StreamError,
}

_INPUTS = (AnswerEvent, LabelEvent, StreamStart, StreamDelta, StreamEnd)
"""Described as their writers must write them (validation mode); the rest as written."""
_BASE_ID = "https://streamproc.invalid/schemas/"


def render_schemas(names: TopicNames, gate: GateApiDefaults) -> dict[str, str]:
    """File name -> schema text, exactly as checked in: the AsyncAPI document names the
    topics ``names``, the OpenAPI document the gate's server and budgets ``gate``."""
    rendered: dict[str, str] = {}
    documents: dict[str, dict[str, Any]] = {}
    for name, model in SCHEMA_MODELS.items():
        mode: JsonSchemaMode = "validation" if model in _INPUTS else "serialization"
        schema = model.model_json_schema(mode=mode)
        document = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"{_BASE_ID}{name}.schema.json",
            **schema,
        }
        documents[name] = document
        rendered[f"{name}.schema.json"] = json.dumps(document, indent=2, sort_keys=True) + "\n"
    rendered[ASYNCAPI_FILE] = render_asyncapi(names)
    # The gate's HTTP API is made of the very documents written above.
    rendered[OPENAPI_FILE] = render_openapi(documents, gate)
    return rendered


def write_schemas(directory: Path, names: TopicNames, gate: GateApiDefaults) -> list[Path]:
    """Write every schema file; return the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, text in render_schemas(names, gate).items():
        path = directory / file_name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def drifted_schemas(directory: Path, names: TopicNames, gate: GateApiDefaults) -> list[str]:
    """Names of schema files that are missing or differ from the models."""
    return [
        file_name
        for file_name, text in render_schemas(names, gate).items()
        if not (directory / file_name).is_file()
        or (directory / file_name).read_text(encoding="utf-8") != text
    ]
