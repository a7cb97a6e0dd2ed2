"""W3C trace context over Kafka record headers.

Extraction and injection go through the configured propagator
(``opentelemetry.propagate``: tracecontext and baggage unless ``OTEL_PROPAGATORS`` says
otherwise) with a getter and setter over aiokafka's ``[(name, bytes), ...]`` headers.
:func:`passthrough` is the telemetry-off path: it reads ``traceparent`` by the
propagator's own rules without building any context, and hands the headers on as they
came.

Every field is bounded first (:func:`read_trace_context`), by W3C's limits:
``traceparent`` as specified, ``tracestate`` at most 512 characters and 32 members,
``baggage`` at most 8,192 bytes and 64 members, each well formed. A field beyond them is
dropped whole - it neither reaches the propagator nor is handed on - and the drop is
returned, for the caller to count and note; no input header is ever copied as it came
without passing these checks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import structlog
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import Span

__all__ = [
    "BAGGAGE_MAX_BYTES",
    "BAGGAGE_MAX_MEMBERS",
    "TRACESTATE_MAX_CHARS",
    "TRACESTATE_MAX_MEMBERS",
    "DropReason",
    "DroppedField",
    "Headers",
    "KafkaHeadersGetter",
    "KafkaHeadersSetter",
    "OutHeaders",
    "TraceContext",
    "extract",
    "inject",
    "passthrough",
    "read_trace_context",
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


def extract(headers: Headers | None, bounded: TraceContext | None = None) -> Context:
    """The context the producer propagated in ``headers``, its W3C fields bounded first
    (other propagators' own headers are left to them). Absent, malformed or dropped
    headers give an empty context, so a span started in it is a new root (never a child
    of whatever span happens to be current). ``bounded``: ``read_trace_context(headers)``
    when the caller has it already."""
    headers = headers or ()
    bounded = bounded if bounded is not None else read_trace_context(headers)
    others = [(name, value) for name, value in headers if name.lower() not in _PROPAGATED]
    carrier: list[tuple[str, bytes | None]] = [*others, *bounded.fields]
    return propagate.extract(carrier, context=Context(), getter=_GETTER)


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
    ``traceparent`` - with its ``tracestate`` and ``baggage`` where they keep W3C's
    limits - else (None, ()). :func:`read_trace_context` also says what was dropped."""
    context = read_trace_context(headers)
    return context.ids, context.handed_on


# --- W3C limits ---------------------------------------------------------------------------

TRACESTATE_MAX_CHARS: Final = 512
TRACESTATE_MAX_MEMBERS: Final = 32
BAGGAGE_MAX_BYTES: Final = 8192
BAGGAGE_MAX_MEMBERS: Final = 64

DropReason = Literal["invalid", "too_long", "too_many_members"]
"""Why a field was dropped: a bounded set, fit for a metric label."""

# tracestate list-member (W3C Trace Context, section 3.3.1).
_TRACESTATE_MEMBER = re.compile(
    r"(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)
# baggage list-member (W3C Baggage, section 3.3.1): token key, baggage-octet value,
# optional properties.
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_BAGGAGE_VALUE = r"[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*"
_BAGGAGE_MEMBER = re.compile(
    rf"[ \t]*{_TOKEN}[ \t]*=[ \t]*{_BAGGAGE_VALUE}"
    rf"(?:[ \t]*;[ \t]*{_TOKEN}(?:[ \t]*=[ \t]*{_BAGGAGE_VALUE})?)*[ \t]*"
)


@dataclass(frozen=True, slots=True)
class DroppedField:
    """One trace-context field left out, and why."""

    header: str
    """``traceparent``, ``tracestate`` or ``baggage``."""
    reason: DropReason
    detail: str
    """Sizes and limits only, never the field's content."""

    @property
    def note(self) -> str:
        """As a verdict's ``judgement.limits`` entry."""
        return f"TRACE_CONTEXT_DROPPED: {self.header} {self.reason} ({self.detail})"


@dataclass(frozen=True, slots=True)
class TraceContext:
    """The W3C fields of one record's headers, bounded."""

    ids: tuple[str, str] | None
    """(trace id, span id) of a valid ``traceparent``."""
    fields: OutHeaders
    """The fields that keep W3C's limits, at most one header each (lower-case names;
    repeated ``tracestate`` or ``baggage`` headers joined with commas, as HTTP does)."""
    dropped: tuple[DroppedField, ...]

    @property
    def handed_on(self) -> OutHeaders:
        """What records written for this input carry with telemetry off: the kept fields
        when ``traceparent`` is valid (``tracestate`` means nothing without it), else none."""
        return self.fields if self.ids is not None else ()

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(dropped.note for dropped in self.dropped)


def read_trace_context(headers: Headers) -> TraceContext:
    """``headers``' ``traceparent``, ``tracestate`` and ``baggage``, each checked against
    W3C's limits before it is decoded; a field beyond them is dropped whole. Headers of
    other names are ignored (never handed on)."""
    found: dict[str, list[bytes]] = {}
    sizes: dict[str, int] = {}
    for name, value in headers:
        lowered = name.lower()
        if value is None or lowered not in _PROPAGATED:
            continue
        found.setdefault(lowered, []).append(value)
        sizes[lowered] = sizes.get(lowered, 0) + len(value) + 1
    fields: list[tuple[str, bytes]] = []
    dropped: list[DroppedField] = []
    ids = None
    if "traceparent" in found:
        raw = found["traceparent"][0]  # the propagator, too, reads only the first one
        problem = _traceparent_problem(raw)
        if problem is None:
            ids = _traceparent_ids(raw.decode("latin-1"))
            fields.append(("traceparent", raw))
        else:
            dropped.append(DroppedField("traceparent", *problem))
    for name, check in (("tracestate", _tracestate_problem), ("baggage", _baggage_problem)):
        values = found.get(name)
        if not values:
            continue
        if sizes[name] - 1 > _LIMITS[name]:
            limit = _LIMITS[name]
            detail = f"{sizes[name] - 1} bytes, at most {limit}"
            dropped.append(DroppedField(name, "too_long", detail))
            continue
        raw = b",".join(values)
        problem = check(raw.decode("latin-1"))
        if problem is None:
            fields.append((name, raw))
        else:
            dropped.append(DroppedField(name, *problem))
    return TraceContext(ids, tuple(fields), tuple(dropped))


_LIMITS = {"tracestate": TRACESTATE_MAX_CHARS, "baggage": BAGGAGE_MAX_BYTES}


def _traceparent_problem(raw: bytes) -> tuple[DropReason, str] | None:
    if len(raw) > _TRACEPARENT_MAX_CHARS:
        return "too_long", f"{len(raw)} bytes, at most {_TRACEPARENT_MAX_CHARS}"
    if _traceparent_ids(raw.decode("latin-1")) is None:
        return "invalid", "not version-traceid-parentid-flags in lower-case hex, ids not zero"
    return None


def _members(text: str) -> list[str]:
    """A W3C list's members: split at commas, empty members (OWS only) skipped."""
    return [member for member in text.split(",") if member.strip(" \t")]


def _tracestate_problem(text: str) -> tuple[DropReason, str] | None:
    members = _members(text)
    if len(members) > TRACESTATE_MAX_MEMBERS:
        return "too_many_members", f"{len(members)} members, at most {TRACESTATE_MAX_MEMBERS}"
    keys: set[str] = set()
    for member in members:
        stripped = member.strip(" \t")
        if _TRACESTATE_MEMBER.fullmatch(stripped) is None:
            return "invalid", "a member is not key=value as W3C tracestate specifies"
        key = stripped.split("=", 1)[0]
        if key in keys:
            return "invalid", "a key appears twice"
        keys.add(key)
    return None


def _baggage_problem(text: str) -> tuple[DropReason, str] | None:
    members = _members(text)
    if len(members) > BAGGAGE_MAX_MEMBERS:
        return "too_many_members", f"{len(members)} members, at most {BAGGAGE_MAX_MEMBERS}"
    if any(_BAGGAGE_MEMBER.fullmatch(member) is None for member in members):
        return "invalid", "a member is not key=value as W3C baggage specifies"
    return None


def report_dropped(
    dropped: Sequence[DroppedField],
    count: Callable[[str, DropReason], None],
    **where: str | int,
) -> None:
    """Each field left out: counted (``count(header, reason)``, a metric) and logged once
    as ``trace_context_dropped`` with ``where`` (the input's place), never its content."""
    for field in dropped:
        count(field.header, field.reason)
        _log.warning(
            "trace_context_dropped",
            header=field.header,
            reason=field.reason,
            detail=field.detail,
            **where,
        )


_log = structlog.get_logger(__name__)
