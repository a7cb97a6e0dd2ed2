"""The topic contract as an AsyncAPI 3 document (``schemas/asyncapi.yaml``), generated.

Producers and consumers in other languages generate code from it: the streaming gate's
WebSocket (:mod:`streamproc.contracts.asyncapi_stream`) and every topic the worker
reads or writes with its default name (:class:`~streamproc.contracts.topic_names.TopicNames`,
as the command that writes it reads them from the settings) but the window loop's own
compacted state (the changelog), the message on it (payloads
are the JSON Schema files beside it, generated from the same models), its key, the
``traceparent`` header and, for what the worker reads, its consumer group. Written and
checked with the JSON Schemas by ``streamproc schemas write|check``; the file is JSON,
which is YAML too, so nothing beyond the standard library renders it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal

from streamproc.contracts.asyncapi_stream import stream_document_parts
from streamproc.contracts.gate_events import (
    BUDGET_HEADER,
    CORRELATION_ID_HEADER,
    REPLY_TOPIC_HEADER,
)
from streamproc.contracts.topic_names import TopicNames

__all__ = ["ASYNCAPI_FILE", "render_asyncapi"]

ASYNCAPI_FILE = "asyncapi.yaml"
_KAFKA_BINDING = "0.5.0"
_KAFKA_SERVER = {
    "host": "{bootstrap}",
    "protocol": "kafka",
    "description": "The Kafka cluster (STREAMPROC_BROKER_URL).",
    "variables": {"bootstrap": {"default": "127.0.0.1:9092"}},
}
_TRACEPARENT = "^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"


@dataclass(frozen=True, slots=True)
class _Channel:
    channel: str
    address: str
    message: str
    schema_file: str
    key: str
    action: Literal["receive", "send"]
    description: str
    group: str = "judge"
    """The reading loop's consumer group, ``<app_id>.<group>`` (receive only)."""
    also: tuple[tuple[str, str, str], ...] = ()
    """More messages on the same topic: (message, schema file, key)."""
    who: str = "worker"
    """Who reads or writes it, for the operation's summary."""


def _topics(names: TopicNames) -> list[_Channel]:
    return [
        _Channel(
            "answers",
            names.answers,
            "AnswerEvent",
            "answer-event",
            "conversation_id",
            "receive",
            "Answers as the assistant gave them, with the evidence it was given.",
        ),
        _Channel(
            "verdicts",
            names.verdicts,
            "Verdict",
            "verdict",
            "answer_id",
            "send",
            "One verdict per answer: every claim, its status and the sentence that decided it.",
        ),
        _Channel(
            "flags",
            names.flags,
            "Flag",
            "flag",
            "answer_id",
            "send",
            "Answers that need action (hallucinated, or abstained from).",
        ),
        _Channel(
            "aggregates",
            names.aggregates,
            "WindowAggregate",
            "window-aggregate",
            "assistant_id",
            "send",
            "Tumbling-window hallucination rates per tenant, "
            "assistant and model; a late answer revises a window (revision + 1).",
        ),
        _Channel(
            "hoppingAggregates",
            names.hopping,
            "WindowAggregate",
            "window-aggregate",
            "assistant_id",
            "send",
            "Hopping-window rates (window: 5m, 1h).",
        ),
        _Channel(
            "deadLetter",
            names.dead_letter,
            "DeadLetter",
            "dead-letter",
            "the original key",
            "send",
            "Input that could not be judged: the reason and the original bytes.",
        ),
        _Channel(
            "alerts",
            names.alerts,
            "AlertEvent",
            "alert-event",
            "tenant/assistant_id",
            "send",
            "Hallucination-rate alerts, firing and resolved; judge_drift alerts (ticket) "
            "when the judge's live accuracy falls.",
            also=(("JudgeDriftAlert", "judge-drift-alert", "tenant/assistant_id"),),
        ),
        _Channel(
            "audit",
            names.audit,
            "AuditRecord",
            "audit-record",
            "tenant/answer_id",
            "send",
            "One record per judged answer, as an auditor replays it: the event's exact bytes "
            "and sha256, every claim and the sentence that decided it, the judge, its models "
            "and the settings applied (the audit sink stores these). Accepted reviewer "
            "labels join the same hash chain.",
            also=(("LabelAuditEntry", "label-audit-entry", "label:<answer_id>:<label_id>"),),
        ),
        _Channel(
            "lateEvents",
            names.late,
            "AnswerOutcome",
            "answer-outcome",
            "assistant_id",
            "send",
            "Outcomes of answers too late for any window, kept for a replay or a correction.",
        ),
        _Channel(
            "outcomes",
            names.outcomes,
            "AnswerOutcome",
            "answer-outcome",
            "assistant_id",
            "send",
            "Internal: one outcome per judged answer, written by the judging loop and read "
            "by the window loop (group <app_id>.windows).",
        ),
        *_review_topics(names),
        *_gate_topics(names),
    ]


