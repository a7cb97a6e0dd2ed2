"""Caps on the work one answer may cost: claims checked, evidence units read, and the
length of each (:class:`JudgeLimits`; ``STREAMPROC_JUDGE__LIMITS__*`` sets them).

A hostile or broken answer (200 claims, a 5,000-character "sentence", 1,000 evidence
sentences) must not stall a worker that judges everyone's answers. So, before the
checks run:

- the answer text handed to the decomposer is cut at ``max_claims * max_claim_chars``;
  the claims of the sentence the cut falls in are left unchecked;
- a claim longer than ``max_claim_chars`` is left unchecked (``LIMIT_CLAIM_CHARS``);
- claims to check beyond the first ``max_claims`` are left unchecked (``LIMIT_CLAIMS``);
- evidence units (sentences, record fields) beyond the first ``max_evidence_units`` are
  dropped (``LIMIT_UNITS``); a window survives when all of its sentences do;
- a unit longer than ``max_unit_chars`` is cut to that length (``LIMIT_UNIT_CHARS``).

Never silent: every cap hit is a ``"CODE: detail"`` entry of
``AnswerJudgement.limits``, and every claim left out is listed with ``verdict=None``
and the same code as its reason. Normal answers are far below every cap, and nothing
here changes them.

An answer with claims left out keeps ``hallucinated``, ``faithfulness`` and ``action``
computed from the claims that *were* checked. A claim nobody checked is unknown, not
refuted: counting it as hallucinated would withhold or flag answers for being long
(and inflate the hallucination rate with claims no judge looked at); counting it as
supported would claim a check that never happened. The answer is therefore never
reported as *fully* checked: ``limits`` says how many claims were left out, which the
consumer sees next to the verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from streamproc.contracts.events import AnswerJudgement, ClaimVerdict, EvidenceItem, VerdictLabel
from streamproc.contracts.reasons import Reason
from streamproc.judge.text.claims import AnswerClaim, Decomposition, Granularity, decompose
from streamproc.judge.text.evidence import QUESTION_ID, EvidenceUnit

__all__ = [
    "CappedShape",
    "CappedUnits",
    "JudgeLimits",
    "cap_claims",
    "cap_units",
    "capped_evidence",
    "decompose_within",
    "unchecked_verdict",
    "unverified_verdict",
    "with_limits",
]


@dataclass(frozen=True)
class JudgeLimits:
    """Caps on the work one answer may cost. The judge owns them so that it needs no
    settings library; the settings compose them (defaults must match)."""

    max_claims: int = 64
    max_evidence_units: int = 400
    max_claim_chars: int = 1000
    max_unit_chars: int = 2000


def unchecked_verdict(claim: AnswerClaim, *reasons: Reason) -> ClaimVerdict:
    """The verdict record of a claim before (or without) checking it: a conversational
    claim, or one a cap left out (then ``reasons`` names the cap)."""
    return ClaimVerdict(
        index=claim.index,
        sentence_index=claim.sentence_index,
        text=claim.text,
        start=claim.start,
        end=claim.end,
        claim_class=claim.claim_class,
        citations=[
            r if r is not None else c for r, c in zip(claim.resolved, claim.citations, strict=True)
        ],
        reasons=list(reasons),
    )


def unverified_verdict(claim: AnswerClaim, reason: Reason) -> ClaimVerdict:
    """A claim that should have been checked and was not (``reason``: an
    :class:`~streamproc.contracts.events.UnverifiedReason` value, e.g. the budget ran out)."""
    return unchecked_verdict(claim, reason).model_copy(update={"verdict": VerdictLabel.UNVERIFIED})


# ------------------------------------------------------------------------------ claims


@dataclass(frozen=True, slots=True)
class CappedShape:
    """One answer's decomposition within the caps.

    ``shape`` holds the claims to judge (those within the caps, and conversational ones);
    ``left_out`` the verdict records of the claims a cap kept from being checked.
    """

    shape: Decomposition
    left_out: tuple[ClaimVerdict, ...] = ()
    limits: tuple[str, ...] = ()

    def verdicts(self, judged: Sequence[ClaimVerdict]) -> list[ClaimVerdict]:
        """The judged claims' verdicts with the left-out ones, in claim order."""
        if not self.left_out:
            return list(judged)
        return sorted([*judged, *self.left_out], key=lambda v: v.index)


def decompose_within(
    answer: str,
    evidence: Sequence[EvidenceItem],
    granularity: Granularity,
    limits: JudgeLimits,
    *,
    document_claims: bool = True,
) -> CappedShape:
    """:func:`decompose` on at most ``max_claims * max_claim_chars`` characters of
    ``answer``, then :func:`cap_claims`. Offsets stay those of the original answer."""
    budget = limits.max_claims * limits.max_claim_chars
    if len(answer) <= budget:
        return cap_claims(
            decompose(answer, evidence, granularity, document_claims=document_claims), limits
        )
    shape = decompose(answer[:budget], evidence, granularity, document_claims=document_claims)
    note = (
        f"LIMIT_CLAIMS: answer of {len(answer)} characters cut at {budget} before "
        "decomposition; the rest was not checked"
    )
    last = shape.sentences[-1].index if shape.sentences else -1
    reason = Reason(
        "LIMIT_CLAIMS", f"in the sentence cut where the answer was cut at {budget} characters"
    )
    return cap_claims(shape, limits, cut_sentence=last, cut_reason=reason, notes=(note,))


