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
from streamproc.judge.decision.answer import AnswerCalibrator
from streamproc.judge.decision.calibrator import CalibratorError, VerdictCalibrator

__all__ = [
    "ANSWER_KIND",
    "AUTO",
    "CALIBRATORS_FOLDER",
    "answer_calibrator_source",
    "calibrator_manifest",
    "calibrators_folder",
    "load_answer_calibrator",
    "load_calibrator",
    "resolve_answer_calibrator",
]

CALIBRATORS_FOLDER = "calibrators"
ANSWER_KIND = "answer_logistic_regression_per_regime"
"""The manifest ``kind`` of an answer calibrator (``modelwork/train_answer_calibrator.py``)."""


def calibrators_folder(models_dir: Path | None = None) -> Path:
    """Where calibrators (claim and answer) and their manifests are kept."""
    return (models_dir if models_dir is not None else default_models_dir()) / CALIBRATORS_FOLDER


_folder = calibrators_folder


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


AUTO = "auto"
"""``answer_calibrator`` setting: the one fitted on the configured claim calibrator."""


def resolve_answer_calibrator(
    setting: str | None, claim_calibrator: str | None, models_dir: Path | None = None
) -> str | None:
    """The answer calibrator a judge runs with: none without a claim calibrator or when
    ``setting`` is empty; for ``auto`` the newest answer calibrator whose manifest names
    ``claim_calibrator`` (none if there is none, so choosing another claim calibrator
    never needs a second setting) and that does not say ``auto = false`` (a refit on one
    deployment's labels, ``streamproc calibrate --from-labels``, is chosen by name);
    otherwise ``setting`` itself (checked at load)."""
    if not claim_calibrator or not setting:
        return None
    if setting != AUTO:
        return setting
    fitted = []
    for manifest in sorted(_folder(models_dir).glob("*.toml")):
        with manifest.open("rb") as handle:
            data = tomllib.load(handle)
        if (
            data.get("kind") == ANSWER_KIND
            and data.get("claim_calibrator") == claim_calibrator
            and data.get("auto", True)
        ):
            fitted.append(manifest.stem)
    return fitted[-1] if fitted else None


def answer_calibrator_source(
    name: str, models_dir: Path | None = None
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Manifest, weights payload and sha256 of answer calibrator ``name``: what a refit
    (``streamproc calibrate --from-labels``) starts from."""
    return _checked_weights(name, models_dir)


def load_answer_calibrator(name: str, models_dir: Path | None = None) -> AnswerCalibrator:
    """Answer calibrator ``name`` (same folder and manifest shape as the claim ones);
    the hard-only regimes its weights name must be those its manifest lists."""
    manifest, payload, sha256 = _checked_weights(name, models_dir)
    calibrator = AnswerCalibrator.from_payload(payload, sha256=sha256)
    listed = manifest.get("hard_only_regimes", [])
    if set(map(str, listed)) != calibrator.hard_only:
        raise CalibratorError(
            f"answer calibrator {name!r}: manifest and weights list other hard-only regimes"
        )
    return calibrator


def load_calibrator(name: str, models_dir: Path | None = None) -> VerdictCalibrator:
    """Calibrator ``name``, its weights checked against the manifest's sha256."""
    manifest, payload, actual = _checked_weights(name, models_dir)
    calibrator = VerdictCalibrator.from_payload(payload, sha256=actual)
    if list(calibrator.features) != list(manifest.get("features", calibrator.features)):
        raise CalibratorError(f"calibrator {name!r}: manifest and weights list other features")
    return calibrator
