"""The OpenTelemetry SDK, built from settings and held by one object.

``exporter="none"`` installs nothing: :class:`Telemetry` then hands out the API's no-op
tracer and logger and never imports ``opentelemetry.sdk``, so tracing off costs nothing
(``python -m bench tracing`` measures it). Any other exporter builds a ``TracerProvider``
(parent-based ratio sampling, a batch span processor) and a ``LoggerProvider`` for the
``gen_ai.evaluation.result`` records, both with the same resource.

The providers belong to the :class:`Telemetry` instance, not to the process: tests build
as many as they like with in-memory exporters and nothing leaks between them. The entry
point may call :meth:`Telemetry.install_global` so third-party instrumentation finds
them too; it must call :meth:`Telemetry.shutdown` on exit to flush what is queued.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

from opentelemetry import _logs, trace

from streamproc import __version__
from streamproc.telemetry import semconv
from streamproc.telemetry.options import TelemetrySettings

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import LogRecordExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["Telemetry", "default_instance_id"]


def default_instance_id() -> str:
    """``service.instance.id`` when none is configured: host name and process id, unique
    among the workers of one deployment at any moment."""
    return f"{socket.gethostname()}-{os.getpid()}"


class Telemetry:
    """A tracer and a logger for streamproc's spans and evaluation records, and the SDK
    providers behind them (None when telemetry is off)."""

    def __init__(
        self,
        *,
        tracer: trace.Tracer,
        logger: _logs.Logger,
        stage_spans: bool = True,
        tracer_provider: TracerProvider | None = None,
        logger_provider: LoggerProvider | None = None,
    ) -> None:
        self.tracer = tracer
        self.logger = logger
        self.stage_spans = stage_spans
        self.tracer_provider = tracer_provider
        self.logger_provider = logger_provider
        self._closed = False

    @property
    def enabled(self) -> bool:
        """Whether spans and records go anywhere; when False every call is a no-op."""
        return self.tracer_provider is not None

    @classmethod
    def disabled(cls) -> Telemetry:
        """No SDK: the API's no-op tracer and logger."""
        return cls(
            tracer=trace.NoOpTracer(), logger=_logs.NoOpLogger(semconv.INSTRUMENTATION_SCOPE)
        )

    @classmethod
    def from_settings(
        cls,
        settings: TelemetrySettings,
        *,
        span_exporter: SpanExporter | None = None,
        log_exporter: LogRecordExporter | None = None,
        synchronous: bool = False,
        service_version: str = __version__,
    ) -> Telemetry:
        """The telemetry ``settings`` ask for.

        ``span_exporter`` / ``log_exporter`` replace the exporter the settings name (tests
        pass the SDK's in-memory exporters; either given turns telemetry on even when the
        settings say ``none``). ``synchronous`` exports each span and record as it ends
        (simple processors) instead of in background batches: for tests and benchmarks,
        never for a worker."""
        injected = span_exporter is not None or log_exporter is not None
        if settings.exporter == "none" and not injected:
            return cls.disabled()
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import (
            BatchLogRecordProcessor,
            SimpleLogRecordProcessor,
        )
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        resource = _resource(settings, service_version)
        if span_exporter is None and log_exporter is None:
            span_exporter, log_exporter = _exporters(settings)
        tracer_provider = TracerProvider(
            resource=resource,
            sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)),
        )
        if span_exporter is not None:
            tracer_provider.add_span_processor(
                SimpleSpanProcessor(span_exporter)
                if synchronous
                else BatchSpanProcessor(span_exporter)
            )
        logger_provider = LoggerProvider(resource=resource)
        if log_exporter is not None:
            logger_provider.add_log_record_processor(
                SimpleLogRecordProcessor(log_exporter)
                if synchronous
                else BatchLogRecordProcessor(log_exporter)
            )
        return cls(
            tracer=tracer_provider.get_tracer(semconv.INSTRUMENTATION_SCOPE, service_version),
            logger=logger_provider.get_logger(semconv.INSTRUMENTATION_SCOPE, service_version),
            stage_spans=settings.stage_spans,
            tracer_provider=tracer_provider,
            logger_provider=logger_provider,
        )

    def install_global(self) -> None:
        """Make these providers the process-wide ones (OpenTelemetry allows this once per
        process). Only the entry point calls it; a disabled telemetry installs nothing."""
        if self.tracer_provider is not None:
            trace.set_tracer_provider(self.tracer_provider)
        if self.logger_provider is not None:
            _logs.set_logger_provider(self.logger_provider)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything queued; True when all of it went out in time."""
        flushed = True
        if self.tracer_provider is not None:
            flushed = self.tracer_provider.force_flush(timeout_millis) and flushed
        if self.logger_provider is not None:
            flushed = self.logger_provider.force_flush(timeout_millis) and flushed
        return flushed

    def shutdown(self) -> None:
        """Flush and stop the exporters. Idempotent; spans started afterwards are dropped."""
        if self._closed:
            return
        self._closed = True
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()
        if self.logger_provider is not None:
            self.logger_provider.shutdown()


def _resource(settings: TelemetrySettings, service_version: str) -> Resource:
    from opentelemetry.sdk.resources import Resource

    return Resource.create(
        {
            semconv.SERVICE_NAME: settings.service_name,
            semconv.SERVICE_VERSION: service_version,
            semconv.SERVICE_INSTANCE_ID: settings.instance_id or default_instance_id(),
        }
    )


def _exporters(settings: TelemetrySettings) -> tuple[SpanExporter, LogRecordExporter]:
    """The span and log exporters of ``settings.exporter``; heavy imports only for the
    one chosen. ``endpoint`` is the collector's base URL (the HTTP exporters get the
    ``/v1/traces`` and ``/v1/logs`` paths appended); None leaves it to ``OTEL_*``."""
    endpoint = settings.endpoint
    if settings.exporter == "otlp-grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
            OTLPLogExporter as GrpcLogExporter,
        )
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpanExporter,
        )

        return GrpcSpanExporter(endpoint=endpoint), GrpcLogExporter(endpoint=endpoint)
    if settings.exporter == "otlp-http":
        from opentelemetry.exporter.otlp.proto.http._log_exporter import (
            OTLPLogExporter as HttpLogExporter,
        )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpSpanExporter,
        )

        return (
            HttpSpanExporter(endpoint=_http_path(endpoint, "v1/traces")),
            HttpLogExporter(endpoint=_http_path(endpoint, "v1/logs")),
        )
    if settings.exporter == "console":
        from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(), ConsoleLogRecordExporter()
    raise ValueError(f"no exporter for telemetry.exporter={settings.exporter!r}")


def _http_path(endpoint: str | None, path: str) -> str | None:
    if endpoint is None:
        return None
    base = endpoint.rstrip("/")
    return base if base.endswith("/" + path) else f"{base}/{path}"
