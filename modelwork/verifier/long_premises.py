"""Pairs with long premises: whole-document claims and leave-out negatives.

A verifier that only ever saw one- or two-sentence premises reads a composed premise (a
claim's best sentences together, ``streamproc.judge.nli.premises``) as noise. These pairs
teach it premises of 100-250 words:

- **FactCG document pairs** (``CG2C_doc``, Lei et al., NAACL 2025, MIT): a news passage
  against a multi-hop claim generated from its content graph, negatives made by removing
  one relation from the graph, so they read exactly like the positives.
- **Leave-out negatives** (MiniCheck's recipe, no language model): a faithful summary
  sentence against its composed premise with every sentence that supports it removed and
  the next-best sentences in their place. The claim still shares the topic and many words
  with what is left, but nothing there states it.

Both are filtered by the list of documents kept for measurement before they are read.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from modelwork.verifier.composed_premises import rank_units
from modelwork.verifier.pair_text import Pair, judge_units, word_coverage
from streamproc.evaluate.held_out import HeldOut
from streamproc.judge.nli.premises import compose_premise
from streamproc.judge.text.evidence import EvidenceUnit
from streamproc.judge.text.features import content_words
from streamproc.judge.text.sentences import split_sentences

__all__ = [
    "FACTCG_DOC",
    "LEFT_COVERAGE",
    "factcg_doc",
    "leave_out",
    "leave_out_premise",
    "supporting_sentences",
]

FACTCG_DOC = Path(__file__).parent / "data" / "factcg_cg2c_doc.jsonl.gz"
"""FactCG's ``data/training_stage2/CG2C_doc.json`` (commit 41f1854), gzipped, with its
licence beside it (``data/FACTCG_LICENSE``)."""

SUPPORT_SHARE = 0.25
"""A premise sentence supports a claim when it holds at least this share of the claim's
content words (and at least two of them)."""
LEFT_COVERAGE = 0.34
"""A leave-out premise may hold at most this share of the claim's content words: with
more, a paraphrase spread over the sentences left may still state it (read on pairs)."""


def factcg_doc(path: Path, held_out: HeldOut) -> Iterator[Pair]:
    """FactCG's document-claim pairs whose passage is not listed; grouped by passage."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            row: dict[str, Any] = json.loads(line)
            premise = str(row["text_a"]).strip()
            claims = [str(c).strip() for c in row["text_b"] if str(c).strip()]
            if not premise or not claims or not held_out.keep("FactCG CG2C_doc", [premise]):
                continue
            group = "factcg:" + hashlib.sha256(premise.encode()).hexdigest()[:12]
            label = int(row["orig_label"])
            for claim in claims:
                yield Pair(premise, claim, label, "factcg-doc", group)


def supporting_sentences(claim: str, sentences: Sequence[str]) -> set[int]:
    """Indices of the sentences that state part of ``claim``: each holds at least
    ``SUPPORT_SHARE`` of its content words, and at least two."""
    words = content_words(claim)
    if not words:
        return set()
    need = max(2.0, SUPPORT_SHARE * len(words))
    return {i for i, s in enumerate(sentences) if len(words & content_words(s)) >= need}


def leave_out_premise(claim: str, units: Sequence[EvidenceUnit]) -> str | None:
    """The claim's composed premise built from the units that hold no supporting
    sentence, or None when there is no support to remove, or when what is left still
    holds more than ``LEFT_COVERAGE`` of the claim's content words."""
    sentences = [u for u in units if not u.is_window and u.kind != "question"]
    support = supporting_sentences(claim, [u.text for u in sentences])
    if not support:
        return None
    removed = {(sentences[i].evidence_id, sentences[i].first) for i in support}
    kept = [
        u
        for u in units
        if u.kind != "question"
        and not any((u.evidence_id, n) in removed for n in range(u.first, u.last + 1))
    ]
    premise = compose_premise(kept, rank_units(claim, kept))
    if premise is None or word_coverage(claim, premise.text) > LEFT_COVERAGE:
        return None
    return premise.text


def leave_out(
    sample: Sequence[tuple[int, dict[str, Any]]], rng: random.Random, per_summary: int = 1
) -> Iterator[Pair]:
    """Up to ``per_summary`` leave-out negatives per HaluEval summary, from its faithful
    sentences of at least 6 words (kind ``sum-leave-out``)."""
    for number, source in sample:
        units = judge_units(None, [source["document"]], record=False)
        right = source["right_summary"]
        claims = [
            right[s:e].strip() for s, e in split_sentences(right) if len(right[s:e].split()) >= 6
        ]
        made = 0
        for claim in rng.sample(claims, len(claims)):
            premise = leave_out_premise(claim, units)
            if premise is not None:
                yield Pair(premise, claim, 0, "sum-leave-out", f"sum:{number}")
                made += 1
                if made >= per_summary:
                    break
