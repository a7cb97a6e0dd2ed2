"""From claim verdicts to what the product does with the answer: pass, trim or withhold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from streamproc.contracts.events import (
    Action,
    AnswerJudgement,
    ClaimVerdict,
    Outcome,
    UnverifiedReason,
    VerdictLabel,
)

__all__ = ["decide", "not_checked"]


def decide(
    claims: Sequence[ClaimVerdict],
    sentence_texts: Sequence[str],
    *,
    abstained: bool,
    answerable: bool | None,
    hallucinated: bool | None = None,
    unverified_reason: UnverifiedReason | None = None,
) -> AnswerJudgement:
    """Answer-level judgement from the claim verdicts.

    ``answerable`` is None on live traffic (unknown) and then counts as answerable. An
    answer is *hallucinated* when any checked claim is contradicted or unsupported,
    unless ``hallucinated=False`` clears it: the answer-level decision
    (:mod:`streamproc.judge.decision.answer`) knows how many claims were tested. Only
    a hallucinated answer is trimmed: its refuted *sentences* are what a trim removes,
    and a trim that would leave no supported claim standing withholds instead.

    A claim whose verdict is ``unverified`` (not checked in time, or in a language the
    judge was not measured on) counts neither as checked nor as refuted: the answer is
    then not ``verified`` (``unverified_reason`` says why) and, unless a checked claim
    refutes it, its outcome is ``unverified`` - never correct.
    """
    unverified = any(c.verdict is VerdictLabel.UNVERIFIED for c in claims)
    checked = [
        c for c in claims if c.verdict is not None and c.verdict is not VerdictLabel.UNVERIFIED
    ]
    supported = [c for c in checked if c.verdict is VerdictLabel.SUPPORTED]
    contradicted = sum(c.verdict is VerdictLabel.CONTRADICTED for c in checked)
    unsupported = sum(c.verdict is VerdictLabel.UNSUPPORTED for c in checked)
    # the answer-level decision may clear an answer, never flag one whose claims all hold
    hallucinated = contradicted + unsupported > 0 and hallucinated is not False

    if abstained and not checked and not unverified:
        outcome = Outcome.ABSTAINED
    elif unverified and not hallucinated:
        outcome = Outcome.UNVERIFIED
    elif not hallucinated and answerable is not False:
        outcome = Outcome.CORRECT
    else:
        outcome = Outcome.WRONG  # an unsupported claim, or a confident answer to the unanswerable

    refuted = sorted({c.sentence_index for c in checked if c.verdict is not VerdictLabel.SUPPORTED})
    survivors = [c for c in supported if c.sentence_index not in refuted]
    if not hallucinated:
        action = Action.PASS
    elif survivors:
        action = Action.TRIM
    else:
        action = Action.WITHHOLD

    severity: Literal["contradicted", "unsupported"] | None
    severity = None
    if hallucinated:
        severity = "contradicted" if contradicted else "unsupported"
    return AnswerJudgement(
        claims=list(claims),
        checked_claims=len(checked),
        supported_claims=len(supported),
        contradicted_claims=contradicted,
        unsupported_claims=unsupported,
        faithfulness=len(supported) / len(checked) if checked else None,
        hallucinated=hallucinated,
        abstained=abstained,
        outcome=outcome,
        action=action,
        trim_sentences=[sentence_texts[i] for i in refuted] if action is Action.TRIM else [],
        severity=severity,
        verified=not unverified,
        unverified_reason=(unverified_reason or UnverifiedReason.BUDGET_EXCEEDED)
        if unverified
        else None,
    )


def not_checked(reason: UnverifiedReason) -> AnswerJudgement:
    """The judgement of an answer nothing was checked of - not even split into claims (a
    gate shedding load answers at once): unverified, and passed only by a policy."""
    return AnswerJudgement(
        claims=[],
        checked_claims=0,
        supported_claims=0,
        contradicted_claims=0,
        unsupported_claims=0,
        faithfulness=None,
        hallucinated=False,
        abstained=False,
        outcome=Outcome.UNVERIFIED,
        action=Action.PASS,
        verified=False,
        unverified_reason=reason,
    )
