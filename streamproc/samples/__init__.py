"""Sample answer events shipped with the package (see README.md here for their sources).

A fresh clone has no ``../shared``: the demo and the tests read these files instead.
"""

from __future__ import annotations

from pathlib import Path

from streamproc.contracts.events import AnswerEvent

__all__ = [
    "AGENT_CASES",
    "RAGTRUTH",
    "SAMPLES_DIR",
    "SEED_LAB",
    "load_answers",
    "load_sample_answers",
]

SAMPLES_DIR = Path(__file__).resolve().parent
SEED_LAB = SAMPLES_DIR / "seed_lab.answers.jsonl"
RAGTRUTH = SAMPLES_DIR / "ragtruth.answers.jsonl"
AGENT_CASES = SAMPLES_DIR / "agent_cases.answers.jsonl"


def load_answers(path: Path) -> list[AnswerEvent]:
    """Every line of an AnswerEvent JSONL file, validated."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [AnswerEvent.model_validate_json(line) for line in lines if line.strip()]


def load_sample_answers() -> list[AnswerEvent]:
    """The agent answers over records and tool results first (what the demo's first
    screen shows), then the seed lab cases and the RAGTruth rows."""
    return load_answers(AGENT_CASES) + load_answers(SEED_LAB) + load_answers(RAGTRUTH)
