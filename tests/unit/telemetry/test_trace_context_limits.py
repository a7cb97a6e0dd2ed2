"""Trace context keeps W3C's limits: a field beyond them is dropped whole, said why, and
neither read by the propagator nor handed on; other headers are never handed on."""

from __future__ import annotations

import json

import pytest
from opentelemetry import baggage, trace

from streamproc.inference.options import JudgeSettings
from streamproc.telemetry.trace_headers import (
    BAGGAGE_MAX_BYTES,
    BAGGAGE_MAX_MEMBERS,
    TRACESTATE_MAX_CHARS,
    TRACESTATE_MAX_MEMBERS,
    extract,
    inject,
    passthrough,
    read_trace_context,
)
from streamproc.telemetry.tracing import MessageRef, Tracing
from streamproc.verdicts.dead_letter import MessageOrigin
from streamproc.verdicts.stage import IncomingMessage, judge_messages
from streamproc.wiring import build_judge
from tests.unit.telemetry.conftest import GOOD, GROUP, PARENT_TRACE, TOPIC, TRACEPARENT, Otel


def _baggage_of(size: int) -> bytes:
    """One member, ``size`` bytes long."""
    return b"k=" + b"v" * (size - 2)


def _members(count: int, template: str) -> bytes:
    return ",".join(template.format(i) for i in range(count)).encode()


@pytest.mark.parametrize(
    ("header", "value", "reason"),
    [
        ("baggage", _baggage_of(BAGGAGE_MAX_BYTES + 1), "too_long"),
        ("baggage", _baggage_of(1_000_000), "too_long"),
        ("baggage", _members(BAGGAGE_MAX_MEMBERS + 1, "k{}=v"), "too_many_members"),
        ("baggage", b"no equals sign", "invalid"),
        ("baggage", b"k=v\x00", "invalid"),
        ("tracestate", b"a=" + b"b" * (TRACESTATE_MAX_CHARS - 1), "too_long"),
        ("tracestate", _members(TRACESTATE_MAX_MEMBERS + 1, "k{}=v"), "too_many_members"),
        ("tracestate", b"UPPER=v", "invalid"),
        ("tracestate", b"a=1,a=2", "invalid"),
        ("tracestate", b"a=has,comma", "invalid"),
    ],
)
def test_a_field_beyond_the_limits_is_dropped_whole_and_said_why(
    header: str, value: bytes, reason: str
) -> None:
    headers = [("traceparent", TRACEPARENT), (header, value)]
    context = read_trace_context(headers)
    assert context.ids is not None and context.ids[0] == PARENT_TRACE
    assert context.fields == (("traceparent", TRACEPARENT),)
    [dropped] = context.dropped
    assert (dropped.header, dropped.reason) == (header, reason)
    assert len(dropped.note) < 200  # sizes and limits, never the content
    assert dropped.note.startswith(f"TRACE_CONTEXT_DROPPED: {header} {reason} (")
    assert passthrough(headers) == (context.ids, ((("traceparent", TRACEPARENT)),))


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("baggage", _baggage_of(BAGGAGE_MAX_BYTES)),
        ("baggage", _members(BAGGAGE_MAX_MEMBERS, "k{}=v")),
        ("baggage", b"user=alice;ttl=60, tenant = acme;secret"),
        ("baggage", b"k=%E2%9C%93"),
        ("tracestate", b"a=" + b"b" * 254 + b",c=" + b"d" * (TRACESTATE_MAX_CHARS - 259)),
        ("tracestate", _members(TRACESTATE_MAX_MEMBERS, "k{}=v")),
        ("tracestate", b"rojo=00f067aa0ba902b7,congo@t61rcwkgmzu=t61rcWkgMzE"),
    ],
)
def test_a_field_at_the_limits_is_handed_on_as_it_came(header: str, value: bytes) -> None:
    headers = [("traceparent", TRACEPARENT), (header, value)]
    context = read_trace_context(headers)
    assert context.dropped == ()
    assert context.handed_on == (("traceparent", TRACEPARENT), (header, value))


