"""Leave-out negatives: a faithful claim against its premise with its support removed."""

from __future__ import annotations

import random

from modelwork.verifier.long_premises import (
    LEFT_COVERAGE,
    leave_out,
    leave_out_premise,
    supporting_sentences,
)
from modelwork.verifier.pair_text import judge_units, word_coverage

DOCUMENT = (
    "Storm Ciara closed the harbour at Dover on Sunday morning. "
    "Ferries to Calais were cancelled until the wind dropped below gale force. "
    "The port authority said about 4,000 lorries queued on the motorway. "
    "Local schools stayed open, and the town's market went ahead as planned. "
    "Forecasters expect a calmer week, with rain spreading from the west on Tuesday. "
    "The mayor thanked volunteers who handed out food and water to drivers."
)
CLAIM = "Storm Ciara closed Dover harbour and ferries to Calais were cancelled."


def test_the_supporting_sentences_are_those_stating_part_of_the_claim() -> None:
    sentences = [u.text for u in judge_units(None, [DOCUMENT], record=False) if not u.is_window]
    assert supporting_sentences(CLAIM, sentences) == {0, 1}


def test_the_leave_out_premise_keeps_the_document_but_not_the_support() -> None:
    units = judge_units(None, [DOCUMENT], record=False)
    premise = leave_out_premise(CLAIM, units)
    assert premise is not None
    assert "closed the harbour" not in premise and "Ferries to Calais" not in premise
    assert len(premise.split(". ")) >= 2, "still a multi-sentence premise"
    assert word_coverage(CLAIM, premise) <= LEFT_COVERAGE


def test_a_claim_with_no_support_gives_no_leave_out_pair() -> None:
    units = judge_units(None, [DOCUMENT], record=False)
    assert leave_out_premise("Quantum chromodynamics predicts asymptotic freedom.", units) is None


def test_leave_out_pairs_are_negatives_grouped_by_summary() -> None:
    source = {"document": DOCUMENT, "right_summary": CLAIM + " Volunteers handed out food."}
    pairs = list(leave_out([(17, source)], random.Random(1)))
    assert [(p.label, p.kind, p.group) for p in pairs] == [(0, "sum-leave-out", "sum:17")]
    assert pairs[0].hypothesis == CLAIM