def cap_claims(
    shape: Decomposition,
    limits: JudgeLimits,
    *,
    cut_sentence: int | None = None,
    cut_reason: Reason | None = None,
    notes: tuple[str, ...] = (),
) -> CappedShape:
    """Leave out of ``shape`` the claims over ``max_claim_chars``, the claims of
    ``cut_sentence`` (a sentence cut short), and the claims to check beyond the first
    ``max_claims``. Conversational claims are never checked, so they never count."""
    kept: list[AnswerClaim] = []
    left: list[ClaimVerdict] = []
    too_long = beyond = checked = 0
    for claim in shape.claims:
        if not claim.checked:
            kept.append(claim)
        elif claim.sentence_index == cut_sentence and cut_reason is not None:
            left.append(unchecked_verdict(claim, cut_reason))
        elif len(claim.text) > limits.max_claim_chars:
            too_long += 1
            left.append(
                unchecked_verdict(
                    claim,
                    Reason(
                        "LIMIT_CLAIM_CHARS",
                        f"claim of {len(claim.text)} characters, over the cap "
                        f"of {limits.max_claim_chars}",
                    ),
                )
            )
        elif checked >= limits.max_claims:
            beyond += 1
            left.append(
                unchecked_verdict(
                    claim,
                    Reason(
                        "LIMIT_CLAIMS",
                        f"claim {checked + beyond} beyond the cap of "
                        f"{limits.max_claims} per answer",
                    ),
                )
            )
        else:
            checked += 1
            kept.append(claim)
    if not left:
        return CappedShape(shape, (), notes)
    found = list(notes)
    if beyond:
        found.append(
            f"LIMIT_CLAIMS: {beyond} of {checked + beyond} claims to check left unchecked "
            f"(cap {limits.max_claims} per answer)"
        )
    if too_long:
        found.append(
            f"LIMIT_CLAIM_CHARS: {too_long} claim(s) over {limits.max_claim_chars} characters "
            "left unchecked"
        )
    return CappedShape(replace(shape, claims=tuple(kept)), tuple(left), tuple(found))


# ------------------------------------------------------------------------------- units


@dataclass(frozen=True, slots=True)
class CappedUnits:
    """The evidence units an answer is checked against, within the caps."""

    units: list[EvidenceUnit]
    limits: tuple[str, ...] = ()


def cap_units(units: Sequence[EvidenceUnit], limits: JudgeLimits) -> CappedUnits:
    """The first ``max_evidence_units`` sentence and field units in order, the windows
    made only of kept sentences (a window adds no text of its own to read), and every
    kept unit cut to ``max_unit_chars``."""
    sentences = [u for u in units if not u.is_window]
    found: list[str] = []
    kept = list(units)
    if len(sentences) > limits.max_evidence_units:
        dropped = len(sentences) - limits.max_evidence_units
        found.append(
            f"LIMIT_UNITS: {dropped} of {len(sentences)} evidence units (sentences, fields) "
            f"dropped beyond the cap of {limits.max_evidence_units} per answer"
        )
        present = {(u.evidence_id, u.first) for u in sentences[: limits.max_evidence_units]}
        kept = [
            u
            for u in units
            if all((u.evidence_id, k) in present for k in range(u.first, u.last + 1))
        ]
    cap = limits.max_unit_chars
    long = [u for u in kept if len(u.text) > cap]
    if long:
        longest = max(len(u.text) for u in long)
        found.append(
            f"LIMIT_UNIT_CHARS: {len(long)} evidence unit(s) cut to {cap} characters "
            f"(longest {longest})"
        )
        kept = [replace(u, text=u.text[:cap]) if len(u.text) > cap else u for u in kept]
    return CappedUnits(kept, tuple(found))


def capped_evidence(
    question: str | None, evidence: Sequence[EvidenceItem], capped: CappedUnits
) -> tuple[str | None, list[EvidenceItem]]:
    """The question and evidence items as the kept sentence units say them, for a judge
    that reads whole items (the rules judge). Only meaningful when a cap was hit; below
    the caps the judge reads the items as they are."""
    texts: dict[str, list[str]] = {}
    for unit in capped.units:
        if not unit.is_window:
            texts.setdefault(unit.evidence_id, []).append(unit.text)
    asked = " ".join(texts.pop(QUESTION_ID, [])) or None
    joined = {evidence_id: " ".join(parts) for evidence_id, parts in texts.items()}
    items = []
    for item in evidence:
        # The kept units of an id go to its first item only: items sharing an id would
        # otherwise each repeat all of them (n items x kept units, a quadratic premise).
        items.append(item.model_copy(update={"text": joined.pop(item.id, "")}))
    return asked if question else None, items


# ------------------------------------------------------------------------------ answer


def with_limits(judgement: AnswerJudgement, *found: Sequence[str]) -> AnswerJudgement:
    """``judgement`` with the cap hits of ``found`` on it (unchanged when there are none)."""
    entries = [entry for part in found for entry in part]
    if not entries:
        return judgement
    return judgement.model_copy(update={"limits": [*judgement.limits, *entries]})
