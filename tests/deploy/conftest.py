"""Fixtures of the deployment checks: the objects deploy/k8s applies (a fresh copy per test,
which a test may break), and docker-compose.yml with its services and collector config (one
copy per module)."""

from __future__ import annotations

from typing import Any, cast

import pytest
import yaml

from tests.deploy.compose_stack import COMPOSE_FILE, Service, _collector_config
from tests.deploy.k8s_manifests import Obj, load_objects


@pytest.fixture
def objects() -> list[Obj]:
    return load_objects()


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(loaded, dict), "docker-compose.yml is not a mapping"
    return cast(dict[str, Any], loaded)


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Service]:
    found = compose.get("services")
    assert isinstance(found, dict) and found, "no services"
    return cast(dict[str, Service], found)


@pytest.fixture(scope="module")
def collector_config(services: dict[str, Service]) -> dict[str, Any]:
    return _collector_config(services["otel-collector"])
