"""The cost benchmark's variants hold exactly the shape they claim, and its arithmetic."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from bench.cost_model import (
    Axis,
    CountingEmbedder,
    VariantResult,
    checked_claims,
    claims_variants,
    cores_per_100,
    cost_fit,
    evidence_sentences,
    evidence_variants,
    linear_fit,
    pad_evidence,
    padding_pools,
    render_markdown,
    select_traffic,
    sentence_pool,
    with_claims,
)
from bench.machine import cpu_model
from streamproc.contracts.events import AnswerEvent, EvidenceItem, EvidenceKind
from streamproc.evaluate.benchmark import load_items, task_type_of
from streamproc.inference.loader import load_embedder
from streamproc.inference.options import InferenceSettings
from streamproc.judge.text.claims import Granularity

SAMPLES = Path(__file__).resolve().parents[2] / "streamproc" / "samples"
GRANULARITY: Granularity = "atomic"


@pytest.fixture(scope="module")
def by_task() -> dict[str, list[AnswerEvent]]:
    """The in-repo RAGTruth and seed-lab answers, by task type."""
    items = load_items(sorted(SAMPLES.glob("*.answers.jsonl")), "all")
    grouped: dict[str, list[AnswerEvent]] = {}
    for item in items:
        grouped.setdefault(item.task_type, []).append(item.case.event)
    return grouped


def _event(answer: str, evidence: list[EvidenceItem], question: str | None = None) -> AnswerEvent:
    return AnswerEvent(
        event_id="e1",
        answer_id="a1",
        conversation_id="c1",
        tenant="t",
        assistant_id="bot",
        model="m",
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        question=question,
        answer=answer,
        evidence=evidence,
    )


# ------------------------------------------------------------------------------ shapes


def test_evidence_sentences_are_the_judges_sentence_units_without_question_or_windows() -> None:
    event = _event(
        "The shop opens at 9.",
        [
            EvidenceItem(id="P1", text="The shop opens at 9. It closes at 5.\nParking is free."),
            EvidenceItem(id="R1", kind=EvidenceKind.RECORD, text='{"name": "Ada", "stars": 4}'),
        ],
        question="When does the shop open?",
    )
    assert evidence_sentences(event) == [
        "The shop opens at 9.",
        "It closes at 5.",
        "Parking is free.",
        "name: Ada",
        "stars: 4",
    ]


def test_padded_variants_hold_exactly_the_requested_sentences_and_keep_the_claims(
    by_task: dict[str, list[AnswerEvent]],
) -> None:
    lengths = [75, 100, 120]
    for task in ("Summary", "Data2txt"):
        group = by_task[task]
        chosen = [e for e in group if len(evidence_sentences(e)) <= lengths[0]][:2]
        assert len(chosen) == 2
        padding = padding_pools(chosen, sentence_pool(group), max(lengths), seed=7)
        variants = evidence_variants("RAGTruth-like", chosen, padding, lengths)
        assert [v.level for v in variants] == lengths
        for variant in variants:
            for original, padded in zip(chosen, variant.events, strict=True):
                assert len(evidence_sentences(padded)) == variant.level
                assert padded.answer == original.answer
                assert checked_claims(padded, GRANULARITY) == checked_claims(original, GRANULARITY)
                assert padded.evidence[: len(original.evidence)] == original.evidence
                added = padded.evidence[-1].text.split("\n")
                assert set(added).isdisjoint(evidence_sentences(original))
        # Longer evidence extends shorter: the same padding, more of it.
        shortest, longest = variants[0].events[0], variants[-1].events[0]
        first = shortest.evidence[-1].text.split("\n")
        assert longest.evidence[-1].text.split("\n")[: len(first)] == first
        # No padding sentence is given to two answers (the judge embeds it once a batch).
        a, b = (set(v.evidence[-1].text.split("\n")) for v in variants[-1].events)
        assert not a & b
        # Nor is any of the answers' own evidence used as padding.
        own = {s for e in chosen for s in evidence_sentences(e)}
        assert not (a | b) & own


def test_padding_is_seeded_and_answers_exactly_as_long_come_back_unpadded(
    by_task: dict[str, list[AnswerEvent]],
) -> None:
    group = by_task["Summary"]
    event = group[0]
    pool = sentence_pool(group)
    n = len(evidence_sentences(event))
    same = padding_pools([event], pool, n + 10, seed=1)
    assert same == padding_pools([event], pool, n + 10, seed=1)
    assert same != padding_pools([event], pool, n + 10, seed=2)
    unpadded = pad_evidence(event, same[event.answer_id], n)
    assert unpadded.evidence == event.evidence
    assert unpadded.answer_id != event.answer_id  # a variant is a different answer


def test_padding_never_cuts_evidence_and_says_when_the_pool_is_short(
    by_task: dict[str, list[AnswerEvent]],
) -> None:
    group = by_task["Summary"]
    event = group[0]
    n = len(evidence_sentences(event))
    with pytest.raises(ValueError, match="more than"):
        padding_pools([event], sentence_pool(group), n - 1, seed=1)
    with pytest.raises(ValueError, match="more than"):
        pad_evidence(event, [], n - 1)
    with pytest.raises(ValueError, match="left in the pool"):
        padding_pools([event], sentence_pool(group[:2]), 10_000, seed=1)
    with pytest.raises(ValueError, match="given"):
        pad_evidence(event, ["One more sentence."], n + 2)


def test_claims_variants_hold_exactly_the_requested_claims_and_only_original_ones(
    by_task: dict[str, list[AnswerEvent]],
) -> None:
    counts = [1, 4, 16]
    group = by_task["Summary"]
    chosen = group[:3]
    originals = {c for e in group for c in checked_claims(e, GRANULARITY)}
    variants = claims_variants(
        "RAGTruth-like", chosen, lambda _: group, counts, seed=3, granularity=GRANULARITY
    )
    assert [v.level for v in variants] == counts
    for variant in variants:
        for original, built in zip(chosen, variant.events, strict=True):
            claims = checked_claims(built, GRANULARITY)
            assert len(claims) == variant.level
            assert set(claims) <= originals  # claims are taken whole, never written
            own = checked_claims(original, GRANULARITY)
            assert claims[0] in own  # the answer's own sentences come first
            ids = [item.id for item in built.evidence]
            assert len(ids) == len(set(ids))
            assert built.evidence[: len(original.evidence)] == original.evidence
    # Sixteen claims need other answers, and each brings its evidence along.
    big = variants[-1].events[0]
    assert len(big.evidence) > len(chosen[0].evidence)
    assert len(evidence_sentences(big)) > len(evidence_sentences(chosen[0]))


def test_answers_to_different_questions_are_never_joined(
    by_task: dict[str, list[AnswerEvent]],
) -> None:
    qa = [e for e in by_task["QA"] if e.question and checked_claims(e, GRANULARITY)]
    own = len(checked_claims(qa[0], GRANULARITY))
    with pytest.raises(ValueError, match="question"):
        with_claims(qa[0], qa, own + 3, seed=1, granularity=GRANULARITY)


def test_select_traffic_takes_turns_between_task_types_and_honours_the_length_bound(
    by_task: dict[str, list[AnswerEvent]],
) -> None:
    events = by_task["Summary"] + by_task["Data2txt"] + by_task["QA"]
    chosen = select_traffic(events, task_type_of, "RAGTruth-like", 6, max_sentences=50)
    assert [task_type_of(e) for e in chosen] == ["Summary", "Data2txt"] * 3
    assert all(len(evidence_sentences(e)) <= 50 for e in chosen)
    assert all(task_type_of(e) == "QA" for e in select_traffic(events, task_type_of, "QA-like", 4))


# ----------------------------------------------------------------------------- numbers


def test_cores_per_100_answers_per_second() -> None:
    assert cores_per_100(0.05) == pytest.approx(5.0)
    assert cores_per_100(0.665) == pytest.approx(66.5)
    with pytest.raises(ValueError):
        cores_per_100(-0.1)


def test_linear_and_plane_fits_recover_known_costs() -> None:
    intercept, slope = linear_fit([5, 20, 80], [0.1 + 0.02 * x for x in (5, 20, 80)])
    assert (intercept, slope) == pytest.approx((0.1, 0.02))
    points = [
        (s, c, 0.05 + 0.01 * s + 0.03 * c) for s, c in [(30, 7), (100, 7), (30, 1), (116, 16)]
    ]
    fit = cost_fit(points)
    assert fit is not None
    assert fit == pytest.approx((0.05, 0.01, 0.03))
    assert cost_fit([(5, 1, 0.1), (20, 1, 0.2), (80, 1, 0.5)]) is None  # one claim each
    with pytest.raises(ValueError):
        linear_fit([5, 5], [1, 2])


def test_cpu_model_is_read_from_cpuinfo() -> None:
    text = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold\n"
    assert cpu_model(text) == "Intel(R) Xeon(R) Gold"
    assert cpu_model("processor : 0\n") == "unknown"


def test_the_report_has_a_row_per_variant_and_the_cores_line() -> None:
    def result(
        axis: Axis, level: int | None, sentences: float, claims: float, cpu: float
    ) -> VariantResult:
        return VariantResult(
            "RAGTruth-like",
            axis,
            level,
            12,
            sentences,
            claims,
            evidence_chars=80 * sentences,
            runs=[{"cpu_s_per_answer": cpu, "answers_per_s": 1 / cpu, "caps_hit": 0}],
        )

    results = [
        result("as sent", None, 32.5, 7, 0.665),
        result("evidence", 100, 100, 7, 1.33),
        result("evidence", 200, 200, 7, 2.06),
        result("claims", 1, 32.5, 1, 0.41),
        result("claims", 16, 116, 16, 1.66),
    ]
    text = render_markdown(results, ["### Cost"], ["a note"])
    rows = [line for line in text.splitlines() if line.startswith("| RAGTruth-like")]
    assert len(rows) == 5
    assert "| RAGTruth-like evidence 200 | 200.0 | 80 | 7.0 | 0.5 | 2.060 |" in text
    assert "answers as sent: **66.5**" in text
    assert "Growth with evidence: CPU s/answer 0.665 at 32.5 -> 2.060 at 200" in text
    assert "Growth with claims: CPU s/answer 0.410 at 1 -> 1.660 at 16" in text
    assert "Cost model over all 5 variants" in text
    assert "QA-like" not in text  # no rows, no section
    assert text.rstrip().endswith("- a note")


# ------------------------------------------------------------------------- measurement


def test_counting_embedder_counts_texts_and_returns_the_models_vectors() -> None:
    inner = load_embedder(InferenceSettings())
    counted = CountingEmbedder(inner)
    texts = ["The shop opens at 9.", "Parking is free.", "It closes at 5."]
    vectors = counted.embed(texts)
    counted.embed(texts[:1])
    assert (counted.texts, counted.calls) == (4, 2)
    assert np.array_equal(vectors, inner.embed(texts))
    assert (counted.model_name, counted.sha256) == (inner.model_name, inner.sha256)
