"""The pure pieces of ``python -m bench cost``: how the judge's cost grows with the
shape of an answer.

The benchmark judges controlled variants of real answers, so that one thing changes at a
time. Definitions the report relies on:

* evidence sentences: the judge's own sentence units of an answer's evidence (prose split
  by its sentence splitter, records as one "field: value" line per value), the question
  and the sliding windows not counted (:func:`evidence_sentences`);
* checked claims: the claims :func:`~streamproc.judge.text.claims.decompose` marks checked,
  at the judge's granularity (:func:`checked_claims`);
* an evidence-length variant (:func:`pad_evidence`) keeps the answer, its question and its
  own evidence items, and adds one passage item of real sentences from *other* answers'
  evidence, one per line, until the evidence holds exactly the requested number of
  sentences. Each answer's padding is its own share of a seeded shuffle of the pool
  (:func:`padding_pools`: no two answers share a padding sentence, since the judge embeds
  a text once per batch); a longer variant extends a shorter one, so only the evidence
  grows;
* a claims variant (:func:`with_claims`) is the answer's own sentences in order, then the
  sentences of other answers, answer by answer in a seeded shuffle, one per line, each
  added only while it fits, until exactly the requested number of checked claims; every
  answer a sentence came from brings its whole evidence (ids suffixed ``@k`` so they
  stay unique), so each claim keeps what grounds it - and the evidence grows with the
  claims (:func:`cost_fit` separates the two).

Cost is counted in cores: a worker that must judge ``r`` answers/s at ``c`` CPU seconds
per answer keeps ``r * c`` cores busy (:func:`cores_per_100`).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import numpy as np
from numpy.typing import NDArray

from streamproc.contracts.events import AnswerEvent, EvidenceItem, EvidenceKind
from streamproc.judge import TextEmbedder
from streamproc.judge.text.claims import Granularity, decompose
from streamproc.judge.text.evidence import build_units

__all__ = [
    "PAD_ID",
    "TRAFFIC_TASKS",
    "Axis",
    "CountingEmbedder",
    "Traffic",
    "Variant",
    "VariantResult",
    "checked_claims",
    "claims_variants",
    "cores_per_100",
    "cost_fit",
    "evidence_sentences",
    "evidence_variants",
    "linear_fit",
    "median_of",
    "pad_evidence",
    "padding_pools",
    "render_markdown",
    "select_traffic",
    "sentence_pool",
    "with_claims",
]

Traffic = Literal["QA-like", "RAGTruth-like"]
Axis = Literal["as sent", "evidence", "claims"]

TRAFFIC_TASKS: Final[Mapping[Traffic, tuple[str, ...]]] = {
    "QA-like": ("QA",),
    "RAGTruth-like": ("Summary", "Data2txt"),
}
"""Which benchmark task types make up each kind of traffic."""

PAD_ID: Final = "pad"
"""Id of the evidence item an evidence-length variant adds (``pad``, ``pad-2``, ...)."""


# ------------------------------------------------------------------------------ shapes


def evidence_sentences(event: AnswerEvent) -> list[str]:
    """The sentence units the judge builds from the answer's evidence, in order: what
    it embeds and ranks (windows are means of these; the question is not evidence)."""
    units = build_units(None, event.evidence, 1)
    return [u.text for u in units if not u.is_window]


def checked_claims(event: AnswerEvent, granularity: Granularity) -> list[str]:
    """The texts of the answer's checked claims, in order."""
    shape = decompose(event.answer, event.evidence, granularity)
    return [c.text for c in shape.claims if c.checked]


def _stable(sentence: str) -> bool:
    """A sentence the judge reads back as itself, alone on a line: padding made of
    these holds exactly as many sentences as lines."""
    item = EvidenceItem(id="probe", text=sentence)
    return [u.text for u in build_units(None, [item], 1)] == [sentence]


def sentence_pool(events: Sequence[AnswerEvent]) -> list[tuple[str, str]]:
    """(answer_id, sentence) for every distinct evidence sentence of ``events`` that reads
    back as itself, in order: what evidence-length variants are padded from."""
    seen: set[str] = set()
    pool: list[tuple[str, str]] = []
    for event in events:
        for sentence in evidence_sentences(event):
            if sentence not in seen and _stable(sentence):
                seen.add(sentence)
                pool.append((event.answer_id, sentence))
    return pool


