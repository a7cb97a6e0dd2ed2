"""Telemetry built from settings: 'none' installs no SDK at all, the others build the
providers with the resource and sampler asked for."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.sampling import ParentBased

from streamproc import __version__
from streamproc.telemetry import semconv
from streamproc.telemetry.options import TelemetrySettings
from streamproc.telemetry.otel import Telemetry
from streamproc.telemetry.trace_headers import extract
from streamproc.telemetry.tracing import MessageRef, Tracing
from streamproc.verdicts.dead_letter import MessageOrigin
from tests.unit.telemetry.conftest import GOOD, GROUP, PARENT_TRACE, TOPIC, TRACEPARENT, judged


def test_exporter_none_imports_no_sdk_and_records_nothing() -> None:
    """In a fresh interpreter: a whole batch traced with telemetry off leaves
    ``opentelemetry.sdk`` unimported and passes the producer's traceparent through."""
    script = textwrap.dedent(
        f"""
        import sys
        from streamproc.telemetry.otel import Telemetry
        from streamproc.telemetry.tracing import MessageRef, Tracing
        from streamproc.config import TelemetrySettings

        telemetry = Telemetry.from_settings(TelemetrySettings(exporter="none"))
        assert not telemetry.enabled
        assert telemetry.tracer_provider is None and telemetry.logger_provider is None
        tracing = Tracing(telemetry, group="g")
        with tracing.start_batch(
            [MessageRef("t", 0, 0, None, [("traceparent", {TRACEPARENT!r})]), MessageRef("t", 0, 1)]
        ) as batch:
            batch.clock.record("judge", 1, 2)
            with_parent, without = batch.messages
            assert with_parent.headers == (("traceparent", {TRACEPARENT!r}),), with_parent.headers
            assert with_parent.trace_id == {PARENT_TRACE!r}
            assert without.headers == () and without.trace_id is None
            assert not with_parent.span.is_recording()
        telemetry.shutdown()
        sdk = sorted(name for name in sys.modules if name.startswith("opentelemetry.sdk"))
        assert not sdk, sdk
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_disabled_telemetry_emits_nothing_through_installed_exporters() -> None:
    telemetry = Telemetry.disabled()
    tracing = Tracing(telemetry, group=GROUP)
    (verdict,) = judged(GOOD).verdicts
    with tracing.start_batch([MessageRef(TOPIC, 0, 0)]) as batch:
        batch.verdict(MessageOrigin(TOPIC, 0, 0, None), verdict)
        assert batch.headers == ()
    assert isinstance(telemetry.tracer, trace.NoOpTracer)
    assert telemetry.force_flush()


@pytest.mark.parametrize(
    "traceparent",
    [
        TRACEPARENT,
        b" " + TRACEPARENT + b"\t",
        b"01-" + TRACEPARENT[3:] + b"-future-field",
        TRACEPARENT + b"-extra",  # version 00 allows nothing more
        b"ff-" + TRACEPARENT[3:],
        TRACEPARENT.upper(),
        f"00-{'0' * 32}-b7ad6b7169203331-01".encode(),
        f"00-{PARENT_TRACE}-{'0' * 16}-01".encode(),
        b"00-" + b"a" * 600,
        b"garbage",
    ],
)
def test_passthrough_accepts_exactly_what_the_propagator_accepts(traceparent: bytes) -> None:
    """Telemetry off reads ``traceparent`` without the propagator; both must agree."""
    headers = [("traceparent", traceparent), ("tracestate", b"v=1")]
    span_context = trace.get_current_span(extract(headers)).get_span_context()
    expected = trace.format_trace_id(span_context.trace_id) if span_context.is_valid else None
    tracing = Tracing(Telemetry.disabled(), group=GROUP)
    with tracing.start_batch([MessageRef(TOPIC, 0, 0, None, headers)]) as batch:
        (traced,) = batch.messages
    assert traced.trace_id == expected
    assert traced.headers == (tuple(headers) if expected else ())


def test_resource_and_sampler_come_from_settings() -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    settings = TelemetrySettings(
        exporter="none", service_name="judge-svc", instance_id="worker-3", sample_ratio=0.25
    )
    telemetry = Telemetry.from_settings(settings, span_exporter=InMemorySpanExporter())
    try:
        provider = telemetry.tracer_provider
        assert provider is not None and telemetry.enabled
        attributes = provider.resource.attributes
        assert attributes[semconv.SERVICE_NAME] == "judge-svc"
        assert attributes[semconv.SERVICE_VERSION] == __version__
        assert attributes[semconv.SERVICE_INSTANCE_ID] == "worker-3"
        assert isinstance(provider.sampler, ParentBased)
        assert "0.25" in provider.sampler.get_description()  # type: ignore[no-untyped-call]
        assert telemetry.logger_provider is not None
        assert telemetry.logger_provider.resource.attributes[semconv.SERVICE_NAME] == "judge-svc"
    finally:
        telemetry.shutdown()
        telemetry.shutdown()  # idempotent


def test_default_instance_id_names_host_and_process() -> None:
    import os

    telemetry = Telemetry.from_settings(TelemetrySettings(exporter="console"))
    try:
        assert telemetry.tracer_provider is not None
        instance = telemetry.tracer_provider.resource.attributes[semconv.SERVICE_INSTANCE_ID]
        assert str(instance).endswith(f"-{os.getpid()}")
    finally:
        telemetry.shutdown()


@pytest.mark.parametrize(
    ("exporter", "span_class", "log_class"),
    [
        (
            "otlp-grpc",
            "opentelemetry.exporter.otlp.proto.grpc",
            "opentelemetry.exporter.otlp.proto.grpc",
        ),
        (
            "otlp-http",
            "opentelemetry.exporter.otlp.proto.http",
            "opentelemetry.exporter.otlp.proto.http",
        ),
        ("console", "opentelemetry.sdk.trace.export", "opentelemetry.sdk._logs"),
    ],
)
def test_each_exporter_setting_builds_its_exporters(
    exporter: str, span_class: str, log_class: str
) -> None:
    from streamproc.telemetry.otel import _exporters

    settings = TelemetrySettings.model_validate(
        {"exporter": exporter, "endpoint": "http://collector:4318"}
    )
    spans, logs = _exporters(settings)
    try:
        assert type(spans).__module__.startswith(span_class)
        assert type(logs).__module__.startswith(log_class)
        if exporter == "otlp-http":
            assert spans._endpoint == "http://collector:4318/v1/traces"  # type: ignore[attr-defined]
            assert logs._endpoint == "http://collector:4318/v1/logs"  # type: ignore[attr-defined]
    finally:
        spans.shutdown()
        logs.shutdown()  # type: ignore[no-untyped-call]  # unannotated in the SDK
