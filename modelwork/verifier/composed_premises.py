"""Pairs whose premise is a composed premise, the shape the judge also asks about.

The judge also asks the verifier about a claim against the sentences of its top-ranked
units read together (``streamproc.judge.nli.premises.compose_premise``). These pairs teach
the model that premise shape: abstractive sentences that fuse several evidence
sentences (positives the single-unit pairs must drop), and fusions with one fact
changed (negatives that still share nearly every word with the premise). Kept apart
because they follow the judge's premise composition, not any one data source.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from modelwork.verifier.pair_sources import document_key, labelled_sentences, training_rows
from modelwork.verifier.pair_text import Pair, judge_units, word_coverage
from modelwork.verifier.perturbations import (
    Perturbation,
    negate,
    swap_date,
    swap_entity,
    swap_number,
)
from streamproc.evaluate.held_out import HeldOut
from streamproc.judge.nli.premises import ComposedPremise, compose_premise
from streamproc.judge.text.evidence import EvidenceUnit
from streamproc.judge.text.features import content_words, word_set
from streamproc.judge.text.sentences import split_sentences

__all__ = [
    "COMPOSED_TOP",
    "composed_pairs",
    "fusions",
    "ragtruth_composed",
    "rank_units",
    "summary_composed",
]

COMPOSED_TOP = 4  # the judge's top_k: units a claim's composed premise is built from
_FUSION_PERTURBATIONS: dict[str, Perturbation] = {
    "number": swap_number,
    "date": swap_date,
    "entity": swap_entity,
    "negation": negate,
}
# A second sentence starting with one of these is lower-cased when fused after a comma;
# any other first word (a name, "I", an acronym) keeps its case.
_LOWER_FIRST = word_set(
    "the a an this that these those there it its he she they his her their we our "
    "in on at after before during since by for with from as when while but however "
    "some many most all both each one two three several no"
)


def rank_units(claim: str, units: Sequence[EvidenceUnit], top: int = COMPOSED_TOP) -> list[int]:
    """Indices of the ``top`` units covering most of the claim's content words, best
    first (ties: the shorter unit, then document order) - the judge's ranking without
    its embedder."""
    words = content_words(claim)
    if not words:
        return []
    scored = [
        (-len(words & content_words(u.text)) / len(words), len(u.text), index)
        for index, u in enumerate(units)
    ]
    return [index for *_, index in sorted(scored)[:top]]


def _composed(claim: str, units: Sequence[EvidenceUnit]) -> ComposedPremise | None:
    """The claim's composed premise, built the way the judge builds it."""
    return compose_premise(units, rank_units(claim, units))


def summary_composed(
    sample: Sequence[tuple[int, dict[str, Any]]], rng: random.Random, positives: int = 2
) -> Iterator[Pair]:
    """HaluEval summaries against composed premises. Positives: faithful sentences of >= 4
    words, ``positives`` of them per summary drawn at random (all would outnumber the
    negatives three to one). Negatives: of the hallucinated summary's sentences that the
    faithful one does not contain, the least covered by its premise, and the second least
    covered too when its premise covers under half of its content words."""
    for number, source in sample:
        group = f"sum:{number}"
        units = judge_units(None, [source["document"]], record=False)
        right = source["right_summary"]
        faithful: list[Pair] = []
        for s, e in split_sentences(right):
            text = right[s:e].strip()
            premise = _composed(text, units) if len(text.split()) >= 4 else None
            if premise is not None:
                faithful.append(Pair(premise.text, text, 1, "sum-composed", group))
        chosen = sorted(rng.sample(range(len(faithful)), min(positives, len(faithful))))
        yield from (faithful[i] for i in chosen)
        said = {right[s:e].strip() for s, e in split_sentences(right)}
        wrong = source["hallucinated_summary"]
        scored: list[tuple[float, int, str, str]] = []
        for position, (s, e) in enumerate(split_sentences(wrong)):
            text = wrong[s:e].strip()
            if len(text.split()) < 4 or text in said:
                continue
            premise = _composed(text, units)
            if premise is not None:
                scored.append((word_coverage(text, premise.text), position, premise.text, text))
        scored.sort()
        for rank, (coverage, _, premise_text, text) in enumerate(scored[:2]):
            if rank == 0 or coverage < 0.5:
                yield Pair(premise_text, text, 0, "sum-composed", group)


def ragtruth_composed(path: Path, held_out: HeldOut) -> Iterator[Pair]:
    """RAGTruth Summary and Data2txt answers (calibrate rows), each sentence of >= 4
    words against its composed premise; negative iff it overlaps a labelled span."""
    kinds = {"Summary": "rt-composed", "Data2txt": "rt-d2t-composed"}
    for row in training_rows(path, held_out, "RAGTruth answers (composed)"):
        if row["task_type"] not in kinds:
            continue
        record = row["task_type"] == "Data2txt"
        units = judge_units(row.get("question"), row["evidence"], record)
        for text, label in labelled_sentences(row):
            premise = _composed(text, units)
            if premise is not None:
                yield Pair(premise.text, text, label, kinds[row["task_type"]], document_key(row))


