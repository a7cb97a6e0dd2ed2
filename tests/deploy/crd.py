"""Custom resources checked without a cluster: against the ``openAPIV3Schema`` of their
CustomResourceDefinition (KEDA's, vendored in tests/deploy/keda), which kubernetes-validate
does not know."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, cast

import jsonschema
import yaml

__all__ = ["CRD_DIR", "crd_problems", "crd_schemas", "strict"]

CRD_DIR = Path(__file__).resolve().parent / "keda"


def strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown fields refused wherever it lists fields and does not keep
    unknown ones (the API server prunes them silently; a typo would just vanish)."""
    schema = copy.deepcopy(schema)

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if (
                "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(schema)
    return schema


def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> strict schema of each served version of the vendored CRDs."""
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = cast(dict[str, Any], yaml.safe_load(path.read_text()))
        spec = crd["spec"]
        for version in spec["versions"]:
            if version.get("served"):
                key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                schemas[key] = strict(version["schema"]["openAPIV3Schema"])
    return schemas


def crd_problems(obj: dict[str, Any], schemas: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """What the CRD's schema refuses in ``obj`` (its kind unknown is a problem too)."""
    schema = schemas.get((obj.get("apiVersion", ""), obj.get("kind", "")))
    if schema is None:
        return [f"no CRD for {obj.get('apiVersion')} {obj.get('kind')}"]
    validator = jsonschema.Draft7Validator(schema)
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in validator.iter_errors(obj)
    ]