def _free_id(event: AnswerEvent) -> str:
    taken = {item.id for item in event.evidence}
    candidates = (PAD_ID if n == 1 else f"{PAD_ID}-{n}" for n in range(1, len(taken) + 2))
    return next(c for c in candidates if c not in taken)


def padding_pools(
    events: Sequence[AnswerEvent],
    pool: Sequence[tuple[str, str]],
    longest: int,
    seed: int,
) -> dict[str, list[str]]:
    """Per answer id, the padding sentences its evidence-length variants draw from, in
    order: enough for ``longest`` evidence sentences, dealt from ``pool`` shuffled with
    ``seed``. Never a sentence of ``events`` themselves (by answer or by text) and never
    one sentence for two answers: the judge embeds a text once per batch, so shared
    padding would make longer evidence look cheaper than it is.

    Raises ``ValueError`` when an answer's own evidence is longer than ``longest``
    (evidence is only ever added, never cut) or the pool runs out."""
    own = {e.answer_id: evidence_sentences(e) for e in events}
    said = {s for sentences in own.values() for s in sentences}
    left = [(a, s) for a, s in pool if a not in own and s not in said]
    random.Random(f"{seed}:padding").shuffle(left)
    dealt: dict[str, list[str]] = {}
    at = 0
    for event in events:
        need = longest - len(own[event.answer_id])
        if need < 0:
            raise ValueError(
                f"answer {event.answer_id} has {len(own[event.answer_id])} evidence "
                f"sentences, more than {longest}"
            )
        if at + need > len(left):
            raise ValueError(
                f"answer {event.answer_id}: {need} padding sentences wanted, "
                f"{len(left) - at} left in the pool"
            )
        dealt[event.answer_id] = [s for _, s in left[at : at + need]]
        at += need
    return dealt


def pad_evidence(event: AnswerEvent, padding: Sequence[str], sentences: int) -> AnswerEvent:
    """``event`` with exactly ``sentences`` evidence sentences: its own evidence, then one
    passage item of the first ``padding`` sentences needed (its share of
    :func:`padding_pools`), one per line. A longer variant extends a shorter one.

    Raises ``ValueError`` when the answer's own evidence is already longer or
    ``padding`` is too short."""
    own = evidence_sentences(event)
    missing = sentences - len(own)
    if missing < 0:
        raise ValueError(
            f"answer {event.answer_id} has {len(own)} evidence sentences, more than {sentences}"
        )
    suffix = f"~evidence{sentences}"
    ids = {"event_id": event.event_id + suffix, "answer_id": event.answer_id + suffix}
    if missing == 0:
        return event.model_copy(update=ids)
    if len(padding) < missing:
        raise ValueError(
            f"answer {event.answer_id}: {missing} padding sentences wanted, {len(padding)} given"
        )
    item = EvidenceItem(
        id=_free_id(event),
        text="\n".join(padding[:missing]),
        kind=EvidenceKind.PASSAGE,
        source="bench_cost padding",
    )
    padded = event.model_copy(update={**ids, "evidence": [*event.evidence, item]})
    got = len(evidence_sentences(padded))
    if got != sentences:  # a padding sentence that is not one sentence: never report a lie
        raise ValueError(f"answer {event.answer_id}: padded to {got} sentences, not {sentences}")
    return padded


@dataclass(frozen=True, slots=True)
class _Sentence:
    source: int
    """Index of the answer it came from: 0 is the answer being rebuilt."""
    text: str
    claims: int


def _sentences(events: Sequence[AnswerEvent], granularity: Granularity) -> list[list[_Sentence]]:
    """Per answer: its sentences with their number of checked claims (0 = none)."""
    out = []
    for index, event in enumerate(events):
        shape = decompose(event.answer, event.evidence, granularity)
        counts = [0] * len(shape.sentences)
        for claim in shape.claims:
            counts[claim.sentence_index] += claim.checked
        out.append(
            [
                _Sentence(index, s.text.strip(), n)
                for s, n in zip(shape.sentences, counts, strict=True)
            ]
        )
    return out


