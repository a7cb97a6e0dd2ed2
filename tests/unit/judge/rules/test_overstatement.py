"""Overstatement: strong claims over hedged evidence, and the look-alikes that are not."""

from __future__ import annotations

import pytest

from streamproc.judge.rules.overstatement import OVERSTATED, OverstatementFinding, overstated

TRIAL = (
    "In a 2-year trial the drug cut infection risk from 30% to 15%. "
    "The result was not significant. The drug is not yet FDA approved."
)
SUPPLEMENT = (
    "One small study suggested a possible modest effect of the supplement on sleep, "
    "not statistically significant."
)


def test_the_course_example_large_benefit_over_a_non_significant_result() -> None:
    finding = overstated("The drug produced a large benefit.", TRIAL)
    assert finding == OverstatementFinding(
        strong=("large",),
        hedges=("not significant",),
        evidence_sentence="The result was not significant.",
    )
    assert finding.reason == OVERSTATED
    assert finding.reason_text == (
        "OVERSTATED: claim says large; the evidence hedges (not significant): "
        "The result was not significant."
    )


def test_significant_benefit_over_a_small_suggestive_study() -> None:
    finding = overstated("Studies show a significant benefit of the supplement.", SUPPLEMENT)
    assert finding is not None
    assert finding.strong == ("significant",)
    assert finding.hedges == (
        "small study",
        "suggested",
        "modest effect",
        "not statistically significant",
    )


@pytest.mark.parametrize(
    ("claim", "evidence", "strong", "hedge"),
    [
        (
            "The supplement always improves sleep.",
            "The supplement improved sleep in some cases (p = 0.3).",
            "always",
            "p = 0.3",
        ),
        (
            "Coffee is proven to prevent heart disease.",
            "Coffee intake was associated with lower rates of heart disease.",
            "proven",
            "associated with",
        ),
        (
            "The new tariff dramatically reduced customer complaints.",
            "Preliminary figures suggest the new tariff may have reduced customer complaints.",
            "dramatically",
            "preliminary",
        ),
        (
            "The therapy definitely lowers blood pressure.",
            "The therapy lowered blood pressure (hazard ratio 0.9, 95% CI 0.7 to 1.2).",
            "definitely",
            "interval 0.7 to 1.2 crosses the null",
        ),
    ],
)
def test_strong_words_over_hedges(claim: str, evidence: str, strong: str, hedge: str) -> None:
    finding = overstated(claim, evidence)
    assert finding is not None
    assert strong in finding.strong
    assert hedge in finding.hedges


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        # the evidence uses the strong word itself
        (
            "The supplement significantly lowers blood pressure.",
            "The supplement significantly lowered blood pressure, though the trial was small "
            "and may not generalise.",
        ),
        # the hedge is about another matter
        ("The supplement always improves sleep.", "The weather may change tomorrow."),
        # a claim without a strong word
        ("The drug cut infection risk by half.", TRIAL),
        # the claim negates the strong word
        ("The drug did not produce a significant benefit.", TRIAL),
        ("The drug didn't produce a large benefit.", TRIAL),
        # the claim hedges itself
        ("The drug may have a large benefit.", TRIAL),
        # a significant result with p < 0.05 is no hedge
        ("The drug significantly cut infection risk.", "The drug cut infection risk (p < 0.01)."),
        # "May" the month is no hedge
        (
            "All stores reopened in the spring.",
            "The stores reopened in May 2021 after the lockdown in the spring.",
        ),
    ],
)
def test_no_overstatement(claim: str, evidence: str) -> None:
    assert overstated(claim, evidence) is None


def test_evidence_using_the_strong_word_only_negated_still_hedges() -> None:
    finding = overstated(
        "The supplement had a significant effect on sleep.",
        "The effect of the supplement on sleep was not significant.",
    )
    assert finding is not None and finding.hedges == ("not significant",)