@pytest.mark.parametrize(
    ("traceparent", "reason"),
    [
        (TRACEPARENT.upper(), "invalid"),
        (b"00-" + b"0" * 32 + b"-b7ad6b7169203331-01", "invalid"),
        (TRACEPARENT[:-3] + b"-0g", "invalid"),
        (b"ff-" + TRACEPARENT[3:], "invalid"),
        (TRACEPARENT + b"-more", "invalid"),
        (b"01-" + TRACEPARENT[3:] + b"-" + b"x" * 600, "too_long"),
    ],
)
def test_a_traceparent_not_as_specified_is_dropped_with_its_tracestate(
    traceparent: bytes, reason: str
) -> None:
    context = read_trace_context([("traceparent", traceparent), ("tracestate", b"v=1")])
    assert context.ids is None
    assert [(d.header, d.reason) for d in context.dropped] == [("traceparent", reason)]
    assert context.handed_on == ()  # tracestate means nothing without a traceparent


def test_other_headers_are_never_handed_on_and_repeats_join() -> None:
    headers = [
        ("traceparent", TRACEPARENT),
        ("x-api-key", b"secret"),
        ("reply-topic", b"streamproc.verdicts"),
        ("Baggage", b"a=1"),
        ("baggage", b"b=2"),
        ("baggage", None),
    ]
    _, handed_on = passthrough(headers)
    assert handed_on == (("traceparent", TRACEPARENT), ("baggage", b"a=1,b=2"))


def test_repeated_fields_count_together_against_the_limit() -> None:
    half = _baggage_of(BAGGAGE_MAX_BYTES // 2 + 1)
    context = read_trace_context(
        [("traceparent", TRACEPARENT), ("baggage", half), ("baggage", half)]
    )
    assert [(d.header, d.reason) for d in context.dropped] == [("baggage", "too_long")]


def test_the_propagator_never_sees_a_dropped_field() -> None:
    """Telemetry on: oversized baggage is not extracted, so not injected downstream; the
    trace itself is continued."""
    context = extract(
        [("traceparent", TRACEPARENT), ("baggage", _baggage_of(BAGGAGE_MAX_BYTES + 1))]
    )
    assert trace.format_trace_id(trace.get_current_span(context).get_span_context().trace_id) == (
        PARENT_TRACE
    )
    assert baggage.get_all(context) == {}
    assert [name for name, _ in inject(context)] == ["traceparent"]
    kept = extract([("traceparent", TRACEPARENT), ("baggage", b"tenant=acme")])
    assert baggage.get_all(kept) == {"tenant": "acme"}


@pytest.mark.parametrize("enabled", [False, True])
def test_each_message_says_what_was_dropped(otel: Otel, enabled: bool) -> None:
    from streamproc.telemetry.otel import Telemetry

    telemetry = otel.telemetry if enabled else Telemetry.disabled()
    poison = [("traceparent", TRACEPARENT), ("baggage", _baggage_of(1_000_000))]
    tracing = Tracing(telemetry, group=GROUP)
    with tracing.start_batch([MessageRef(TOPIC, 0, 0, None, poison)]) as batch:
        (traced,) = batch.messages
    assert traced.trace_id == PARENT_TRACE
    assert [name for name, _ in traced.headers] == ["traceparent"]
    assert traced.notes == (
        "TRACE_CONTEXT_DROPPED: baggage too_long (1000000 bytes, at most 8192)",
    )


def test_the_verdict_carries_the_note_in_its_limits() -> None:
    note = "TRACE_CONTEXT_DROPPED: baggage too_long (1000000 bytes, at most 8192)"
    message = IncomingMessage(
        json.dumps(GOOD).encode(), MessageOrigin(TOPIC, 0, 0, b"conv"), notes=(note,)
    )
    output = judge_messages([message], build_judge(JudgeSettings(name="rules")))
    [verdict] = output.verdicts
    assert verdict.judgement.limits[-1] == note
    clean = judge_messages(
        [IncomingMessage(json.dumps(GOOD).encode(), MessageOrigin(TOPIC, 0, 1, b"conv"))],
        build_judge(JudgeSettings(name="rules")),
    )
    assert note not in clean.verdicts[0].judgement.limits