def with_claims(
    event: AnswerEvent,
    donors: Sequence[AnswerEvent],
    claims: int,
    seed: int,
    granularity: Granularity,
) -> AnswerEvent:
    """``event`` rebuilt with exactly ``claims`` checked claims: its own sentences in
    order while they fit, then the sentences of the other answers in ``donors``, answer
    by answer in a seeded shuffle, one per line; each answer used brings its whole
    evidence.

    Only for answers whose claims read without their question (RAGTruth): a short answer
    to a question ("1932") means nothing next to another question's answer, so mixing
    answers that carry a question raises ``ValueError``, as does a pool too small."""
    if claims < 1:
        raise ValueError(f"claims must be at least 1, not {claims}")
    group = [event, *(d for d in donors if d.answer_id != event.answer_id)]
    per_answer = _sentences(group, granularity)
    donor_order = list(range(1, len(group)))
    random.Random(f"{seed}:{event.answer_id}").shuffle(donor_order)
    # Donor by donor, each in its own order: few answers, so the evidence grows no more
    # than the claims need (a long answer drawn from a few documents).
    others = [s for donor in donor_order for s in per_answer[donor]]
    taken: list[_Sentence] = []
    left = claims
    for candidate in [*per_answer[0], *others]:
        if left == 0:
            break
        if not 0 < candidate.claims <= left:
            continue
        built = _assemble(group, [*taken, candidate], claims)
        if len(checked_claims(built, granularity)) == claims - left + candidate.claims:
            taken.append(candidate)  # it reads the same next to the others: keep it
            left -= candidate.claims
    if left:
        raise ValueError(f"answer {event.answer_id}: {claims} claims wanted, {claims - left} found")
    return _assemble(group, taken, claims)


def _assemble(
    events: Sequence[AnswerEvent], taken: Sequence[_Sentence], claims: int
) -> AnswerEvent:
    """The answer of ``taken`` sentences (``events[0]`` is the answer being rebuilt)."""
    base = events[0]
    sources = list(dict.fromkeys([0, *(s.source for s in taken)]))
    if len(sources) > 1 and any(events[i].question for i in sources):
        raise ValueError("answers that carry a question cannot be mixed: their claims read with it")
    evidence: list[EvidenceItem] = []
    for k, source in enumerate(sources):
        for item in events[source].evidence:
            evidence.append(item if k == 0 else item.model_copy(update={"id": f"{item.id}@{k}"}))
    suffix = f"~claims{claims}"
    return base.model_copy(
        update={
            "event_id": base.event_id + suffix,
            "answer_id": base.answer_id + suffix,
            "answer": "\n".join(s.text for s in taken),
            "evidence": evidence,
            "tokens": None,  # log-probabilities belong to the original text
            "labels": None,
        }
    )


# ---------------------------------------------------------------------------- variants


@dataclass(frozen=True, slots=True)
class Variant:
    """One set of answers judged together: a traffic type, an axis and its level."""

    traffic: Traffic
    axis: Axis
    level: int | None
    """Evidence sentences or checked claims per answer; None for the answers as sent."""
    events: tuple[AnswerEvent, ...]

    @property
    def name(self) -> str:
        return f"{self.traffic} {self.axis}" + ("" if self.level is None else f" {self.level}")


def select_traffic(
    events: Sequence[AnswerEvent],
    task_of: Callable[[AnswerEvent], str],
    traffic: Traffic,
    count: int,
    max_sentences: int | None = None,
) -> list[AnswerEvent]:
    """The first ``count`` answers of ``traffic`` in the given order, its task types taking
    turns (RAGTruth-like: Summary, Data2txt, Summary, ...); with ``max_sentences``, only
    answers whose own evidence is at most that long (padding never cuts evidence)."""
    queues = {
        task: [
            e
            for e in events
            if task_of(e) == task
            and (max_sentences is None or len(evidence_sentences(e)) <= max_sentences)
        ]
        for task in TRAFFIC_TASKS[traffic]
    }
    chosen: list[AnswerEvent] = []
    while len(chosen) < count and any(queues.values()):
        for queue in queues.values():
            if queue and len(chosen) < count:
                chosen.append(queue.pop(0))
    return chosen


