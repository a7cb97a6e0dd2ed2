"""The streaming gate's WebSocket (``GET /v1/stream``) in the AsyncAPI document.

One channel on a ``ws`` server: the gate receives ``start``, ``delta`` and ``end`` and
sends ``sentence``, ``final`` and ``error``; the payloads are the gate-stream schema files
(:mod:`streamproc.contracts.gate_stream_events`).
"""

from __future__ import annotations

from typing import Any

from streamproc.contracts.gate_stream_events import (
    STREAM_CLOSE_CODES,
    STREAM_ENDED_IDLE,
    STREAM_ENDED_TOO_LONG,
    STREAM_PATH,
)

__all__ = ["STREAM_MESSAGES", "stream_document_parts"]

STREAM_MESSAGES: dict[str, tuple[str, str]] = {
    "StreamStart": ("gate-stream-start", "The first message: the answer event and the budget."),
    "StreamDelta": ("gate-stream-delta", "The answer's next piece, down to one character."),
    "StreamEnd": ("gate-stream-end", "The answer is whole."),
    "StreamSentence": (
        "gate-stream-sentence",
        "One sentence, as soon as it is complete and checked: release or hold.",
    ),
    "StreamFinal": (
        "gate-stream-final",
        "The whole answer's decision, as /v1/check replies it; the answer is monitored once.",
    ),
    "StreamError": ("gate-stream-error", "A refusal; the close follows."),
}
"""Message name -> (schema file, summary)."""
_RECEIVED = ("StreamStart", "StreamDelta", "StreamEnd")
_SENT = ("StreamSentence", "StreamFinal", "StreamError")


def stream_document_parts() -> dict[str, dict[str, Any]]:
    """The server, channel, operations and messages the WebSocket adds to the document."""
    closes = ", ".join(f"{code} {number}" for code, number in STREAM_CLOSE_CODES.items())
    channel = {
        "address": STREAM_PATH,
        "servers": [{"$ref": "#/servers/gate"}],
        "description": "One connection per answer: start, deltas, end in; a sentence message "
        "per sentence as soon as it is checked, then the final, out. Close codes after an "
        f"error: {closes}; 1000 after a final; {STREAM_ENDED_IDLE} when nothing arrived for "
        f"gate.stream_idle_s and {STREAM_ENDED_TOO_LONG} after gate.stream_max_s (each after "
        "the final with the answer so far).",
        "messages": {name: {"$ref": f"#/components/messages/{name}"} for name in STREAM_MESSAGES},
        "bindings": {
            "ws": {
                "method": "GET",
                "headers": {
                    "type": "object",
                    "properties": {
                        "Authorization": {
                            "type": "string",
                            "description": "Bearer <token>: a caller of the gate's tokens "
                            "file, naming the answer's tenant.",
                        },
                        "traceparent": {
                            "type": "string",
                            "description": "W3C trace context: the answer's span continues it.",
                        },
                    },
                    "required": ["Authorization"],
                },
                "bindingVersion": "0.1.0",
            }
        },
    }
    return {
        "servers": {
            "gate": {
                "host": "{host}:{port}",
                "protocol": "ws",
                "description": "The gate's HTTP server (gate.host, gate.port; wss with TLS).",
                "variables": {"host": {"default": "127.0.0.1"}, "port": {"default": "8790"}},
            }
        },
        "channels": {"gateStream": channel},
        "operations": {
            "receiveGateStream": _operation("receive", _RECEIVED, "reads an answer as it streams"),
            "sendGateStream": _operation("send", _SENT, "writes each sentence's decision"),
        },
        "messages": {
            name: {
                "name": name,
                "summary": summary,
                "contentType": "application/json",
                "payload": {"$ref": f"{schema_file}.schema.json"},
            }
            for name, (schema_file, summary) in STREAM_MESSAGES.items()
        },
    }


def _operation(action: str, names: tuple[str, ...], what: str) -> dict[str, Any]:
    return {
        "action": action,
        "channel": {"$ref": "#/channels/gateStream"},
        "summary": f"The gate {what} ({STREAM_PATH})",
        "messages": [{"$ref": f"#/channels/gateStream/messages/{name}"} for name in names],
    }
