"""What a judge shortcut saves and what it changes, on one split of the labelled data.

Judges the same answers twice in one process - with the judge settings as configured
plus ``--base`` overrides, then plus ``--variant`` overrides - and prints, for each, the
NLI pairs scored and the texts embedded (embedding cache off, so every text counts),
then how many claim verdicts and answer outcomes differ between the two and how the
calibrator's risk moved. The accuracy itself comes from ``streamproc eval benchmark``
with the same settings as environment variables; this script says *why* it moved.

    .venv/bin/python scripts/shortcut_effect.py --split report \\
        --base '{"decisive_entailment": null}' --variant '{"decisive_entailment": 0.5}'
    .venv/bin/python scripts/shortcut_effect.py --split calibrate \\
        --variant '{"shortlist_sentences": 8}'
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from streamproc.config import Settings  # noqa: E402
from streamproc.evaluate.benchmark import default_data_files, load_items  # noqa: E402
from streamproc.inference.options import JudgeSettings  # noqa: E402
from streamproc.judge.protocols import TextEmbedder  # noqa: E402
from streamproc.wiring import build_nli_judge  # noqa: E402

Outcome = tuple[bool, list[tuple[str, float | None]]]


class _CountingEmbedder:
    """Counts the texts the judge sends to the embedder."""

    def __init__(self, inner: TextEmbedder) -> None:
        self._inner = inner
        self.model_name = inner.model_name
        self.sha256 = inner.sha256
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.texts += len(texts)
        return self._inner.embed(texts)


def _settings(overrides: dict[str, Any]) -> JudgeSettings:
    judge = Settings().judge
    inference = judge.inference.model_copy(update={"embedding_cache_entries": 0})
    merged = {**judge.model_dump(), "inference": inference.model_dump(), **overrides}
    return JudgeSettings.model_validate(merged)


def run(overrides: dict[str, Any], split: str) -> tuple[dict[str, Outcome], int, int]:
    """Outcomes by answer id, NLI pairs scored and texts embedded."""
    judge = build_nli_judge(_settings(overrides))
    counter = _CountingEmbedder(judge._embedder)  # a measuring script: count what it sends
    judge._embedder = counter
    items = load_items(default_data_files(), split)  # type: ignore[arg-type]
    batch = Settings().worker.batch_max
    outcomes: dict[str, Outcome] = {}
    for at in range(0, len(items), batch):
        events = [item.case.event for item in items[at : at + batch]]
        for event, judged in zip(events, judge.judge_batch(events), strict=True):
            claims = [(str(c.verdict), c.risk) for c in judged.claims]
            outcomes[event.answer_id] = (judged.hallucinated, claims)
    return outcomes, judge.pairs_scored, counter.texts


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--split", choices=("calibrate", "report"), default="report")
    parser.add_argument("--base", default="{}", help="judge settings overrides (JSON)")
    parser.add_argument("--variant", required=True, help="judge settings overrides (JSON)")
    args = parser.parse_args()
    base, base_pairs, base_texts = run(json.loads(args.base), args.split)
    variant, pairs, texts = run(json.loads(args.variant), args.split)
    claims = verdicts = answers = 0
    shifts = []
    for answer_id, (hallucinated, before) in base.items():
        flagged, after = variant[answer_id]
        answers += hallucinated != flagged
        for (verdict, risk), (new_verdict, new_risk) in zip(before, after, strict=True):
            claims += 1
            verdicts += verdict != new_verdict
            if risk is not None and new_risk is not None and risk != new_risk:
                shifts.append(new_risk - risk)
    print(f"split {args.split}: {len(base)} answers, {claims} claims")
    print(f"base    {args.base}: {base_pairs:,} NLI pairs, {base_texts:,} texts embedded")
    print(
        f"variant {args.variant}: {pairs:,} NLI pairs ({pairs / max(base_pairs, 1):.2f}x), "
        f"{texts:,} texts embedded ({texts / max(base_texts, 1):.2f}x)"
    )
    print(
        f"claim verdicts changed: {verdicts}; answers whose hallucinated flag changed: "
        f"{answers}; risks moved: {len(shifts)} (median shift "
        f"{statistics.median(shifts) if shifts else 0.0:+.4f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
