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

This module runs the stages and the model calls: :mod:`._preparer` does levels 1 and 2a,
:mod:`._verdicts` decides the claims and the answer, :mod:`._judge_info` states the
judge's identity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from streamproc.contracts.events import (
    AnswerEvent,
    AnswerJudgement,
    JudgeInfo,
    UnverifiedReason,
)
from streamproc.judge.deadline import Deadline
from streamproc.judge.decision.answer import AnswerCalibrator
from streamproc.judge.decision.calibrator import VerdictCalibrator
from streamproc.judge.decision.signals import SIGNAL_NAMES
from streamproc.judge.nli._judge_info import judge_info
from streamproc.judge.nli._preparer import AnswerPreparer
from streamproc.judge.nli._verdicts import VerdictAssembler, settled_judgement
from streamproc.judge.nli.decision import NliThresholds, flips
from streamproc.judge.nli.options import NliOptions
from streamproc.judge.nli.retrieval import rank_candidates
from streamproc.judge.nli.rounds import ask_composed, ask_in_rounds
from streamproc.judge.nli.shortlist import lexical_shortlist
from streamproc.judge.nli.units import unit_vectors, window_members
from streamproc.judge.nli.work import (
    AnswerWork,
    ClaimWork,
    cited_units,
    needs_evidence,
)
from streamproc.judge.protocols import NliScore, PairScorer, TextEmbedder
from streamproc.judge.records.case_check import CaseChecker
from streamproc.judge.rules.citations import citation_subsets
from streamproc.judge.stage_times import stage

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
        records = records or CaseChecker()
        soft_rules = options.soft_rules
        self._scorer = scorer
        self._embedder = embedder
        self._thresholds = options.thresholds
        self._top_k = options.top_k
        self._decisive = options.decisive_entailment
        self._shortlist = options.shortlist_sentences
        self._composed_regimes = frozenset(options.composed_premise_regimes)
        self._preparer = AnswerPreparer(
            records,
            options.granularity,
            options.limits,
            options.document_claims,
            options.window_sentences,
            options.zero_length_hours,
            options.confidence,
            dict(options.confidence_by_model),
            calibrator is not None if soft_rules is None else soft_rules,
        )
        self._verdicts = VerdictAssembler(
            options.thresholds,
            calibrator,
            answer_calibrator,
            frozenset(options.hard_negation_regimes),
        )
        self.pairs_scored = 0
        self._info = judge_info(
            NLI_JUDGE_VERSION, options, scorer, embedder, records, calibrator, answer_calibrator
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
            return [self._verdicts.assemble(work, lookup) for work in works]

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
                self._preparer.prepare(answer, Deadline(None).start(i))
                for i, answer in enumerate(answers)
            ]
        with stage("decide"):
            return [settled_judgement(work, reason) for work in works]

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
                works.append(self._preparer.prepare(answer, clock))
                clock.pause()
        with stage("retrieval"):
            self._retrieve(works)
        return works

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