def evidence_variants(
    traffic: Traffic,
    events: Sequence[AnswerEvent],
    padding: Mapping[str, Sequence[str]],
    lengths: Sequence[int],
) -> list[Variant]:
    """One variant per length: every answer padded to that many evidence sentences from
    its share of ``padding`` (:func:`padding_pools`, by answer id)."""
    return [
        Variant(
            traffic,
            "evidence",
            n,
            tuple(pad_evidence(e, padding.get(e.answer_id, ()), n) for e in events),
        )
        for n in lengths
    ]


def claims_variants(
    traffic: Traffic,
    events: Sequence[AnswerEvent],
    donors_of: Callable[[AnswerEvent], Sequence[AnswerEvent]],
    counts: Sequence[int],
    seed: int,
    granularity: Granularity,
) -> list[Variant]:
    """One variant per count: every answer rebuilt with that many checked claims, other
    sentences drawn from ``donors_of`` it (the answers of its task type)."""
    return [
        Variant(
            traffic,
            "claims",
            n,
            tuple(with_claims(e, donors_of(e), n, seed, granularity) for e in events),
        )
        for n in counts
    ]


# ------------------------------------------------------------------------ measurement


class CountingEmbedder:
    """A ``TextEmbedder`` that counts the texts (and calls) it is asked to embed, for the
    benchmark's "embedded texts per answer"; it changes nothing else."""

    def __init__(self, inner: TextEmbedder) -> None:
        self._inner = inner
        self.texts = 0
        self.calls = 0

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    @property
    def sha256(self) -> str:
        return self._inner.sha256

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.texts += len(texts)
        self.calls += 1
        return self._inner.embed(texts)


# ----------------------------------------------------------------------------- numbers


def cores_per_100(cpu_s_per_answer: float) -> float:
    """CPU cores kept busy by 100 answers/s at ``cpu_s_per_answer`` CPU seconds each."""
    if cpu_s_per_answer < 0:
        raise ValueError(f"CPU seconds cannot be negative, not {cpu_s_per_answer}")
    return 100 * cpu_s_per_answer


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of ``ys`` on ``xs``: what one more evidence
    sentence or claim costs, read off the variants."""
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError("a line needs at least two distinct x values, one y each")
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    return my - slope * mx, slope


def cost_fit(points: Sequence[tuple[float, float, float]]) -> tuple[float, float, float] | None:
    """Least-squares CPU seconds per answer = a + b * evidence sentences + c * checked
    claims over (sentences, claims, cpu_s) points: (a, b, c), or None when the points
    cannot separate the two (e.g. every answer has one claim)."""
    if len(points) < 3:
        return None
    x = np.array([[1.0, sentences, claims] for sentences, claims, _ in points])
    if np.linalg.matrix_rank(x) < 3:
        return None
    y = np.array([cpu for _, _, cpu in points])
    a, b, c = (float(v) for v in np.linalg.lstsq(x, y, rcond=None)[0])
    return a, b, c


def median_of(runs: Sequence[Mapping[str, Any]], key: str) -> float | None:
    """Median of ``key`` over the runs that have it (None when none has)."""
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


# ------------------------------------------------------------------------------ report


@dataclass(slots=True)
class VariantResult:
    """A variant's fixed shape and its measurements, one dict per run (keys of
    ``_COLUMNS``: answers_per_s, cpu_s_per_answer, pairs_per_answer, ...)."""

    traffic: Traffic
    axis: Axis
    level: int | None
    answers: int
    evidence_sentences: float
    """Mean evidence sentences per answer."""
    claims: float
    """Mean checked claims per answer."""
    evidence_chars: float = 0.0
    """Mean characters of evidence sentences per answer: the models' cost follows tokens,
    and padding sentences need not be as long as an answer's own."""
    runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return Variant(self.traffic, self.axis, self.level, ()).name


_COLUMNS: Final = (
    ("answers/s", "answers_per_s", 1),
    ("CPU s/answer", "cpu_s_per_answer", 3),
    ("wall s/answer", "wall_s_per_answer", 3),
    ("NLI pairs/answer", "pairs_per_answer", 1),
    ("embedded texts/answer", "embedded_per_answer", 1),
    ("NLI share of wall", "nli_share", 2),
)


