"""The one typed settings object.

Every knob of the worker, the demo and the offline tools lives here and is read from
environment variables with the ``STREAMPROC_`` prefix (nested groups use ``__``, e.g.
``STREAMPROC_WINDOW__SIZE_S=30``). Nothing reads the environment anywhere else.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from streamproc._env_names import (
    UnknownVariable,
    UnknownVariablesError,
    Variable,
    unknown_variables,
    variables,
)
from streamproc.audit.options import AuditSettings
from streamproc.gate.options import GateSettings
from streamproc.inference.options import (
    ConfidenceSettings,
    InferenceSettings,
    JudgeSettings,
    LimitSettings,
    RecordSettings,
)
from streamproc.kafka.options import KafkaSecurity
from streamproc.monitor.options import AlertSettings, BurnRateWindow, HoppingWindow, WindowSettings
from streamproc.review.options import LabelSettings, ReviewSettings
from streamproc.telemetry.options import MetricsSettings, TelemetrySettings
from streamproc.verdicts.options import SampleRate, TopicSettings, WorkerSettings
from streamproc.web.options import HttpLimitSettings

__all__ = [
    "NOT_SETTINGS",
    "AlertSettings",
    "AuditSettings",
    "BurnRateWindow",
    "ConfidenceSettings",
    "HoppingWindow",
    "HttpLimitSettings",
    "InferenceSettings",
    "JudgeSettings",
    "KafkaSecurity",
    "LabelSettings",
    "LimitSettings",
    "MetricsSettings",
    "RecordSettings",
    "ReviewSettings",
    "SampleRate",
    "Settings",
    "TelemetrySettings",
    "TopicSettings",
    "UnknownVariable",
    "UnknownVariablesError",
    "WindowSettings",
    "WorkerSettings",
    "setting_variables",
    "unknown_setting_variables",
]


class Settings(BaseSettings):
    """Everything streamproc can be told, from ``STREAMPROC_*`` environment variables."""

    model_config = SettingsConfigDict(
        env_prefix="STREAMPROC_", env_nested_delimiter="__", frozen=True, extra="forbid"
    )

    app_id: str = "streamproc"
    broker_url: str = Field(
        default="kafka://127.0.0.1:9092",
        description="Broker URL(s) (kafka://host:port), ';'-separated.",
    )
    broker_flavour: Literal["kafka", "tansu"] = Field(
        default="kafka",
        description="'tansu' turns off what the embedded demo broker lacks (idempotence, "
        "multi-record batches).",
    )
    broker_connect_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="How long a starting worker, gate or audit sink waits for the broker to "
        "answer before it gives up with one line and exit code 8.",
    )
    security: KafkaSecurity = KafkaSecurity()
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_json: bool = True
    topics: TopicSettings = TopicSettings()
    window: WindowSettings = WindowSettings()
    judge: JudgeSettings = JudgeSettings()
    worker: WorkerSettings = WorkerSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    audit: AuditSettings = AuditSettings()
    alerts: AlertSettings = AlertSettings()
    metrics: MetricsSettings = MetricsSettings()
    review: ReviewSettings = ReviewSettings()
    labels: LabelSettings = LabelSettings()
    gate: GateSettings = GateSettings()

    @model_validator(mode="before")
    @classmethod
    def _no_unknown_variables(cls, data: Any) -> Any:
        """A misspelt ``STREAMPROC_*`` name is refused rather than silently left unread."""
        unknown = unknown_setting_variables(os.environ)
        if unknown:
            raise UnknownVariablesError(unknown)
        return data

    def to_env(self) -> dict[str, str]:
        """These settings as ``STREAMPROC_*`` variables, to start another process with them."""
        env: dict[str, str] = {}

        def flatten(prefix: str, model: BaseModel) -> None:
            for name in type(model).model_fields:
                value = getattr(model, name)
                key = f"{prefix}{name.upper()}"
                if isinstance(value, BaseModel):
                    flatten(f"{key}__", value)
                elif isinstance(value, dict):  # free-form keys: one JSON value
                    if value:
                        env[key] = json.dumps(
                            {
                                k: v.model_dump(mode="json") if isinstance(v, BaseModel) else v
                                for k, v in value.items()
                            }
                        )
                elif isinstance(value, list | tuple):  # values or groups: one JSON value
                    env[key] = json.dumps([_jsonable(v) for v in value])
                elif isinstance(value, SecretStr):
                    env[key] = value.get_secret_value()
                elif value is not None:
                    env[key] = _env_text(value.value if isinstance(value, Enum) else value)

        flatten("STREAMPROC_", self)
        return env

    @property
    def bootstrap_servers(self) -> str:
        """The broker list in the ``host:port,host:port`` form Kafka clients expect."""
        hosts = [part.strip() for part in self.broker_url.split(";") if part.strip()]
        return ",".join(host.split("://", 1)[-1] for host in hosts)

    def overriding(self, group: str, **values: object) -> Settings:
        """A copy with each of ``values`` that is not None set in the group ``group``
        (a server's command-line options over its environment)."""
        changes = {key: value for key, value in values.items() if value is not None}
        if not changes:
            return self
        updated = getattr(self, group).model_copy(update=changes)
        return self.model_copy(update={group: updated})


def _jsonable(value: object) -> object:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def _env_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


NOT_SETTINGS = frozenset(
    {
        "STREAMPROC_REVIEWER_TOKEN",  # review import: the reviewer's own token
        "STREAMPROC_TEST_BOOTSTRAP",  # tests: a running broker to use instead of starting one
        "STREAMPROC_KAFKA_STATE",  # scripts/kafka.sh: the broker's data folder
        "STREAMPROC_KAFKA_CACHE",  # scripts/kafka.sh: where the Kafka download is kept
        "STREAMPROC_KAFKA_HEAP",  # scripts/kafka.sh: the broker's Java heap
        "STREAMPROC_KAFKA_START_TIMEOUT",  # scripts/kafka.sh: readiness wait
        "STREAMPROC_KAFKA_SECURITY",  # scripts/kafka.sh: plaintext or sasl_ssl listeners
        "STREAMPROC_KAFKA_SASL_USER",  # scripts/kafka.sh: the SASL listener's user
        "STREAMPROC_KAFKA_SASL_PASSWORD",  # scripts/kafka.sh: and its password
    }
)
"""``STREAMPROC_*`` variables that are not settings (read by a command or a developer script
on their own), so an environment that sets them is not refused."""


def setting_variables() -> list[Variable]:
    """Every ``STREAMPROC_*`` variable ``Settings`` reads, groups before their fields."""
    return list(variables(Settings, "STREAMPROC_"))


def unknown_setting_variables(environ: Mapping[str, str]) -> list[UnknownVariable]:
    """The ``STREAMPROC_*`` names in ``environ`` that no setting answers to, each with the
    closest valid name."""
    return unknown_variables(Settings, environ, "STREAMPROC_", NOT_SETTINGS)
