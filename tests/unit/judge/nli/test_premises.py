"""Composed premises: the top units' sentences, within a budget, in document order."""

from __future__ import annotations

from streamproc.contracts.events import EvidenceItem
from streamproc.judge.nli.premises import compose_premise
from streamproc.judge.text.evidence import build_units

TEXT = "Alpha opened in May. Beta closed in June. Gamma moved in July. Delta rose in August."


def units(question: str | None = None) -> list:  # type: ignore[type-arg]
    return build_units(question, [EvidenceItem(id="D1", text=TEXT)])


def index_of(all_units: list, text: str) -> int:  # type: ignore[type-arg]
    return next(i for i, u in enumerate(all_units) if u.text == text)


def test_sentences_come_back_in_document_order_each_once() -> None:
    found = units()
    ranked = [index_of(found, "Gamma moved in July."), index_of(found, "Alpha opened in May.")]
    ranked.append(index_of(found, "Alpha opened in May. Beta closed in June."))
    premise = compose_premise(found, ranked)
    assert premise is not None
    assert premise.text == "Alpha opened in May. Beta closed in June. Gamma moved in July."
    assert premise.evidence_ids == ("D1",) and premise.sentences == 3


def test_the_word_budget_keeps_the_best_ranked_sentences() -> None:
    found = units()
    ranked = [index_of(found, s) for s in ("Delta rose in August.", "Beta closed in June.")]
    ranked.append(index_of(found, "Alpha opened in May."))
    premise = compose_premise(found, ranked, max_words=8)
    assert premise is not None and premise.text == "Beta closed in June. Delta rose in August."


def test_one_sentence_or_the_question_alone_composes_nothing() -> None:
    found = units("When did Alpha open?")
    question = index_of(found, "When did Alpha open?")
    assert compose_premise(found, [question, index_of(found, "Alpha opened in May.")]) is None
