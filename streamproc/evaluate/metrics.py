"""The numbers behind ``agree`` and ``score``, computed once and rendered elsewhere."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from streamproc.contracts.events import Outcome, VerdictLabel
from streamproc.evaluate.cases import CaseResult
from streamproc.rates.stats import wilson_interval

__all__ = ["VERDICTS", "Agreement", "Scores", "agreement", "scores"]

VERDICTS = (VerdictLabel.SUPPORTED, VerdictLabel.CONTRADICTED, VerdictLabel.UNSUPPORTED)
"""The verdicts a judge gives when it checks a claim. ``unverified`` is not one: a claim
left unverified (a language the judge was not measured on) is counted apart, never as
agreeing, caught, or a false alarm."""


@dataclass(frozen=True, slots=True)
class Agreement:
    """Judge against person, per claim (and per answer, where the person gave a call).

    *caught*: hallucinated claims (person: not supported) the judge also flags, in any
    way; a miss reaches the user. *false alarms*: good claims the judge flags; each costs
    a reviewer's time.
    """

    matrix: Counter[tuple[VerdictLabel, VerdictLabel]]  # (person, judge) -> claims
    claims: int
    agreed: int
    bad: int
    caught: int
    good: int
    false_alarms: int
    answers_bad: int
    answers_caught: int
    answers_good: int
    answers_false_alarms: int
    uncovered_spans: int
    unverified: int = 0
    """Person-labelled claims the judge left unverified: in none of the counts above."""
    unverified_answers: int = 0
    """Answers not verified: left out of the answer-level counts."""


def agreement(results: Sequence[CaseResult]) -> Agreement:
    labelled = [
        (person, claim.verdict)
        for r in results
        for claim, person in zip(r.judgement.claims, r.person, strict=True)
        if person is not None and claim.verdict is not None
    ]
    pairs = [(person, judge) for person, judge in labelled if judge is not VerdictLabel.UNVERIFIED]
    bad = [judge for person, judge in pairs if person is not VerdictLabel.SUPPORTED]
    good = [judge for person, judge in pairs if person is VerdictLabel.SUPPORTED]
    answered = [
        (r.person_hallucinated, r.judgement.hallucinated)
        for r in results
        if r.judgement.verified and r.judgement.checked_claims and r.person_hallucinated is not None
    ]
    return Agreement(
        matrix=Counter(pairs),
        claims=len(pairs),
        agreed=sum(person == judge for person, judge in pairs),
        bad=len(bad),
        caught=sum(judge is not VerdictLabel.SUPPORTED for judge in bad),
        good=len(good),
        false_alarms=sum(judge is not VerdictLabel.SUPPORTED for judge in good),
        answers_bad=sum(person for person, _ in answered),
        answers_caught=sum(person and judge for person, judge in answered),
        answers_good=sum(not person for person, _ in answered),
        answers_false_alarms=sum(judge and not person for person, judge in answered),
        uncovered_spans=sum(r.uncovered_spans for r in results),
        unverified=len(labelled) - len(pairs),
        unverified_answers=sum(not r.judgement.verified for r in results),
    )


@dataclass(frozen=True, slots=True)
class Scores:
    """The course's score report, over the judge's verdicts."""

    cases: int
    claims: int
    supported: int
    contradicted: int
    unsupported: int
    answered: int
    hallucinated: int
    interval: tuple[float, float] | None
    person_hallucinated: int
    person_known: int
    recall_hits: int
    recall_total: int
    needed_citations: int
    citations: int
    unanswerable: int
    right_abstentions: int
    answerable: int
    false_abstentions: int
    answerable_unknown: int
    outcomes: dict[Outcome, int]
    penalty: float
    unverified: int = 0
    """Answers the judge could not check (``verified`` false): outside the rate, never
    faithful; their outcome is ``unverified`` unless a checked claim refuted them."""
    unverified_claims: int = 0
    """Claims left ``unverified``: outside ``claims`` and faithfulness."""

    @property
    def risk_weighted(self) -> float:
        """correct +1, abstain 0, wrong -penalty: only this rewards declining over guessing.
        An unverified answer scores 0: nothing was decided about it."""
        return self.outcomes[Outcome.CORRECT] - self.penalty * self.outcomes[Outcome.WRONG]


def scores(results: Sequence[CaseResult], penalty: float) -> Scores:
    judged = [c for r in results for c in r.judgement.claims if c.verdict is not None]
    claims = [c for c in judged if c.verdict is not VerdictLabel.UNVERIFIED]
    supported = [c for c in claims if c.verdict is VerdictLabel.SUPPORTED]
    graded = [c for c in supported if c.citation_supported is not None]
    needed = [flag for c in claims for flag in c.citations_needed]
    answered = [r for r in results if r.judgement.verified and r.judgement.checked_claims]
    hallucinated = sum(r.judgement.hallucinated for r in answered)
    person = [r.person_hallucinated for r in answered if r.person_hallucinated is not None]
    unanswerable = [r for r in results if r.case.event.answerable is False]
    answerable = [r for r in results if r.case.event.answerable is True]
    return Scores(
        cases=len(results),
        claims=len(claims),
        supported=len(supported),
        contradicted=sum(c.verdict is VerdictLabel.CONTRADICTED for c in claims),
        unsupported=sum(c.verdict is VerdictLabel.UNSUPPORTED for c in claims),
        answered=len(answered),
        hallucinated=hallucinated,
        interval=wilson_interval(hallucinated, len(answered)),
        person_hallucinated=sum(person),
        person_known=len(person),
        recall_hits=sum(bool(c.citation_supported) for c in graded),
        recall_total=len(graded),
        needed_citations=sum(needed),
        citations=len(needed),
        unanswerable=len(unanswerable),
        right_abstentions=sum(r.judgement.outcome is Outcome.ABSTAINED for r in unanswerable),
        answerable=len(answerable),
        false_abstentions=sum(r.judgement.outcome is Outcome.ABSTAINED for r in answerable),
        answerable_unknown=len(results) - len(unanswerable) - len(answerable),
        outcomes={o: sum(r.judgement.outcome is o for r in results) for o in Outcome},
        penalty=penalty,
        unverified=sum(not r.judgement.verified for r in results),
        unverified_claims=len(judged) - len(claims),
    )
