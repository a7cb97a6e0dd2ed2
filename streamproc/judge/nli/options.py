"""What the NLI judge is told to do, as one frozen value.

The judge's identity (``JudgeInfo.thresholds``) is computed from these options, so a
verdict can be replayed from its audit record; keeping them in one object keeps the
judge's constructor about components (models, calibrators) and the settings-to-options
mapping in the composition root (:mod:`streamproc.wiring`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streamproc.judge.decision.calibrator import REGIMES
from streamproc.judge.limits import JudgeLimits
from streamproc.judge.nli.decision import NliThresholds
from streamproc.judge.records.record_values import ZeroLengthHours
from streamproc.judge.rules.confidence import ConfidenceThresholds
from streamproc.judge.text.claims import Granularity

__all__ = ["NliOptions"]


@dataclass(frozen=True)
class NliOptions:
    """The NLI judge's options; every default is the shipped judge's, except where the
    composition root reads them from the model manifest and settings.

    ``model_thresholds``: how the models' outputs are read (e.g. the NLI margin's band
    edges), recorded with the judge's own so an auditor can replay a verdict.
    ``soft_rules`` turns the name and number rules into signals instead of verdicts;
    None means on exactly when a claim calibrator is given (the calibrator's training
    data is collected with it on and no calibrator).

    ``decisive_entailment``: a claim's candidates are asked in rank order and the first
    that entails it at least this much decides; the rest are never scored.
    ``shortlist_sentences``: embed and rank only each claim's best this many evidence
    sentences by word overlap (:mod:`streamproc.judge.nli.shortlist`). None: off.

    ``composed_premise_regimes``: in these answer regimes a claim no single unit entails
    is also asked against its top units' sentences read together
    (:mod:`streamproc.judge.nli.premises`). ``hard_negation_regimes``: where a negation
    flip settles the claim; elsewhere it is a signal the calibrator weighs (without a
    calibrator it always settles). ``document_claims``: recognise sentences about the
    document (:mod:`streamproc.judge.text.document_claims`). ``zero_length_hours``: how a
    record's "0:0-0:0" day is read (:mod:`streamproc.judge.records.record_values`).
    """

    thresholds: NliThresholds = field(default_factory=NliThresholds)
    confidence: ConfidenceThresholds = field(default_factory=ConfidenceThresholds)
    confidence_by_model: Mapping[str, ConfidenceThresholds] = field(default_factory=dict)
    granularity: Granularity = "atomic"
    top_k: int = 4
    window_sentences: int = 2
    model_thresholds: Mapping[str, float] = field(default_factory=dict)
    soft_rules: bool | None = None
    limits: JudgeLimits = field(default_factory=JudgeLimits)
    decisive_entailment: float | None = None
    shortlist_sentences: int | None = None
    composed_premise_regimes: frozenset[str] = frozenset()
    hard_negation_regimes: frozenset[str] = frozenset(REGIMES)
    document_claims: bool = True
    zero_length_hours: ZeroLengthHours = "closed"
