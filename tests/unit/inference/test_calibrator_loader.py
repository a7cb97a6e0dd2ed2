"""The answer calibrator's loader: hard-only regimes read from the hashed weights and
checked against the manifest; refits chosen by name only, never by 'auto'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamproc.inference.calibrator_loader import (
    ANSWER_KIND,
    load_answer_calibrator,
    resolve_answer_calibrator,
)
from streamproc.inference.registry import sha256_of
from streamproc.judge.decision.answer import ANSWER_FEATURES
from streamproc.judge.decision.calibrator import REGIMES, CalibratorError


def write(
    models: Path, name: str, *, weights_hard_only: list[str], manifest_hard_only: list[str],
    auto: bool = True,
) -> None:  # fmt: skip
    part = {"mean": [0, 0], "scale": [1, 1], "coef": [1, 0], "intercept": 0, "threshold": 0.3}
    payload = {
        "name": name,
        "features": list(ANSWER_FEATURES),
        "claim_calibrator": "claims-v1",
        "regimes": {r: part for r in REGIMES},
        "hard_only_regimes": weights_hard_only,
    }
    data = json.dumps(payload).encode()
    folder = models / "calibrators"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_bytes(data)
    (folder / f"{name}.toml").write_text(
        f'name = "{name}"\nkind = "{ANSWER_KIND}"\nclaim_calibrator = "claims-v1"\n'
        f"hard_only_regimes = {json.dumps(manifest_hard_only)}\nauto = {str(auto).lower()}\n"
        f'[weights]\npath = "{name}.json"\nsha256 = "{sha256_of(data)}"\n'
    )


def test_hard_only_regimes_load_from_the_weights(tmp_path: Path) -> None:
    write(tmp_path, "a-v1", weights_hard_only=["task"], manifest_hard_only=["task"])
    assert load_answer_calibrator("a-v1", tmp_path).hard_only == frozenset({"task"})


def test_a_manifest_listing_other_hard_only_regimes_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "a-v1", weights_hard_only=["task"], manifest_hard_only=[])
    with pytest.raises(CalibratorError, match="other hard-only regimes"):
        load_answer_calibrator("a-v1", tmp_path)


def test_an_unknown_hard_only_regime_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "a-v1", weights_hard_only=["summary"], manifest_hard_only=["summary"])
    with pytest.raises(CalibratorError, match="hard_only_regimes"):
        load_answer_calibrator("a-v1", tmp_path)


def test_auto_skips_a_calibrator_that_asks_to_be_chosen_by_name(tmp_path: Path) -> None:
    write(tmp_path, "a-v1", weights_hard_only=[], manifest_hard_only=[])
    write(tmp_path, "a-v2", weights_hard_only=[], manifest_hard_only=[], auto=False)
    assert resolve_answer_calibrator("auto", "claims-v1", tmp_path) == "a-v1"
    assert resolve_answer_calibrator("a-v2", "claims-v1", tmp_path) == "a-v2"
