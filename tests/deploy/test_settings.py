"""The environment a deployment hands streamproc must be one ``Settings`` accepts, name by name.

pydantic-settings silently ignores an unknown top-level ``STREAMPROC_*`` variable (only nested
groups reject extra keys), so a misspelt ``STREAMPROC_BROKR_URL`` would leave the default broker
in place without a word. ``settings_from_env`` closes that gap; docker-compose and Kubernetes
tests (test_compose.py, test_deploy_k8s.py) build their services' settings through it.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Mapping, Sequence

import pytest
from pydantic import BaseModel, ValidationError

from streamproc.cli.main import main
from streamproc.config import Settings

__all__ = [
    "PREFIX",
    "SERVES_HEALTH",
    "TRANSACTIONAL",
    "UnknownSettingError",
    "is_command",
    "settings_from_env",
    "unknown_settings",
]

PREFIX = "STREAMPROC_"
SERVES_HEALTH = frozenset({"worker"})
"""streamproc commands that serve /livez and /readyz on ``worker.health_port``: only these
may have probes (a probe of a port nobody listens on restarts its container forever)."""
TRANSACTIONAL = frozenset({"worker"})
"""streamproc commands whose Kafka transactional id is ``worker.instance_id``."""


class UnknownSettingError(ValueError):
    """A ``STREAMPROC_*`` variable that names no field of ``Settings``."""


def _names_a_field(name: str) -> bool:
    model: type[BaseModel] = Settings
    parts = name.removeprefix(PREFIX).lower().split("__")
    for depth, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return False
        if depth < len(parts) - 1:
            annotation = field.annotation
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                return False
            model = annotation
    return True


def unknown_settings(env: Mapping[str, str]) -> list[str]:
    """The ``STREAMPROC_*`` names in ``env`` that no ``Settings`` field answers to."""
    return sorted(key for key in env if key.startswith(PREFIX) and not _names_a_field(key))


def settings_from_env(env: Mapping[str, str]) -> Settings:
    """``Settings`` as a process started with exactly ``env`` would build it.

    Other ``STREAMPROC_*`` variables of the test process are hidden meanwhile; variables without
    the prefix (``PGPASSWORD``, ``KAFKA_*``) are not streamproc's and are left out.
    Raises ``UnknownSettingError`` for a name no field has, ``ValidationError`` for a bad value.
    """
    unknown = unknown_settings(env)
    if unknown:
        raise UnknownSettingError(f"Settings has no field for {unknown}")
    with pytest.MonkeyPatch.context() as patch:
        for key in list(os.environ):
            if key.startswith(PREFIX):
                patch.delenv(key)
        for key, value in env.items():
            if key.startswith(PREFIX):
                patch.setenv(key, value)
        return Settings(_env_file=None)


def is_command(argv: Sequence[str]) -> bool:
    """Whether ``streamproc *argv`` names a command: asked with ``--help``, which runs nothing
    (and so answers before argparse would look at any option after the command)."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main([*argv, "--help"])
        except SystemExit as exit_:
            return exit_.code == 0
    return False


def test_deployed_commands_parse() -> None:
    assert is_command(["worker"]) and is_command(["audit-sink"])
    assert not is_command(["audit_sink"])
    assert not is_command(["audit", "sink"])


def test_a_full_environment_is_read() -> None:
    settings = settings_from_env(
        {
            "STREAMPROC_BROKER_URL": "kafka://kafka:9092",
            "STREAMPROC_WORKER__HEALTH_PORT": "8081",
            "STREAMPROC_JUDGE__INFERENCE__INTRA_OP_THREADS": "2",
            "STREAMPROC_SECURITY__SASL_PASSWORD": "pw",
            "PGPASSWORD": "not ours",
        }
    )
    assert settings.bootstrap_servers == "kafka:9092"
    assert settings.worker.health_port == 8081
    assert settings.judge.inference.intra_op_threads == 2
    assert settings.security.sasl_password is not None
    assert settings.security.sasl_password.get_secret_value() == "pw"


@pytest.mark.parametrize(
    "name",
    [
        "STREAMPROC_BROKR_URL",  # top level: pydantic-settings alone would ignore it
        "STREAMPROC_WORKER__HEALT_PORT",
        "STREAMPROC_LOG_JSON__X",  # a plain field has no subfields
        "STREAMPROC_JUDGE__INFERENCE__THREADS",
    ],
)
def test_a_misspelt_name_is_rejected(name: str) -> None:
    with pytest.raises(UnknownSettingError, match=name):
        settings_from_env({name: "1"})


def test_a_bad_value_is_rejected() -> None:
    with pytest.raises(ValidationError):
        settings_from_env({"STREAMPROC_TELEMETRY__EXPORTER": "otlp"})


def test_the_callers_environment_does_not_leak_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMPROC_LOG_LEVEL", "DEBUG")
    assert settings_from_env({}).log_level == "INFO"
    assert os.environ["STREAMPROC_LOG_LEVEL"] == "DEBUG", "the caller's environment is restored"
