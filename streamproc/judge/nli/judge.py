"""The NLI judge: the two-level check of the spec, batched across answers.

Per claim, cheapest first, so most claims never reach the model:

1. Level 1 - token confidence (when the answer carries log-probabilities): a degenerate
   sentence or a shaky specific the records do not confirm is cut (unsupported).
2. Level 2a - deterministic record checks for claims about a case (reason codes such as
   ``AMOUNT_MISMATCH``, ``NOT_EXECUTED``), a pick between two dated things against their
   years (:mod:`~streamproc.judge.rules.comparisons`), then numbers: a figure the evidence
   never states is contradicted (the evidence has other figures) or unsupported.
3. Level 2b - NLI over the top-k retrieved evidence units (sentences, windows, flattened
   record fields; never the whole concatenated evidence): supported when entailment
   clears its threshold on some unit - or, in a task such as a summary, on the top
   units' sentences read together (:mod:`~streamproc.judge.nli.premises`); contradicted when
   a unit that talks about the same thing contradicts it clearly, or flips its negation
   (a hard verdict only in the regimes where flips proved reliable); unsupported
   otherwise (:mod:`~streamproc.judge.nli.decision`). A supported strong claim over
   hedged evidence becomes unsupported (``OVERSTATED``). Sentences about the document
   ("the article discusses X") are checked for topic
   (:mod:`~streamproc.judge.text.document_claims`).
4. With calibrators, the claim calibrator turns the signals into each claim's risk and
   verdict, and the answer calibrator decides the answer from those risks and their
   number (:mod:`~streamproc.judge.decision.answer`).

Citations are judged the same way on the cited evidence alone. The whole batch makes one
embedding call (of the evidence sentences worth embedding: :mod:`~streamproc.judge.nli.shortlist`)
and batched NLI calls in rounds, a claim's candidates asked until one decides it
(:mod:`~streamproc.judge.nli.rounds`); the models are injected (``PairScorer``,
``TextEmbedder``), so tests use fakes and the judge stays free of I/O. The work caps
(:mod:`streamproc.judge.limits`) bound what one answer adds to those calls; each
answer's own steps run against its deadline (:mod:`streamproc.judge.deadline`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from streamproc.contracts.events import (
    AnswerEvent,
    AnswerJudgement,
    ClaimClass,
    ClaimVerdict,
    ConfidenceMark,
    JudgeInfo,
    UnverifiedReason,
    VerdictLabel,
)
from streamproc.judge.deadline import Deadline
from streamproc.judge.decision.actions import decide
from streamproc.judge.decision.answer import AnswerCalibrator
from streamproc.judge.decision.calibrated import calibrated_decision
from streamproc.judge.decision.calibrator import ALL_REGIMES, VerdictCalibrator
from streamproc.judge.decision.hard_findings import has_hard_finding
from streamproc.judge.decision.signals import SIGNAL_NAMES, ClaimEvidence, claim_signals
from streamproc.judge.engine import citation_reasons
from streamproc.judge.limits import (
    cap_units,
    decompose_within,
    unchecked_verdict,
    unverified_verdict,
    with_limits,
)
from streamproc.judge.nli.decision import NliThresholds, decide_claim, flips, item_text
from streamproc.judge.nli.options import NliOptions
from streamproc.judge.nli.premises import COMPOSED_WORDS
from streamproc.judge.nli.retrieval import rank_candidates
from streamproc.judge.nli.rounds import ask_composed, ask_in_rounds
from streamproc.judge.nli.shortlist import lexical_shortlist
from streamproc.judge.nli.units import statements_only, unit_vectors, window_members
from streamproc.judge.nli.work import (
    AnswerWork,
    ClaimWork,
    cited_units,
    needs_evidence,
)
from streamproc.judge.protocols import NliScore, PairScorer, TextEmbedder
from streamproc.judge.records.case_check import CaseChecker
from streamproc.judge.records.confirmation import confirmed_values
from streamproc.judge.records.record_values import ZeroLengthHours
from streamproc.judge.records.structured import StructuredEvidence, ValueReason
from streamproc.judge.rules.citations import assess_citations, citation_subsets
from streamproc.judge.rules.confidence import (
    ConfidenceThresholds,
    SentenceConfidence,
    sentence_confidence,
)
from streamproc.judge.rules.overstatement import overstated
from streamproc.judge.rules.settle import EvidenceFacts, Prechecks, Settled, precheck
from streamproc.judge.stage_times import stage
from streamproc.judge.text.claims import Claim, Granularity
from streamproc.judge.text.evidence import build_units, is_structured
from streamproc.judge.text.features import content_words, numbers
from streamproc.judge.text.name_forms import fold

__all__ = ["NLI_JUDGE_VERSION", "NliJudge", "NliOptions", "NliThresholds"]

NLI_JUDGE_VERSION = "2"


class NliJudge:
    """``Judge`` with records, token confidence, retrieval and an NLI cross-encoder."""

    def __init__(
        self,
        scorer: PairScorer,
        embedder: TextEmbedder,
        options: NliOptions | None = None,
        *,
        calibrator: VerdictCalibrator | None = None,
        answer_calibrator: AnswerCalibrator | None = None,
        records: CaseChecker | None = None,
    ) -> None:
        """``options``: what to check and where the lines are (:class:`NliOptions`).

        ``calibrator`` decides supported / not supported from the claim's signals (hard
        findings still settle claims). ``records``: the record checks (locale, lifecycles;
        the built-in ones by default). ``answer_calibrator`` decides whether the answer is
        hallucinated from its calibrated claims' risks and their number
        (:mod:`streamproc.judge.decision.answer`); without one, any claim not supported
        flags it. It needs ``calibrator``.
        """
        options = options or NliOptions()
        if calibrator is not None:
            calibrator.check_signals(SIGNAL_NAMES)
            calibrator.check_models(scorer.model_name, embedder.model_name)
        if answer_calibrator is not None:
            if calibrator is None:
                raise ValueError("an answer calibrator reads claim risks: give a calibrator")
            answer_calibrator.check_claim_calibrator(calibrator.name)
        self._calibrator = calibrator
        self._answer_calibrator = answer_calibrator
        self._records = records or CaseChecker()
        soft_rules = options.soft_rules
        self._soft_rules = calibrator is not None if soft_rules is None else soft_rules
        self._scorer = scorer
        self._embedder = embedder
        self._thresholds = options.thresholds
        self._confidence = options.confidence
        self._confidence_by_model = dict(options.confidence_by_model)
        self._granularity: Granularity = options.granularity
        self._top_k = options.top_k
        self._window = options.window_sentences
        self._limits = options.limits
        self._decisive = options.decisive_entailment
        self._shortlist = options.shortlist_sentences
        self._composed_regimes = frozenset(options.composed_premise_regimes)
        self._hard_negation = frozenset(options.hard_negation_regimes)
        self._document_claims = options.document_claims
        self._zero_length_hours: ZeroLengthHours = options.zero_length_hours
        self.pairs_scored = 0
        self._info = JudgeInfo(
            name="nli",
            version=NLI_JUDGE_VERSION,
            granularity=options.granularity,
            thresholds={
                **self._thresholds.as_dict(),
                **self._confidence.as_dict(),
                **dict(options.model_thresholds),
                "top_k": float(options.top_k),
                "window_sentences": float(options.window_sentences),
                **_optional("decisive_entailment", options.decisive_entailment),
                **_optional("shortlist_sentences", options.shortlist_sentences),
                **_regime_flags("composed_premise", self._composed_regimes),
                **_regime_flags("hard_negation", self._hard_negation),
                "document_claims": float(options.document_claims),
                "zero_length_hours_closed": float(options.zero_length_hours == "closed"),
                **_optional(
                    "composed_premise_words",
                    COMPOSED_WORDS if options.composed_premise_regimes else None,
                ),
            },
            models={scorer.model_name: scorer.sha256, embedder.model_name: embedder.sha256},
            options=self._records.describe(),
        )
        if calibrator is not None:
            self._info = self._info.model_copy(
                update={
                    "thresholds": {**self._info.thresholds, **calibrator.describe()},
                    "models": {**self._info.models, calibrator.name: calibrator.sha256},
                }
            )
        if answer_calibrator is not None:
            self._info = self._info.model_copy(
                update={
                    "thresholds": {**self._info.thresholds, **answer_calibrator.describe()},
                    "models": {
                        **self._info.models,
                        answer_calibrator.name: answer_calibrator.sha256,
                    },
                }
            )

    @property
    def info(self) -> JudgeInfo:
        return self._info

    def judge_batch(
        self, answers: Sequence[AnswerEvent], *, deadline_s: float | None = None
    ) -> list[AnswerJudgement]:
        """One judgement per answer, in order. ``deadline_s`` bounds each answer's own
        steps (not the shared model calls): over it, ``AnswerTimedOut`` names the answer."""
        works = self._claims_with_evidence(answers, deadline_s)
        with stage("nli"):  # batched model calls for every answer of the batch
            lookup = self._ask(works)
        with stage("decide"):
            return [self._assemble(work, lookup) for work in works]

    def settle_batch(
        self, answers: Sequence[AnswerEvent], *, reason: UnverifiedReason
    ) -> list[AnswerJudgement]:
        """The cheap checks alone (``SettlesCheaply``): decomposition, token confidence,
        record checks and values, with no embedding and no NLI call. A claim a hard
        finding settled keeps its verdict (a record contradiction still trims or
        withholds); every other checked claim is ``unverified`` with ``reason``. The
        calibrators are not asked: they read NLI signals no claim here has, and an
        answer calibrator deciding from the hard claims alone would clear or flag the
        answer on a fraction of its evidence."""
        with stage("claims"):
            works = [
                self._prepare(answer, Deadline(None).start(i)) for i, answer in enumerate(answers)
            ]
        with stage("decide"):
            return [self._settle(work, reason) for work in works]

    def _settle(self, work: AnswerWork, reason: UnverifiedReason) -> AnswerJudgement:
        verdicts: list[ClaimVerdict] = []
        for item in work.claims:
            claim = item.claim
            if not claim.checked:
                verdicts.append(unchecked_verdict(claim))
            elif item.settled is None:
                verdicts.append(unverified_verdict(claim, reason.value))
            else:
                settled = item.settled
                verdicts.append(
                    unchecked_verdict(claim).model_copy(
                        update={
                            "verdict": settled.verdict,
                            "score": round(settled.score, 4),
                            "reasons": list(settled.reasons),
                            "evidence_ids": list(settled.evidence_ids),
                            "confidence": item.confidence.mark if item.confidence else None,
                        }
                    )
                )
        judgement = decide(
            work.capped.verdicts(verdicts),
            [s.text for s in work.shape.sentences],
            abstained=work.shape.abstained,
            answerable=work.answer.answerable,
            unverified_reason=reason,
        )
        return with_limits(judgement, work.limits)

    def nli_pairs(self, answers: Sequence[AnswerEvent]) -> list[tuple[str, str]]:
        """The (premise, hypothesis) pairs judging ``answers`` as one batch sends to the
        NLI model, in order: what a benchmark replays against the model alone to find
        the ceiling the judge's NLI stage is measured against. Scores them (which pairs
        a later round asks depends on the earlier rounds' scores)."""
        return list(self._ask(self._claims_with_evidence(answers, None)))

    def _ask(self, works: Sequence[AnswerWork]) -> dict[tuple[str, str], NliScore]:
        """NLI scores for the batch, asked in rounds (:mod:`streamproc.judge.nli.rounds`)."""
        lookup = ask_in_rounds(works, self._scorer, self._decisive, self._may_stop_early)
        composing = [w for w in works if w.regime in self._composed_regimes]
        ask_composed(composing, self._scorer, lookup, self._thresholds.entailment)
        self.pairs_scored += len(lookup)
        return lookup

    def _may_stop_early(self, item: ClaimWork, work: AnswerWork) -> bool:
        """An unsettled claim with several candidates, none of which flips its negation
        (a flip is decided by the unit closest in words, whatever NLI says)."""
        if item.settled is not None or len(item.candidates) < 2:
            return False
        return not any(
            flips(item.claim.text, work.units[c.unit], c, self._thresholds) for c in item.candidates
        )

    def _claims_with_evidence(
        self, answers: Sequence[AnswerEvent], deadline_s: float | None
    ) -> list[AnswerWork]:
        """Claims, record checks and retrieved evidence units: everything before NLI."""
        works = []
        with stage("claims"):  # decompose, token confidence, record checks
            for index, answer in enumerate(answers):
                clock = Deadline(deadline_s).start(index)
                works.append(self._prepare(answer, clock))
                clock.pause()
        with stage("retrieval"):
            self._retrieve(works)
        return works

    # -- level 1 and 2a: no model --------------------------------------------------------

    def _prepare(self, answer: AnswerEvent, clock: Deadline) -> AnswerWork:
        capped = decompose_within(
            answer.answer,
            answer.evidence,
            self._granularity,
            self._limits,
            document_claims=self._document_claims,
        )
        clock.check()
        every_unit = build_units(answer.question, answer.evidence, self._window)
        kept = cap_units(every_unit, self._limits)
        units = statements_only(kept.units)  # what retrieval and NLI may see
        # The presence checks (is this number, this name anywhere in the evidence?) are
        # linear and read it all: a figure stated only beyond the unit cap must read as
        # "not entailed by what we read", never as "not in the evidence" (contradicted).
        all_text = " ".join(u.text for u in every_unit)
        clock.check()
        cases = self._records.for_answer(answer)
        case_regime = cases.case_evidence
        facts = EvidenceFacts(
            names_text=fold(all_text),
            numbers=frozenset().union(*(numbers(u.text) for u in every_unit)),
            words=content_words(all_text),
            structured=StructuredEvidence.from_items(answer.evidence, self._zero_length_hours)
            if not case_regime
            else StructuredEvidence(()),
            word_count=len(all_text.split()),
        )
        clock.check()
        claims = []
        for claim in capped.shape.claims:
            work = ClaimWork(claim)
            if claim.checked:
                thresholds = self._confidence_by_model.get(answer.model, self._confidence)
                work.confidence = _confidence(answer, claim, thresholds)
                work.prechecks = precheck(
                    answer,
                    claim,
                    work.confidence,
                    facts,
                    soft_rules=self._soft_rules,
                    case=cases.check(claim.text),
                    case_regime=case_regime,
                )
                work.settled = work.prechecks.hard
            claims.append(work)
            clock.check()
        return AnswerWork(
            answer,
            capped,
            clock,
            units,
            facts,
            facts.words,
            claims,
            checked_claims=sum(c.claim.checked for c in claims),
            structured_evidence=not facts.structured.empty
            or any(is_structured(e) for e in answer.evidence),
            case_evidence=case_regime,
            limits=capped.limits + kept.limits + cases.limits(),
        )

    # -- retrieval: one embedding call for the batch --------------------------------------

    def _retrieve(self, works: Sequence[AnswerWork]) -> None:
        """One embedding call for the batch: the claims that need evidence and the
        sentence units; a window's vector is the mean of its sentences' vectors (the
        windows would otherwise double the texts to embed)."""
        texts: dict[str, int] = {}
        for work in works:
            if not any(needs_evidence(c) for c in work.claims):
                continue
            members = window_members(work.units)
            wanted = [work.hypothesis(c.claim) for c in work.claims if needs_evidence(c)]
            if self._shortlist is not None:
                work.shortlist = lexical_shortlist(
                    work.units, wanted, self._shortlist, cited_units(work)
                )
            ranked = set(range(len(work.units)) if work.shortlist is None else work.shortlist)
            wanted += [u.text for i, u in enumerate(work.units) if i not in members and i in ranked]
            for text in wanted:
                texts.setdefault(text, len(texts))
        if not texts:
            return
        vectors = self._embedder.embed(list(texts))
        for work in works:
            if any(needs_evidence(c) for c in work.claims):
                with work.clock.running():
                    self._rank(work, vectors, texts)

    def _rank(
        self, work: AnswerWork, vectors: NDArray[np.float32], texts: Mapping[str, int]
    ) -> None:
        """Each claim's top-k units overall (among the shortlist) and within each cited
        subset."""
        unit_texts = [u.text for u in work.units]
        unit_rows = unit_vectors(work.units, vectors, texts)
        for item in work.claims:
            work.clock.check()
            if not needs_evidence(item):
                continue
            hypothesis = work.hypothesis(item.claim)
            claim_vector = vectors[texts[hypothesis]]
            ranking = (hypothesis, claim_vector, unit_texts, unit_rows, self._top_k)
            if item.settled is None:
                item.candidates = rank_candidates(*ranking, among=work.shortlist)
            for subset in citation_subsets(item.claim.resolved):
                chosen = [i for i, u in enumerate(work.units) if u.evidence_id in subset]
                item.cited[subset] = rank_candidates(*ranking, among=chosen)

    # -- level 2b: decide from the scores ------------------------------------------------

    def _assemble(
        self, work: AnswerWork, lookup: Mapping[tuple[str, str], NliScore]
    ) -> AnswerJudgement:
        with work.clock.running() as clock:
            clock.check()
            verdicts: list[ClaimVerdict] = []
            risks: list[float] = []  # of the claims the calibrator decided
            hard = False  # a hard finding refuted some claim
            for item in work.claims:
                verdict, settled = self._claim_verdict(item, work, lookup)
                verdicts.append(verdict)
                if settled:
                    hard |= verdict.verdict not in (None, VerdictLabel.SUPPORTED)
                elif verdict.risk is not None:
                    risks.append(verdict.risk)
                clock.check()
            call = None
            if self._answer_calibrator is not None:
                call = self._answer_calibrator.decide(
                    work.regime,
                    risks,
                    hard,
                    hard_finding=any(has_hard_finding(v) for v in verdicts),
                )
            judgement = decide(
                work.capped.verdicts(verdicts),
                [s.text for s in work.shape.sentences],
                abstained=work.shape.abstained,
                answerable=work.answer.answerable,
                hallucinated=None if call is None else call.hallucinated,
            )
            if call is not None:
                judgement = judgement.model_copy(update={"answer_risk": call.risk})
            clock.check()
            return with_limits(judgement, work.limits)

    def _claim_verdict(
        self, item: ClaimWork, work: AnswerWork, lookup: Mapping[tuple[str, str], NliScore]
    ) -> tuple[ClaimVerdict, bool]:
        """One claim's verdict (the rule, the calibrator, truncation and citations) and
        whether a hard finding settled it rather than the calibrator."""
        claim = item.claim
        base = unchecked_verdict(claim)
        if not claim.checked:
            return base, False
        rule = item.settled or decide_claim(
            item.claim, item.scored_candidates, work, lookup, self._thresholds, item.composed
        )
        signals = self._signals(item, rule, work, lookup)
        decision, risk, settled = self._calibrate(item, work, rule, signals)
        hypothesis = work.hypothesis(claim)
        cut_ids = {
            work.units[c.unit].evidence_id
            for c in item.scored_candidates
            if lookup[(work.units[c.unit].text, hypothesis)].truncated
        }
        if item.composed is not None and lookup[(item.composed.text, hypothesis)].truncated:
            cut_ids.update(item.composed.evidence_ids)
        cut = sorted(cut_ids)
        if cut:  # the model saw only part of these units: say so on the verdict
            decision = replace(
                decision, reasons=(*decision.reasons, f"EVIDENCE_TRUNCATED: {', '.join(cut)}")
            )

        def supports(subset: tuple[str, ...]) -> bool:
            return self._subset_supports(item, subset, work, lookup)

        cites = assess_citations(claim.resolved, work.shape.uses_citations, supports)
        notes = list(item.prechecks.notes) if item.prechecks else []
        reasons = list(decision.reasons) + citation_reasons(claim, cites.supported) + notes
        mark = item.confidence.mark if item.confidence else None
        verdict = base.model_copy(
            update={
                "verdict": decision.verdict,
                "score": round(decision.score, 4),
                "reasons": reasons,
                "evidence_ids": list(decision.evidence_ids),
                "citation_supported": cites.supported,
                "citations_needed": list(cites.needed),
                "confidence": mark,
                "risk": risk,
                "signals": signals,
            }
        )
        return verdict, settled

    def _signals(
        self,
        item: ClaimWork,
        rule: Settled,
        work: AnswerWork,
        lookup: Mapping[tuple[str, str], NliScore],
    ) -> dict[str, float]:
        """The calibrator's inputs for one checked claim (computed with or without one)."""
        claim = item.claim
        hypothesis = work.hypothesis(claim)
        scored = [
            (c, lookup[(work.units[c.unit].text, hypothesis)]) for c in item.scored_candidates
        ]
        flipped = _is_negation_flip(rule)
        best = max(scored, key=lambda cs: cs[1].entailment, default=None)
        hedged = best is not None and (
            overstated(claim.text, item_text(work, work.units[best[0].unit])) is not None
        )
        checks = item.prechecks or Prechecks(None)
        words = content_words(claim.text)
        sentences = max(1, len(work.shape.sentences) - 1)
        found = ClaimEvidence(
            scored=scored,
            candidates=item.candidates,
            flipped=flipped,
            overstated=hedged,
            coverage_evidence=len(words & work.evidence_words) / len(words) if words else 1.0,
            unknown_numbers=checks.unknown_numbers,
            unknown_names=checks.unknown_names,
            value_mismatch=checks.count(ValueReason.VALUE_MISMATCH),
            field_not_in_record=checks.count(ValueReason.FIELD_NOT_IN_RECORD),
            value_confirmed=checks.count(ValueReason.VALUE_CONFIRMED),
            confidence_low=item.confidence is not None
            and item.confidence.mark is not ConfidenceMark.OK,
            record_claim=claim.claim_class is ClaimClass.RECORD,
            claim_words=len(words),
            position=min(1.0, claim.sentence_index / sentences),
            structured_evidence=work.structured_evidence,
            evidence_words=work.facts.word_count,
            has_question=bool(work.answer.question),
            checked_claims=work.checked_claims,
            contradiction_min_coverage=self._thresholds.contradiction_min_coverage,
            composed=None if item.composed is None else lookup[(item.composed.text, hypothesis)],
            case_evidence=work.case_evidence,
            record_confirmed=checks.record_confirmed,
        )
        return claim_signals(found)

    def _calibrate(
        self, item: ClaimWork, work: AnswerWork, rule: Settled, signals: Mapping[str, float]
    ) -> tuple[Settled, float | None, bool]:
        """The calibrated verdict and risk, or the rule's verdict when no calibrator is
        configured or a hard finding settled the claim (the third value: it did)."""
        calibrator = self._calibrator
        if calibrator is None or item.settled is not None:  # no calibrator decides: no risk
            return rule, None, True
        risk = round(calibrator.probability(signals), 4)
        if _is_negation_flip(rule) and work.regime in self._hard_negation:
            return rule, risk, True  # a hard finding: never overruled
        soft = item.prechecks.soft_reasons if item.prechecks else ()
        drivers = calibrator.contributions(signals)
        threshold = calibrator.threshold_for(signals)
        return calibrated_decision(rule, risk, threshold, drivers, soft), risk, False

    def _subset_supports(
        self,
        item: ClaimWork,
        subset: tuple[str, ...],
        work: AnswerWork,
        lookup: Mapping[tuple[str, str], NliScore],
    ) -> bool:
        """Citation recall: does the cited evidence alone (plus the question) back it?"""
        claim_numbers = numbers(item.claim.text)
        subset_text = " ".join(u.text for u in work.units if u.evidence_id in subset)
        if claim_numbers - numbers(subset_text) - numbers(work.answer.question or ""):
            return False
        decision = decide_claim(
            item.claim, item.cited.get(subset, []), work, lookup, self._thresholds
        )
        return decision.verdict is VerdictLabel.SUPPORTED


# ------------------------------------------------------------------------------ helpers


def _regime_flags(name: str, regimes: Collection[str]) -> dict[str, float]:
    """``{name}_{regime}``: 1.0 where the behaviour is on, for every regime."""
    return {f"{name}_{regime}": float(regime in regimes) for regime in ALL_REGIMES}


def _optional(name: str, value: float | None) -> dict[str, float]:
    """A threshold recorded on the judge's info only when it is set."""
    return {} if value is None else {name: float(value)}


def _is_negation_flip(rule: Settled) -> bool:
    """The sentence that talks most closely about the claim says the opposite."""
    return rule.verdict is VerdictLabel.CONTRADICTED and any(
        r.startswith("NEGATION_FLIP") for r in rule.reasons
    )


def _confidence(
    answer: AnswerEvent, claim: Claim, thresholds: ConfidenceThresholds
) -> SentenceConfidence | None:
    if not answer.tokens:
        return None
    confirmed = confirmed_values(claim.text, answer.evidence)
    return sentence_confidence(
        answer.tokens, claim.start, claim.end, thresholds, confirmed=confirmed
    )
