"""Read a verdict calibrator from ``models/calibrators/``: manifest, sha256, weights.

The manifest (``<name>.toml``) says what the calibrator was trained on, under which
licences, on which split, with which metrics, and pins the sha256 of its weights file
(``<name>.json``). The weights are refused when the hash differs, as model files are.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from streamproc.inference.registry import ModelIntegrityError, default_models_dir, sha256_of
from streamproc.judge.answer_decision import AnswerCalibrator
from streamproc.judge.calibrator import CalibratorError, VerdictCalibrator

__all__ = [
    "CALIBRATORS_FOLDER",
    "calibrator_manifest",
    "load_answer_calibrator",
    "load_calibrator",
]

CALIBRATORS_FOLDER = "calibrators"


def _folder(models_dir: Path | None) -> Path:
    return (models_dir if models_dir is not None else default_models_dir()) / CALIBRATORS_FOLDER


def calibrator_manifest(name: str, models_dir: Path | None = None) -> dict[str, Any]:
    """The parsed manifest of calibrator ``name``."""
    path = _folder(models_dir) / f"{name}.toml"
    if "/" in name or not path.is_file():
        raise CalibratorError(f"no calibrator manifest {name!r} at {path}")
    with path.open("rb") as handle:
        return tomllib.load(handle)


def _checked_weights(
    name: str, models_dir: Path | None
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Manifest, parsed weights and their sha256, refused when the hash differs."""
    manifest = calibrator_manifest(name, models_dir)
    try:
        weights = _folder(models_dir) / str(manifest["weights"]["path"])
        expected = str(manifest["weights"]["sha256"])
    except KeyError as error:
        raise CalibratorError(f"calibrator manifest {name!r} lacks {error}") from None
    data = weights.read_bytes()
    actual = sha256_of(data)
    if actual != expected:
        raise ModelIntegrityError(weights, expected, actual)
    return manifest, json.loads(data), actual


def load_answer_calibrator(name: str, models_dir: Path | None = None) -> AnswerCalibrator:
    """Answer calibrator ``name`` (same folder and manifest shape as the claim ones)."""
    _, payload, sha256 = _checked_weights(name, models_dir)
    return AnswerCalibrator.from_payload(payload, sha256=sha256)


def load_calibrator(name: str, models_dir: Path | None = None) -> VerdictCalibrator:
    """Calibrator ``name``, its weights checked against the manifest's sha256."""
    manifest, payload, actual = _checked_weights(name, models_dir)
    calibrator = VerdictCalibrator.from_payload(payload, sha256=actual)
    if list(calibrator.features) != list(manifest.get("features", calibrator.features)):
        raise CalibratorError(f"calibrator {name!r}: manifest and weights list other features")
    return calibrator
