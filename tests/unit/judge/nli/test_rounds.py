"""Fewer model calls where they decide nothing: a claim's candidates asked in rank order
until one entails it, and only the evidence sentences that share words with some claim
embedded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamproc.contracts.events import AnswerJudgement, EvidenceItem, VerdictLabel
from streamproc.judge.nli.judge import NliJudge, NliOptions, NliThresholds
from streamproc.judge.nli.shortlist import lexical_shortlist
from streamproc.judge.protocols import NliScore
from streamproc.judge.text.evidence import build_units
from tests.unit.judge.nli.test_judge import event
from tests.unit.judge.nli_fakes import BagOfWordsEmbedder, OverlapScorer

FILLER = [
    "The warehouse opens at seven.",
    "Trucks leave from the north gate.",
    "Drivers log their routes daily.",
    "The canteen serves soup on Fridays.",
    "Forklifts are charged overnight.",
    "Visitors sign in at reception.",
    "The roof was repaired last spring.",
    "Pallets are stacked three high.",
]
SOURCE = " ".join([*FILLER[:4], "The supplier delivered ninety pieces to Berlin.", *FILLER[4:]])


class CountingEmbedder(BagOfWordsEmbedder):
    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.texts.extend(texts)
        return super().embed(texts)


def nli(
    scorer: OverlapScorer,
    embedder: BagOfWordsEmbedder,
    decisive: float | None = None,
    shortlist: int | None = None,
) -> NliJudge:
    return NliJudge(
        scorer,
        embedder,
        NliOptions(
            thresholds=NliThresholds(entailment=0.6),
            granularity="sentence",
            decisive_entailment=decisive,
            shortlist_sentences=shortlist,
        ),
    )


def judged(judge: NliJudge, answer: str, source: str = SOURCE) -> AnswerJudgement:
    [result] = judge.judge_batch([event(answer, [{"id": "D1", "text": source}])])
    return result


def only(result: AnswerJudgement) -> Any:
    [claim] = result.claims
    return claim


def test_a_claim_its_top_unit_entails_is_decided_on_that_unit_alone() -> None:
    answer = "The supplier delivered ninety pieces to Berlin."
    every, early = OverlapScorer(), OverlapScorer()
    full = judged(nli(every, BagOfWordsEmbedder()), answer)
    quick_judge = nli(early, BagOfWordsEmbedder(), decisive=0.9)
    quick = judged(quick_judge, answer)
    assert sum(early.calls) == 1 < sum(every.calls)
    assert only(quick).verdict is only(full).verdict is VerdictLabel.SUPPORTED
    assert only(quick).evidence_ids == only(full).evidence_ids == ["D1"]
    # retrieval's signals still read every candidate, scored or not
    for name in ("similarity_max", "coverage_max", "entail_logit_max", "entail_logit_top"):
        assert only(quick).signals[name] == only(full).signals[name]
    assert quick_judge.info.thresholds["decisive_entailment"] == 0.9


def test_a_claim_no_unit_settles_has_every_candidate_scored_one_per_round() -> None:
    answer = "The supplier repaired the forklifts."
    every, early = OverlapScorer(), OverlapScorer()
    full = judged(nli(every, BagOfWordsEmbedder()), answer)
    quick = judged(nli(early, BagOfWordsEmbedder(), decisive=0.9), answer)
    assert early.calls == [1] * sum(every.calls), "one candidate per round, in rank order"
    assert sum(early.calls) == sum(every.calls)
    assert only(quick).model_dump() == only(full).model_dump()


def test_a_negation_flip_is_never_skipped() -> None:
    source = " ".join([*FILLER[:3], "The supplier did not deliver the pieces.", *FILLER[3:]])
    answer = "The supplier delivered the pieces."
    scorer = OverlapScorer()
    result = judged(nli(scorer, BagOfWordsEmbedder(), decisive=0.1), answer, source)
    assert only(result).verdict is VerdictLabel.CONTRADICTED
    assert any(r.startswith("NEGATION_FLIP") for r in only(result).reasons)
    assert len(scorer.calls) == 1 and scorer.calls[0] > 1, "every candidate in one round"


def test_long_evidence_embeds_only_the_shortlisted_sentences() -> None:
    answer = "The supplier delivered ninety pieces to Berlin in time."
    whole, listed = CountingEmbedder(), CountingEmbedder()
    full = judged(nli(OverlapScorer(), whole), answer)
    short = judged(nli(OverlapScorer(), listed, shortlist=3), answer)
    assert len(listed.texts) == 1 + 3 < len(whole.texts) == 1 + len(FILLER) + 1
    assert only(short).verdict is only(full).verdict is VerdictLabel.SUPPORTED
    assert only(short).evidence_ids == ["D1"]


def test_short_evidence_is_embedded_whole() -> None:
    units = build_units(None, [_item("One fact here. Another fact there.")], 2)
    assert lexical_shortlist(units, ["One fact."], keep=4) is None


def test_shortlist_keeps_windows_whose_sentences_it_keeps_and_cited_units() -> None:
    text = " ".join([*FILLER[:4], "The supplier delivered pieces.", "Pieces went to Berlin."])
    units = build_units(None, [_item(text)], 2)
    chosen = lexical_shortlist(units, ["The supplier delivered pieces to Berlin."], 2, [0])
    assert chosen is not None
    texts = [units[i].text for i in chosen]
    assert texts[0] == FILLER[0], "cited units are always kept"
    assert "The supplier delivered pieces." in texts and "Pieces went to Berlin." in texts
    assert "The supplier delivered pieces. Pieces went to Berlin." in texts, "their window"
    assert not any(FILLER[2] in t for t in texts)


def _item(text: str) -> EvidenceItem:
    return EvidenceItem(id="D1", text=text)


def test_asking_stops_at_the_first_candidate_that_entails() -> None:
    """In this fake only the window before the sentence entails, and retrieval ranks the
    sentence first: the second round finds it, and the other two are never asked."""
    source = " ".join([*FILLER[:3], "The supplier repaired the gate.", *FILLER[3:]])

    class OnlyTheSentence(OverlapScorer):
        def score(self, pairs: Sequence[tuple[str, str]]) -> list[NliScore]:
            self.calls.append(len(pairs))
            return [
                NliScore(0.9 if p.startswith("Drivers") else 0.2, 0.05, (0.0, 0.0))
                for p, _ in pairs
            ]

    answer = "The supplier repaired the gate near the trucks."
    every, early = OnlyTheSentence(), OnlyTheSentence()
    full = judged(nli(every, BagOfWordsEmbedder()), answer, source)
    quick = judged(nli(early, BagOfWordsEmbedder(), decisive=0.7), answer, source)
    assert early.calls == [1, 1] and sum(every.calls) > 2
    assert only(quick).verdict is only(full).verdict
    assert only(quick).evidence_ids == only(full).evidence_ids
