"""W3C trace context over Kafka record headers.

Extraction and injection go through the configured propagator
(``opentelemetry.propagate``: tracecontext and baggage unless ``OTEL_PROPAGATORS`` says
otherwise) with a getter and setter over aiokafka's ``[(name, bytes), ...]`` headers.
:func:`passthrough` is the telemetry-off path: it reads ``traceparent`` by the
propagator's own rules without building any context, and hands the headers on as they
came.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import Span

__all__ = [
    "Headers",
    "KafkaHeadersGetter",
    "KafkaHeadersSetter",
    "OutHeaders",
    "extract",
    "inject",
    "passthrough",
    "traceparent_headers",
]

Headers = Sequence[tuple[str, bytes | None]]
"""Kafka record headers as aiokafka gives them (the value may be None)."""
OutHeaders = tuple[tuple[str, bytes], ...]
"""Headers to send (``OutboundRecord.headers``)."""


class KafkaHeadersGetter(Getter[Headers]):
    """Reads propagation fields from Kafka headers; names compare case-insensitively and
    values decode as latin-1 (never fails: a garbled header just does not parse)."""

    def get(self, carrier: Headers, key: str) -> list[str] | None:
        wanted = key.lower()
        values = [
            value.decode("latin-1")
            for name, value in carrier
            if value is not None and name.lower() == wanted
        ]
        return values or None

    def keys(self, carrier: Headers) -> list[str]:
        return [name for name, _ in carrier]


class KafkaHeadersSetter(Setter[list[tuple[str, bytes]]]):
    """Writes propagation fields as Kafka headers, replacing a field already present."""

    def set(self, carrier: list[tuple[str, bytes]], key: str, value: str) -> None:
        carrier[:] = [(name, old) for name, old in carrier if name.lower() != key.lower()]
        carrier.append((key, value.encode("latin-1", "replace")))


_GETTER = KafkaHeadersGetter()
_PROPAGATED = frozenset({"traceparent", "tracestate", "baggage"})
# W3C trace context exactly as OpenTelemetry's propagator reads it, for the pass-through.
_TRACEPARENT = re.compile(
    r"[ \t]*(?P<version>[0-9a-f]{2})-(?P<trace>[0-9a-f]{32})-(?P<span>[0-9a-f]{16})"
    r"-[0-9a-f]{2}(?:(?P<rest>-.*)|[ \t]*)"
)
_TRACEPARENT_MAX_CHARS = 512
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
_SETTER = KafkaHeadersSetter()


def extract(headers: Headers | None) -> Context:
    """The context the producer propagated in ``headers``. Absent or malformed headers
    give an empty context, so a span started in it is a new root (never a child of
    whatever span happens to be current)."""
    return propagate.extract(headers or (), context=Context(), getter=_GETTER)


def inject(context: Context) -> OutHeaders:
    """``traceparent`` (and ``tracestate``, ``baggage`` where set) for ``context``; empty
    when it holds no valid span."""
    carrier: list[tuple[str, bytes]] = []
    propagate.inject(carrier, context=context, setter=_SETTER)
    return tuple(carrier)


def traceparent_headers(span: Span, context: Context | None = None) -> OutHeaders:
    """The headers that make ``span`` the parent of whoever reads the record; ``context``
    is the span's parent context, to carry its baggage along."""
    return inject(trace.set_span_in_context(span, context))


def _traceparent_ids(header: str) -> tuple[str, str] | None:
    """(trace id, span id) of a valid ``traceparent``, by the propagator's own rules."""
    if len(header) > _TRACEPARENT_MAX_CHARS:
        return None
    match = _TRACEPARENT.fullmatch(header)
    if match is None or match["version"] == "ff" or (match["version"] == "00" and match["rest"]):
        return None
    if match["trace"] == _ZERO_TRACE or match["span"] == _ZERO_SPAN:
        return None
    return match["trace"], match["span"]


def passthrough(headers: Headers) -> tuple[tuple[str, str] | None, OutHeaders]:
    """Telemetry off: ((trace id, span id), the headers to hand on) of a valid producer
    ``traceparent`` - with its ``tracestate`` and ``baggage``, as they came - else
    (None, ()). One header scan and one regular expression."""
    for name, value in headers:
        if value is not None and name.lower() == "traceparent":
            ids = _traceparent_ids(value.decode("latin-1"))
            if ids is None:
                break  # the propagator, too, reads only the first traceparent
            handed_on = tuple(
                (key.lower(), raw)
                for key, raw in headers
                if raw is not None and key.lower() in _PROPAGATED
            )
            return ids, handed_on
    return None, ()
