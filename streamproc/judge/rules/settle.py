"""The checks that need no model: token confidence, record checks, record values, which
of two dated things came first, and the name and number rules.

Some findings are *hard*: a value the record plainly contradicts, a call that was never
executed, a sentence the answering model was guessing at. They settle the claim, with
or without a calibrator. The name and number rules are *soft* when a calibrator
decides: on real summaries a paraphrased name or a spelled-out figure makes them fire on
faithful sentences, so they become signals and reasons instead of verdicts. Without a
calibrator they settle the claim, as the NLI-only judge always did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamproc.contracts.events import AnswerEvent, ClaimClass, ConfidenceMark, VerdictLabel
from streamproc.contracts.reasons import Reason
from streamproc.judge.nli.retrieval import names
from streamproc.judge.records.case_check import CaseCheck
from streamproc.judge.records.structured import StructuredEvidence, ValueFinding, ValueReason
from streamproc.judge.rules.comparisons import ComparisonFinding, check_comparison, parse_question
from streamproc.judge.rules.confidence import SentenceConfidence
from streamproc.judge.text.claims import AnswerClaim
from streamproc.judge.text.document_claims import about_document, topic_reason
from streamproc.judge.text.features import numbers
from streamproc.judge.text.name_forms import known_name

__all__ = ["EvidenceFacts", "Prechecks", "Settled", "precheck"]


@dataclass(frozen=True, slots=True)
class Settled:
    """A verdict with its score, reasons and the evidence that decided it."""

    verdict: VerdictLabel
    score: float
    reasons: tuple[Reason, ...]
    evidence_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EvidenceFacts:
    """What the model-free checks need about one answer's evidence, computed once."""

    names_text: str
    """The evidence as names are compared in (:func:`streamproc.judge.text.name_forms.fold`)."""
    numbers: frozenset[str]
    words: frozenset[str]
    structured: StructuredEvidence
    word_count: int


@dataclass(frozen=True, slots=True)
class Prechecks:
    """The model-free findings on one claim: a hard verdict (or None) and the rest."""

    hard: Settled | None
    soft_reasons: tuple[Reason, ...] = ()
    unknown_numbers: int = 0
    unknown_names: int = 0
    values: tuple[ValueFinding, ...] = ()
    notes: tuple[Reason, ...] = ()
    """Said on the verdict whatever decides it (a record field that did not parse)."""
    record_confirmed: int = 0

    def count(self, reason: ValueReason) -> int:
        return sum(v.reason is reason for v in self.values)


def precheck(
    answer: AnswerEvent,
    claim: AnswerClaim,
    confidence: SentenceConfidence | None,
    facts: EvidenceFacts,
    *,
    soft_rules: bool,
    case: CaseCheck | None = None,
    case_regime: bool = False,
) -> Prechecks:
    """Levels 1 and 2a - token confidence, then the record checks (``case``, computed by
    the caller for every claim of an answer with records, in order) - then record values
    and the name and number rules. In the case regime (records with fields, tool
    results) the typed record checks are the deterministic level: the name and number
    rules stay signals there, never reasons or verdicts."""
    if confidence is not None and confidence.mark is ConfidenceMark.CUT:
        return Prechecks(Settled(VerdictLabel.UNSUPPORTED, 0.0, tuple(confidence.reasons)))
    notes = case.notes if case is not None else ()
    confirmed = len(case.confirmations) if case is not None else 0
    finding = case.finding if case is not None else None
    if finding is not None and finding.verdict is not None:
        ids = (finding.evidence_id,) if finding.evidence_id else ()
        settled = Settled(finding.verdict, 0.0, (finding.reason_text,), ids)
        return Prechecks(settled, notes=notes, record_confirmed=confirmed)
    unnamed = sorted(n for n in names(claim.text) if not known_name(n, facts.names_text))
    missing = sorted(numbers(claim.text) - facts.numbers)
    if case_regime:
        return Prechecks(
            None,
            unknown_numbers=len(missing),
            unknown_names=len(unnamed),
            notes=notes,
            record_confirmed=confirmed,
        )
    values = tuple(facts.structured.compare(claim.text)) if not facts.structured.empty else ()
    if claim.claim_class is ClaimClass.DOCUMENT:
        topic = _topic_check(claim, facts, len(unnamed) + len(missing))
        if topic is not None:
            return Prechecks(topic, (), len(missing), len(unnamed))
    name_reason = Reason("NAME_NOT_IN_EVIDENCE", ", ".join(unnamed)) if unnamed else None
    number_reason = _number_reason(missing, bool(facts.numbers))
    soft = tuple(r for r in (name_reason, number_reason) if r is not None)
    soft += tuple(v.reason_text for v in values if v.reason is ValueReason.FIELD_NOT_IN_RECORD)
    compared = _compare(answer, claim)
    if compared is not None and compared.holds and not compared.whole:
        soft += (compared.reason_text,)  # the pick holds; the rest of the claim is the model's
    hard: Settled | None = None
    mismatches = [v for v in values if v.reason is ValueReason.VALUE_MISMATCH]
    if mismatches:
        hard = Settled(
            VerdictLabel.CONTRADICTED,
            0.0,
            tuple(v.reason_text for v in mismatches),
            tuple(dict.fromkeys(v.evidence_id for v in mismatches)),
        )
    elif compared is not None and (compared.whole or not compared.holds):
        verdict = VerdictLabel.SUPPORTED if compared.holds else VerdictLabel.CONTRADICTED
        reasons = (compared.reason_text,)
        hard = Settled(verdict, float(compared.holds), reasons, compared.evidence_ids)
    elif not soft_rules and name_reason is not None:
        hard = Settled(VerdictLabel.UNSUPPORTED, 0.0, (name_reason,))
    elif not soft_rules and number_reason is not None:
        verdict = VerdictLabel.CONTRADICTED if facts.numbers else VerdictLabel.UNSUPPORTED
        hard = Settled(verdict, 0.0, (number_reason,))
    return Prechecks(hard, soft, len(missing), len(unnamed), values, notes, confirmed)


def _topic_check(claim: AnswerClaim, facts: EvidenceFacts, unknown: int) -> Settled | None:
    """ "The article discusses X" is settled by whether X is what the evidence is about;
    None for the other sentences about the document ("the author argues that Y"), which
    the verifier reads as Y."""
    about = about_document(claim.text)
    if about is None or about.kind != "topic":
        return None
    reason = topic_reason(about.content, facts.words, unknown)
    if reason is None:
        share = Reason("ABOUT_DOCUMENT", f"the topic is the evidence's ({about.content[:80]})")
        return Settled(VerdictLabel.SUPPORTED, 1.0, (share,))
    return Settled(VerdictLabel.UNSUPPORTED, 0.0, (reason,))


def _compare(answer: AnswerEvent, claim: AnswerClaim) -> ComparisonFinding | None:
    """The evidence's years against a pick between two dated things, when the question
    asks for one ("Who was born first, A or B?")."""
    question = parse_question(answer.question) if answer.question else None
    if question is None:
        return None
    return check_comparison(question, claim.text, [(e.id, e.text) for e in answer.evidence])


def _number_reason(missing: Sequence[str], any_numbers: bool) -> Reason | None:
    if not missing:
        return None
    shown = ", ".join(missing)
    if any_numbers:
        return Reason("NUMBER_MISMATCH", f"{shown} not in the evidence")
    return Reason("NUMBER_NOT_IN_EVIDENCE", shown)
