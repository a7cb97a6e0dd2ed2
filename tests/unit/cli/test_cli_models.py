"""A model that is missing or altered is one clear line and exit code 2 from every
command that loads the judge - the worker included, with its judge in its own process -
never a traceback."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from streamproc.cli.main import EXIT_MODEL_MISSING, main
from streamproc.inference.registry import ModelIntegrityError


def test_eval_with_no_models_says_what_is_missing_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STREAMPROC_JUDGE__INFERENCE__MODELS_DIR", str(tmp_path))
    assert main(["eval", "agree", "--judge", "nli"]) == EXIT_MODEL_MISSING
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "bge-small-verifier-v1-int8" in err and "MODELS_DIR" in err and str(tmp_path) in err


def test_an_answer_calibrator_over_another_claim_calibrator_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STREAMPROC_JUDGE__CALIBRATOR", "verdict-calibrator-verifier-v10")
    monkeypatch.setenv("STREAMPROC_JUDGE__ANSWER_CALIBRATOR", "answer-calibrator-v11")
    assert main(["eval", "agree", "--judge", "nli"]) == EXIT_MODEL_MISSING
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "answer-calibrator-v11" in err and "verdict-calibrator-verifier-v10" in err


def worker_start_failure(env: dict[str, str], cwd: Path | None = None) -> tuple[str, str]:
    """Start ``streamproc worker`` with ``env`` against a broker nobody listens on; it must
    fail on its models with one ``streamproc:`` line and no traceback: that line, and all of
    stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "streamproc", "worker"],
        cwd=cwd,
        env={**env, "STREAMPROC_BROKER_URL": "kafka://127.0.0.1:1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == EXIT_MODEL_MISSING, done.stderr
    assert "Traceback" not in done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("streamproc:")]
    return line, done.stderr


def test_the_worker_fails_fast_on_a_missing_model_before_any_broker(tmp_path: Path) -> None:
    line, stderr = worker_start_failure({"STREAMPROC_JUDGE__INFERENCE__MODELS_DIR": str(tmp_path)})
    assert "bge-small-verifier-v1-int8" in line and "MODELS_DIR" in line
    assert "broker_connecting" not in stderr  # the model is checked before any broker


def test_an_integrity_error_crosses_a_process_boundary_whole() -> None:
    error = ModelIntegrityError(Path("/m/model.onnx"), "a" * 64, "b" * 64)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.path, copy.expected, copy.actual, str(copy)) == (
        error.path,
        error.expected,
        error.actual,
        str(error),
    )
