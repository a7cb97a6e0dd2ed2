"""Options of metrics and OpenTelemetry export."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from streamproc.options import OptionGroup

__all__ = ["MetricsSettings", "TelemetrySettings"]


class MetricsSettings(OptionGroup):
    """The Prometheus endpoint of a worker."""

    host: str = Field(default="127.0.0.1", description="Address /metrics binds to.")
    port: int | None = Field(
        default=None, ge=0, le=65535, description="None: no metrics endpoint; 0: any free port."
    )


class TelemetrySettings(OptionGroup):
    """OpenTelemetry traces and evaluation log records (adapters/telemetry); metrics are
    Prometheus (``MetricsSettings``)."""

    exporter: Literal["none", "otlp-grpc", "otlp-http", "console"] = Field(
        default="none",
        description="Where spans and log records go; 'none' installs no SDK (costs nothing).",
    )
    endpoint: str | None = Field(
        default=None,
        description="OTLP endpoint (e.g. http://otel-collector:4317 for gRPC, "
        "http://otel-collector:4318 for HTTP); None: the exporter's default / OTEL_* env.",
    )
    service_name: str = "streamproc"
    instance_id: str | None = Field(
        default=None, description="service.instance.id; None: host name and process id."
    )
    sample_ratio: float = Field(
        default=1.0, ge=0, le=1, description="Share of new root traces kept (parent-based)."
    )
    stage_spans: bool = Field(
        default=True, description="A child span per judging stage under each answer's span."
    )
