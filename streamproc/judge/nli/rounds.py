"""Ask the NLI model for what decides, in rounds: early decisions.

Without them, one round asks every candidate of every claim. With them, a claim that
may be decided early asks its candidates one per round in rank order and stops at the
first that entails it at least ``decisive``; its other candidates are never scored. Each
round is one batched call across the micro-batch's claims. Which candidates a claim asks
depends only on its own pairs' scores (one pair per call, so a score never depends on
its batch), never on its neighbours: verdicts stay replayable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from streamproc.judge.nli.premises import compose_premise
from streamproc.judge.nli.work import AnswerWork, ClaimWork, pairs
from streamproc.judge.protocols import NliScore, PairScorer

__all__ = ["Pair", "ask_composed", "ask_in_rounds"]

Pair = tuple[str, str]


def ask_in_rounds(
    works: Sequence[AnswerWork],
    scorer: PairScorer,
    decisive: float | None,
    may_stop_early: Callable[[ClaimWork, AnswerWork], bool],
) -> dict[Pair, NliScore]:
    """Scores by (premise, hypothesis) for every pair the batch asks; sets each early
    claim's ``asked`` to the candidates it asked."""
    lookup: dict[Pair, NliScore] = {}
    waiting = []
    if decisive is not None:
        waiting = [(w, c) for w in works for c in w.claims if may_stop_early(c, w)]
    for _, item in waiting:
        item.asked = 1
    _score_new(scorer, lookup, pairs(works))
    while waiting:
        waiting = [(w, c) for w, c in waiting if not _decided(c, w, lookup, decisive or 0.0)]
        for _, item in waiting:
            item.asked = (item.asked or 0) + 1
        _score_new(scorer, lookup, (_last_asked(c, w) for w, c in waiting))
    return lookup


def ask_composed(
    works: Sequence[AnswerWork],
    scorer: PairScorer,
    lookup: dict[Pair, NliScore],
    entailment: float,
) -> None:
    """One more batched call after the rounds: each unsettled claim of ``works`` that no
    single unit entailed at least ``entailment``, against its top units' sentences read
    together (:mod:`streamproc.judge.nli.premises`); sets the claim's ``composed``."""
    asked = []
    for work in works:
        for item in work.claims:
            if item.settled is not None or not item.candidates:
                continue
            hypothesis = work.hypothesis(item.claim)
            best = max(
                lookup[(work.units[c.unit].text, hypothesis)].entailment
                for c in item.scored_candidates
            )
            if best >= entailment:
                continue
            item.composed = compose_premise(work.units, [c.unit for c in item.candidates])
            if item.composed is not None:
                asked.append((item.composed.text, hypothesis))
    _score_new(scorer, lookup, asked)


def _decided(
    item: ClaimWork, work: AnswerWork, lookup: Mapping[Pair, NliScore], decisive: float
) -> bool:
    """All candidates are asked, or the last one asked entails the claim decisively."""
    if (item.asked or 0) >= len(item.candidates):
        return True
    return lookup[_last_asked(item, work)].entailment >= decisive


def _last_asked(item: ClaimWork, work: AnswerWork) -> Pair:
    """The pair of the claim's last candidate asked: the only one a later round adds
    (the first round asked its citations and its top unit)."""
    last = item.candidates[(item.asked or 0) - 1]
    return work.units[last.unit].text, work.hypothesis(item.claim)


def _score_new(scorer: PairScorer, lookup: dict[Pair, NliScore], asked: Iterable[Pair]) -> None:
    """Score the pairs not in ``lookup`` yet (one batched call) and add them."""
    new = [pair for pair in dict.fromkeys(asked) if pair not in lookup]
    if new:
        lookup.update(zip(new, scorer.score(new), strict=True))