def _cell(runs: Sequence[Mapping[str, Any]], key: str, digits: int) -> str:
    values = [r[key] for r in runs if r.get(key) is not None]
    if not values:
        return "n/a"
    mid = f"{statistics.median(values):,.{digits}f}"
    if len(values) < 2:
        return mid
    return f"{mid} ({min(values):,.{digits}f}-{max(values):,.{digits}f})"


def _table(results: Sequence[VariantResult]) -> list[str]:
    header = ["variant", "evidence sentences/answer", "evidence chars/sentence"]
    header += ["checked claims/answer"]
    header += [label for label, _, _ in _COLUMNS] + ["cores per 100 answers/s", "caps hit"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for result in results:
        cpu = median_of(result.runs, "cpu_s_per_answer")
        caps = max((r.get("caps_hit", 0) for r in result.runs), default=0)
        cells = [
            result.name,
            f"{result.evidence_sentences:.1f}",
            (
                f"{result.evidence_chars / result.evidence_sentences:.0f}"
                if result.evidence_sentences
                else "n/a"
            ),
            f"{result.claims:.1f}",
            *(_cell(result.runs, key, digits) for _, key, digits in _COLUMNS),
            "n/a" if cpu is None else f"{cores_per_100(cpu):.1f}",
            f"{caps}/{result.answers}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _growth(results: Sequence[VariantResult], axis: Axis) -> str | None:
    """What one more evidence sentence (or claim) costs, fitted over the axis' levels
    and the answers as sent (the same answers, nothing added or rebuilt)."""
    points = [
        (r.evidence_sentences if axis == "evidence" else r.claims, cpu)
        for r in results
        if r.axis in (axis, "as sent")
        and (cpu := median_of(r.runs, "cpu_s_per_answer")) is not None
    ]
    if len({x for x, _ in points}) < 2:
        return None
    intercept, slope = linear_fit([x for x, _ in points], [y for _, y in points])
    (x0, y0), (x1, y1) = min(points), max(points)
    unit = "evidence sentence" if axis == "evidence" else "checked claim"
    ratio = f"x{y1 / y0:.1f}" if y0 > 0 else "n/a"
    return (
        f"{axis}: CPU s/answer {y0:.3f} at {x0:g} -> {y1:.3f} at {x1:g} ({ratio}); "
        f"least-squares line {intercept * 1000:,.0f} ms + {slope * 1000:,.1f} ms "
        f"per {unit}"
    )


def render_markdown(
    results: Sequence[VariantResult], header: Sequence[str], notes: Sequence[str] = ()
) -> str:
    """The report: ``header`` lines (command, machine, method), one table per traffic
    type with its "cores per 100 answers/s" line and growth fits, then ``notes``."""
    lines = [*header, ""]
    for traffic in TRAFFIC_TASKS:
        mine = [r for r in results if r.traffic == traffic]
        if not mine:
            continue
        lines += [f"#### {traffic} traffic ({', '.join(TRAFFIC_TASKS[traffic])})", ""]
        lines += [*_table(mine), ""]
        base = next((r for r in mine if r.axis == "as sent"), None)
        cpu = None if base is None else median_of(base.runs, "cpu_s_per_answer")
        if cpu is not None:
            lines.append(
                f"- Cores per 100 answers/s, {traffic} answers as sent: "
                f"**{cores_per_100(cpu):.1f}** (100 x {cpu:.3f} CPU s per answer)."
            )
        for axis in ("evidence", "claims"):
            growth = _growth(mine, axis)
            if growth is not None:
                lines.append(f"- Growth with {growth}.")
        fit = cost_fit(
            [
                (r.evidence_sentences, r.claims, cpu)
                for r in mine
                if (cpu := median_of(r.runs, "cpu_s_per_answer")) is not None
            ]
        )
        if fit is not None:
            a, b, c = (v * 1000 for v in fit)
            lines.append(
                f"- Cost model over all {len(mine)} variants (least squares): CPU ms per answer "
                f"= {a:,.0f} + {b:,.2f} per evidence sentence + {c:,.1f} per checked claim."
            )
        lines.append("")
    lines += [f"- {note}" for note in notes]
    return "\n".join(lines).rstrip() + "\n"
