"""Do two retrieval embedders rank a claim's evidence the same way, and at what cost?

The judge asks NLI about each claim's top-ranked evidence units first (and stops at the
first that entails it), so a cheaper embedder is only a saving if it ranks like the
shipped one. On the calibrate split (never the report split), this judges each answer up
to retrieval with each embedder and prints, against the first: how often a claim's top
unit is the same, how often it is among the other's candidates, the overlap of the top
four, and the seconds spent embedding.

    .venv/bin/python scripts/compare_embedders.py minilm-l6-v2-dq8 minilm-l3-embedder-dq8
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from numpy.typing import NDArray  # noqa: E402

from streamproc.config import Settings  # noqa: E402
from streamproc.contracts.events import AnswerEvent  # noqa: E402
from streamproc.evaluate.benchmark import default_data_files, load_items  # noqa: E402
from streamproc.judge.nli.judge import NliJudge  # noqa: E402
from streamproc.wiring import build_nli_judge  # noqa: E402

Ranking = dict[tuple[str, int], list[int]]


def rankings(model: str, events: Sequence[AnswerEvent], batch: int = 32) -> tuple[Ranking, float]:
    """Each checked claim's candidate units in rank order, and the embedding seconds."""
    base = Settings().judge
    inference = base.inference.model_copy(update={"embedding_model": model})
    judge = build_nli_judge(base.model_copy(update={"inference": inference, "calibrator": None}))
    assert isinstance(judge, NliJudge)
    embedder = judge._embedder
    embed = embedder.embed
    spent = [0.0]

    def timed(texts: Sequence[str]) -> NDArray[np.float32]:
        started = time.perf_counter()
        try:
            return embed(texts)
        finally:
            spent[0] += time.perf_counter() - started

    embedder.embed = timed  # type: ignore[method-assign]
    out: Ranking = {}
    for at in range(0, len(events), batch):
        part = events[at : at + batch]
        works = judge._claims_with_evidence(part, None)
        for event, work in zip(part, works, strict=True):
            for index, item in enumerate(work.claims):
                if item.candidates:
                    out[(event.answer_id, index)] = [c.unit for c in item.candidates]
    return out, spent[0]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("reference")
    parser.add_argument("others", nargs="+")
    parser.add_argument("--qa", type=int, default=200, help="HaluEval QA answers (all RAGTruth)")
    args = parser.parse_args(argv)
    items = load_items(default_data_files(), "calibrate")
    events = [i.case.event for i in items if i.task_type != "QA"]
    events += [i.case.event for i in items if i.task_type == "QA"][: args.qa]
    reference, spent = rankings(args.reference, events)
    print(f"{len(events)} calibrate-split answers, {len(reference)} claims ranked")
    print("| embedder | embed s | top unit same | top unit among candidates | top-4 overlap |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| {args.reference} | {spent:.2f} | 1.000 | 1.000 | 1.000 |")
    for model in args.others:
        ranked, spent = rankings(model, events)
        keys = [k for k in reference if k in ranked]
        same = np.mean([reference[k][0] == ranked[k][0] for k in keys])
        among = np.mean([reference[k][0] in ranked[k] for k in keys])
        overlap = np.mean(
            [len(set(reference[k][:4]) & set(ranked[k][:4])) / len(reference[k][:4]) for k in keys]
        )
        print(f"| {model} | {spent:.2f} | {same:.3f} | {among:.3f} | {overlap:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