def _fuse(first: str, second: str, joiner: str, common: frozenset[str]) -> str | None:
    """Two sentences as one: "A, and b." / "A; b." (the first's final period dropped; the
    second's first word lower-cased when it is a function word or a word the document
    also writes in lower case - a name keeps its capital)."""
    if not (first.endswith(".") and second.endswith(".")):
        return None
    head, tail = first[:-1].rstrip(), second[:-1].rstrip()
    word, _, rest = tail.partition(" ")
    bare = word.rstrip(",;:")
    if word == word.capitalize() and (bare.lower() in _LOWER_FIRST or bare.lower() in common):
        tail = f"{word.lower()} {rest}" if rest else word.lower()
    return f"{head}{joiner}{tail}."


def _fusion_premise(
    fused: str, parts: tuple[str, str], units: Sequence[EvidenceUnit]
) -> str | None:
    """The fusion's composed premise (the judge's top units; one or two more when those
    come to only the two fused sentences), or None when it lacks either sentence."""
    ranked = rank_units(fused, units, top=len(units))
    premise = None
    for top in range(COMPOSED_TOP, COMPOSED_TOP + 3):
        premise = compose_premise(units, ranked[:top])
        if premise is not None and premise.sentences >= 3:
            break
    if premise is None or premise.sentences < 3 or not all(p in premise.text for p in parts):
        return None
    return premise.text


def _fusable(sentence: str) -> bool:
    """A plain sentence of 6-30 words ending in a period: no quotation (a fused quote
    would open in one sentence and close in the other)."""
    return (
        6 <= len(sentence.split()) <= 30
        and sentence.endswith(".")
        and sentence[0] not in "'\u2018\u2019"
        and not (set(sentence) & set('"\u201c\u201d\u2018'))
    )


def fusions(
    group: str, units: Sequence[EvidenceUnit], rng: random.Random, count: int
) -> Iterator[Pair]:
    """Up to ``count`` fusions of two sentences of one evidence item (adjacent, or one
    apart) against a composed premise holding both and at least one more sentence: the
    fusion is a positive (``syn-fusion``); the same fusion with one fact changed in one
    half - a number, date, name or negation - a negative (``syn-fusion-swap``)."""
    sentences = {
        (u.evidence_id, u.first): u.text for u in units if not u.is_window and u.kind != "question"
    }
    doc = list(sentences.values())
    common = frozenset(w for t in doc for w in re.findall(r"\b[a-z][a-z'-]*\b", t))
    candidates = [
        (a, b)
        for (item, n), a in sentences.items()
        for gap in (1, 2)
        if (b := sentences.get((item, n + gap))) is not None and _fusable(a) and _fusable(b)
    ]
    for a, b in rng.sample(candidates, min(count, len(candidates))):
        joiner = rng.choice([", and ", "; "])
        fused = _fuse(a, b, joiner, common)
        if fused is None or len(fused.split()) > 50:
            continue
        premise = _fusion_premise(fused, (a, b), units)
        if premise is None:
            continue
        yield Pair(premise, fused, 1, "syn-fusion", group)
        swapped = _swap_one_fact((a, b), joiner, rng, doc, common)
        if swapped is not None and swapped != fused:
            yield Pair(premise, swapped, 0, "syn-fusion-swap", group)


def _swap_one_fact(
    parts: tuple[str, str],
    joiner: str,
    rng: random.Random,
    doc: Sequence[str],
    common: frozenset[str],
) -> str | None:
    """The fusion of ``parts`` with exactly one fact of one half changed."""
    for half in rng.sample([0, 1], 2):
        for name in rng.sample(list(_FUSION_PERTURBATIONS), len(_FUSION_PERTURBATIONS)):
            changed = _FUSION_PERTURBATIONS[name](parts[half], rng, doc)
            if changed and changed != parts[half]:
                new = (changed, parts[1]) if half == 0 else (parts[0], changed)
                fused = _fuse(*new, joiner, common)
                if fused is not None:
                    return fused
    return None


def composed_pairs(
    halueval_qa_path: Path,
    ragtruth_path: Path,
    sample: Sequence[tuple[int, dict[str, Any]]],
    seed: int,
    held_out: HeldOut,
) -> Iterator[Pair]:
    """Every composed-premise pair, from the sources ``pairs.build_pairs`` reads (the
    same summaries, calibrate rows only, less listed documents); its own seeded
    generator, so adding them leaves the other pairs exactly as they were."""
    rng = random.Random(f"{seed}:composed")
    yield from summary_composed(sample, rng)
    yield from ragtruth_composed(ragtruth_path, held_out)
    for number, source in sample:
        units = judge_units(None, [source["document"]], record=False)
        yield from fusions(f"sum:{number}", units, rng, 1)
    seen: set[str] = set()
    for row in training_rows(ragtruth_path, held_out, "RAGTruth documents (fusions)"):
        if row["task_type"] != "Summary":
            continue
        doc_key = document_key(row)
        if doc_key not in seen:
            seen.add(doc_key)
            units = judge_units(row.get("question"), row["evidence"], record=False)
            yield from fusions(doc_key, units, rng, 3)
    seen.clear()
    for row in training_rows(halueval_qa_path, held_out, "HaluEval QA passages (fusions)"):
        group = "qa:" + row["id"].rsplit("-", 1)[0]
        if group in seen:
            continue
        seen.add(group)
        units = judge_units(None, row["evidence"], record=False)
        yield from fusions(group, units, rng, 1)
