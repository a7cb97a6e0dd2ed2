"""What the evidence-embedding cache saves: embedding time of the benchmark's sample,
without the cache, with a cold cache, and with a warm one (the same evidence again, as
when many questions hit the same retrieved documents).

    .venv/bin/python -m bench embedding-cache [--per-task 20] [--runs 3]

Embedding only (no NLI): the judge embeds every evidence sentence of a batch once and
each checked claim, so these are the texts measured. Medians over runs, each run with a
fresh cache.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

from bench.judge import sample_events
from streamproc.config import Settings
from streamproc.inference.embedding_cache import CachedEmbedder
from streamproc.inference.loader import load_embedder
from streamproc.judge.protocols import TextEmbedder
from streamproc.judge.text.claims import decompose
from streamproc.judge.text.evidence import build_units


def _texts(per_task: int) -> list[list[str]]:
    """Per answer: its evidence units' texts and its checked claims, as the judge embeds."""
    events, _ = sample_events(None, per_task)
    settings = Settings().judge
    out = []
    for event in events:
        units = [u.text for u in build_units(event.question, event.evidence, 1)]
        shape = decompose(event.answer, event.evidence, settings.granularity)
        out.append(units + [c.text for c in shape.claims if c.checked])
    return out


def _embed_all(embedder: TextEmbedder, answers: Sequence[list[str]], batch: int) -> float:
    started = time.perf_counter()
    for at in range(0, len(answers), batch):
        texts = [t for answer in answers[at : at + batch] for t in answer]
        embedder.embed(list(dict.fromkeys(texts)))
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench embedding-cache", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--per-task", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    answers = _texts(args.per_task)
    settings = Settings()
    inner = load_embedder(settings.judge.inference)
    batch = settings.worker.batch_max
    plain, cold, warm, hits = [], [], [], []
    for _ in range(args.runs):
        plain.append(_embed_all(inner, answers, batch))
        cached = CachedEmbedder(inner)
        cold.append(_embed_all(cached, answers, batch))
        hits.append(cached.hits / max(1, cached.hits + cached.misses))
        warm.append(_embed_all(cached, answers, batch))
    texts = sum(len(a) for a in answers)
    print(f"{len(answers)} answers, {texts} texts (evidence units and claims), batches of {batch}")
    print("| embedding | seconds (median) | texts/s |")
    print("| --- | --- | --- |")
    for name, runs in (("no cache", plain), ("cold cache", cold), ("warm cache", warm)):
        seconds = statistics.median(runs)
        print(f"| {name} | {seconds:.2f} | {texts / seconds:,.0f} |")
    print(f"cold-cache hit rate (evidence shared within the sample): {statistics.median(hits):.0%}")
    return 0
