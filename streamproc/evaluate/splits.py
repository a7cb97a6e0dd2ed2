"""The fixed calibration / report split of the labelled dev files.

Thresholds are tuned on ``calibrate`` and numbers are quoted on ``report`` only, so no
number is measured on the rows it was tuned on (``data/README.md`` asks for exactly
that). The split is a pure function of the row id - no seed, no file order, no content -
so every tool, every machine and every later run puts a row in the same half, and a row
added to a file later never moves the others.

HaluEval QA stores each question twice (``halueval-qa-<n>-right`` and
``halueval-qa-<n>-hallucinated``): both answers share the question's passage, so the two
are hashed by the question (``halueval-qa-<n>``) and always land in the same half.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final, Literal

__all__ = ["CALIBRATE_PERCENT", "SPLIT_DESCRIPTION", "Split", "split_key", "split_of"]

Split = Literal["calibrate", "report"]

CALIBRATE_PERCENT: Final = 40
"""Groups whose hash bucket (0-99) is below this go to ``calibrate``."""

# "halueval-qa-8-right" / "halueval-qa-8-hallucinated" -> "halueval-qa-8"
_HALUEVAL_PAIR = re.compile(r"^(halueval-qa-\d+)-(?:right|hallucinated)$")
# "agent-refund-03-faithful" / "agent-refund-03-hallucinated" -> "agent-refund-03"
_AGENT_PAIR = re.compile(r"^(agent-[a-z_]+-\d+)-(?:faithful|hallucinated)$")

SPLIT_DESCRIPTION: Final = (
    "Calibration vs report split (`streamproc/evaluate/splits.py`): a row's group key is "
    "its `id`, except HaluEval QA, where both answers of one question "
    "(`halueval-qa-<n>-right`, `halueval-qa-<n>-hallucinated`) share the key "
    "`halueval-qa-<n>` and so stay together, as do the two answers of one agent case "
    "(`agent-<kind>-<n>-faithful`, `agent-<kind>-<n>-hallucinated`: key `agent-<kind>-<n>`). "
    "bucket = int(sha256(key as UTF-8)) mod 100; "
    f"bucket < {CALIBRATE_PERCENT} -> `calibrate` (tune thresholds here), otherwise "
    "`report` (quote numbers here only). Deterministic, seedless and independent of file "
    "order and content; not stratified, so the per-task and per-label counts of each half "
    "are reported next to every number. RAGTruth rows are split by response id: responses "
    "of different LLMs to the same source document can fall in different halves (the "
    "document, never the labelled answer, is shared)."
)


def split_key(row_id: str) -> str:
    """The id that decides the split: the question for HaluEval QA, the case for the
    agent set (both answers share its evidence), else the row id."""
    match = _HALUEVAL_PAIR.match(row_id) or _AGENT_PAIR.match(row_id)
    return match.group(1) if match else row_id


def _bucket(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest(), "big") % 100


def split_of(row_id: str) -> Split:
    """``calibrate`` for about 40 % of groups, ``report`` for the rest; fixed forever."""
    return "calibrate" if _bucket(split_key(row_id)) < CALIBRATE_PERCENT else "report"
