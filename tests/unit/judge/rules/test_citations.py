"""Citation recall and precision, as in the course (after ALCE)."""

from __future__ import annotations

from collections.abc import Callable

from streamproc.judge.rules.citations import assess_citations, citation_subsets


def backed_by(*supporting: tuple[str, ...]) -> Callable[[tuple[str, ...]], bool]:
    """A fake checker: exactly these evidence subsets support the claim."""
    return lambda subset: subset in supporting


def test_one_good_citation() -> None:
    result = assess_citations(["D07"], True, backed_by(("D07",)))
    assert result.supported is True and result.needed == (True,)


def test_a_citation_that_does_not_back_the_claim_fails_both() -> None:
    result = assess_citations(["D09"], True, backed_by())
    assert result.supported is False and result.needed == (False,)


def test_a_redundant_citation_does_not_pull_its_weight() -> None:
    supports = backed_by(("D1", "D2"), ("D1",))
    result = assess_citations(["D1", "D2"], True, supports)
    assert result.supported is True and result.needed == (True, False)


def test_two_citations_needed_together() -> None:
    result = assess_citations(["D1", "D2"], True, backed_by(("D1", "D2")))
    assert result.needed == (True, True)


def test_no_citation_fails_recall_only_when_the_answer_cites_elsewhere() -> None:
    assert assess_citations([], True, backed_by()).supported is False
    assert assess_citations([], False, backed_by()).supported is None


def test_an_unknown_citation_is_never_needed() -> None:
    result = assess_citations(["D1", None], True, backed_by(("D1",)))
    assert result.supported is True and result.needed == (True, False)


def test_subsets_cover_every_question_assess_asks() -> None:
    asked: list[tuple[str, ...]] = []

    def record(subset: tuple[str, ...]) -> bool:
        asked.append(subset)
        return True

    assess_citations(["D1", "D2", "D3"], True, record)
    assert set(asked) <= set(citation_subsets(["D1", "D2", "D3"]))