def _review_topics(names: TopicNames) -> list[_Channel]:
    """The reviewers' loop: items out to people, their labels in, the judge's live
    accuracy out."""
    return [
        _Channel(
            "reviewQueue",
            names.review_queue,
            "ReviewItem",
            "review-item",
            "answer_id",
            "send",
            "Answers for people to review: every flagged answer and a seeded sample of "
            "passed ones, each with why it was sampled and its inclusion probability. Read "
            "by the review page (group <app_id>.review-page) and the labels loop.",
        ),
        _Channel(
            "labels",
            names.labels,
            "LabelEvent",
            "label-event",
            "answer_id",
            "receive",
            "Reviewers' labels of answers and their claims (the review page, "
            "'streamproc review import', or any producer); several reviewers per answer.",
            group="labels",
        ),
        _Channel(
            "judgeAccuracy",
            names.judge_accuracy,
            "JudgeAccuracyEvent",
            "judge-accuracy-event",
            "tenant/assistant_id/task_type/judge_key",
            "send",
            "Compacted: the judge measured against reviewers per cell - weighted "
            "TP/FP/FN/TN, sensitivity, specificity and precision with intervals, claim "
            "agreement, Cohen's kappa, drift findings. The latest per key is the truth.",
        ),
    ]


def _gate_topics(names: TopicNames) -> list[_Channel]:
    """The gate's Kafka request / reply (``streamproc gate``): requests in, each reply to
    the topic its request's ``reply-topic`` header names (the operation's ``reply``)."""
    return [
        _Channel(
            "gateRequests",
            names.gate_requests,
            "GateRequest",
            "answer-event",
            "any (the client uses the correlation id)",
            "receive",
            "Answers to decide on before the user reads them: the answer event exactly as "
            f"on the answers topic, with the {REPLY_TOPIC_HEADER}, {CORRELATION_ID_HEADER} "
            f"and {BUDGET_HEADER} headers. A request the gate cannot take is a dead letter; "
            "one with a reply route also gets a GateError reply.",
            group="gate",
            who="gate",
        ),
        _Channel(
            "gateReplies",
            names.gate_replies,
            "GateReply",
            "gate-reply",
            "the request's correlation id",
            "send",
            "The gate's decisions, on the topic each request's reply-topic header names "
            "(this default one, or the caller's own), in the same transaction as the "
            "answer's verdict (STREAMPROC_GATE__KAFKA_REPLY=immediate: as soon as decided, "
            "before the verdict's transaction): read them read_committed. A caller with no "
            "reply within its budget decides by its own failure policy "
            "(streamproc.gate.client); a second reply to the same correlation id (the "
            "request decided again after a gate failed) is dropped.",
            also=(("GateError", "gate-error", "the request's correlation id"),),
            who="gate",
        ),
    ]


_PAYLOAD_OF = {"GateRequest": "AnswerEvent"}
"""A message whose payload is another message's model (its schema's title)."""
_CORRELATION_ID = {
    "type": "string",
    "maxLength": 255,
    "description": "The caller's id of the request (a uuid4): the reply carries the same.",
}
_HEADERS: dict[str, dict[str, Any]] = {
    "GateRequest": {
        REPLY_TOPIC_HEADER: {
            "type": "string",
            "pattern": "^[A-Za-z0-9._-]{1,249}$",
            "description": "The topic the reply goes to (it must exist; not an internal one).",
        },
        CORRELATION_ID_HEADER: _CORRELATION_ID,
        BUDGET_HEADER: {
            "type": "string",
            "pattern": "^[0-9]+(\\.[0-9]+)?$",
            "description": "The latency budget in milliseconds, counted from the record's "
            "timestamp (default gate.default_budget_ms; cut to gate.max_budget_ms).",
        },
    },
    "GateReply": {CORRELATION_ID_HEADER: _CORRELATION_ID},
    "GateError": {CORRELATION_ID_HEADER: _CORRELATION_ID},
}
_REQUIRED = {
    "GateRequest": [REPLY_TOPIC_HEADER, CORRELATION_ID_HEADER],
    "GateReply": [CORRELATION_ID_HEADER],
    "GateError": [CORRELATION_ID_HEADER],
}


def render_asyncapi(names: TopicNames) -> str:
    """The document's text for the topics ``names`` names (as checked in: the settings'
    defaults, never the environment's ``STREAMPROC_*``)."""
    topics = _topics(names)
    document: dict[str, Any] = {
        "asyncapi": "3.0.0",
        "info": {
            "title": "streamproc",
            "version": _package_version(),
            "description": "A streaming groundedness monitor: answers in, verdicts, flags, "
            "window aggregates, alerts and dead letters out. Payloads are JSON; every record "
            "written for an answer carries a W3C traceparent naming the answer's span.",
            "license": {"name": "Apache-2.0"},
        },
        "defaultContentType": "application/json",
        "channels": {
            t.channel: {
                "address": t.address,
                "description": t.description,
                "messages": {
                    name: {"$ref": f"#/components/messages/{name}"}
                    for name in (t.message, *(extra[0] for extra in t.also))
                },
            }
            for t in topics
        },
        "operations": {
            f"{t.action}{t.channel[0].upper()}{t.channel[1:]}": _operation(t, names.group(t.group))
            for t in topics
        },
        "components": {"messages": _messages(topics)},
    }
    stream = stream_document_parts()
    document["servers"] = {"kafka": _KAFKA_SERVER, **stream["servers"]}
    for channel in document["channels"].values():
        channel["servers"] = [{"$ref": "#/servers/kafka"}]
    document["channels"].update(stream["channels"])
    document["operations"].update(stream["operations"])
    document["components"]["messages"].update(stream["messages"])
    header = (
        "# Generated by `streamproc schemas write` from the settings and models; do not edit.\n"
    )
    return header + json.dumps(document, indent=2, sort_keys=False) + "\n"


def _operation(topic: _Channel, group: str) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "action": topic.action,
        "channel": {"$ref": f"#/channels/{topic.channel}"},
        "summary": f"The {topic.who} {'reads' if topic.action == 'receive' else 'writes'} "
        + topic.address,
    }
    if topic.channel == "gateRequests":
        operation["reply"] = {
            "address": {
                "location": f"$message.header#/{REPLY_TOPIC_HEADER}",
                "description": "The request's reply-topic header.",
            },
            "channel": {"$ref": "#/channels/gateReplies"},
            "messages": [
                {"$ref": f"#/channels/gateReplies/messages/{name}"}
                for name in ("GateReply", "GateError")
            ],
        }
    if topic.action == "receive":
        operation["bindings"] = {
            "kafka": {
                "groupId": {"type": "string", "enum": [group]},
                "bindingVersion": _KAFKA_BINDING,
            }
        }
    return operation


def _messages(topics: list[_Channel]) -> dict[str, Any]:
    messages: dict[str, Any] = {}
    for topic in topics:
        for name, schema_file, key in ((topic.message, topic.schema_file, topic.key), *topic.also):
            messages[name] = _message(name, schema_file, key)
    return messages


def _message(name: str, schema_file: str, key: str) -> dict[str, Any]:
    headers: dict[str, Any] = {
        "type": "object",
        "properties": {
            "traceparent": {
                "type": "string",
                "pattern": _TRACEPARENT,
                "description": "W3C trace context; optional on answers (the verdict "
                "then continues the producer's trace), always set on outputs.",
            },
            **_HEADERS.get(name, {}),
        },
    }
    if name in _REQUIRED:
        headers["required"] = _REQUIRED[name]
    message: dict[str, Any] = {
        "name": name,
        "contentType": "application/json",
        "payload": {"$ref": f"{schema_file}.schema.json"},
        "headers": headers,
        "bindings": {
            "kafka": {
                "key": {"type": "string", "description": f"The record key: {key}."},
                "bindingVersion": _KAFKA_BINDING,
            }
        },
    }
    if name in _PAYLOAD_OF:
        message["title"] = f"{_PAYLOAD_OF[name]} as a gate request"
    if CORRELATION_ID_HEADER in _HEADERS.get(name, {}):
        message["correlationId"] = {"location": f"$message.header#/{CORRELATION_ID_HEADER}"}
    return message


def _package_version() -> str:
    try:
        return version("streamproc")
    except PackageNotFoundError:
        return "0+unknown"
