"""The per-answer deadline: it fires on the answer that overran (with its index), never
without a budget, counts only the answer's own steps, and changes no judgement.

Slowness is injected (a sleeping calibrator, explainer or embedder); budgets leave wide
margins (0 s must fire; 60 s must not), so nothing depends on the machine's speed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from streamproc.contracts.events import AnswerEvent
from streamproc.contracts.reasons import Reason
from streamproc.judge import AnswerTimedOut, Deadline, Judge, PremiseCheck
from streamproc.judge.decision.calibrator import REGIMES, VerdictCalibrator
from streamproc.judge.decision.signals import SIGNAL_NAMES
from streamproc.judge.engine import ClaimJudge
from streamproc.judge.nli.judge import NliJudge, NliOptions, NliThresholds
from streamproc.judge.rules.checker import RulesChecker
from tests.unit.judge.nli_fakes import BagOfWordsEmbedder, OverlapScorer
from tests.unit.judge.test_limits import FACT, event

SLOW_S = 0.2
BUDGET_S = 1.0  # one slow step fits with 0.8 s to spare; eight (1.6 s) do not


class SlowCalibrator(VerdictCalibrator):
    """A calibrator that takes ``SLOW_S`` per claim (the judge asks it once per claim)."""

    def probability(self, signals: Mapping[str, float]) -> float:
        time.sleep(SLOW_S)
        return super().probability(signals)


def slow_calibrator() -> SlowCalibrator:
    part = {
        "mean": [0.0] * len(SIGNAL_NAMES),
        "scale": [1.0] * len(SIGNAL_NAMES),
        "coef": [0.0] * len(SIGNAL_NAMES),
        "intercept": -3.0,
        "threshold": 0.5,
    }
    payload = {
        "name": "slow",
        "features": list(SIGNAL_NAMES),
        "regimes": dict.fromkeys(REGIMES, part),
    }
    calibrator = SlowCalibrator.from_payload(payload, sha256="2" * 64)
    assert isinstance(calibrator, SlowCalibrator)
    return calibrator


class SlowExplainer(RulesChecker):
    """The rules checker, taking ``SLOW_S`` to explain each claim it does not support."""

    def explain(self, pair: PremiseCheck) -> list[Reason]:
        time.sleep(SLOW_S)
        return super().explain(pair)


class SlowEmbedder(BagOfWordsEmbedder):
    """The shared embedding call of the batch takes ``2 * BUDGET_S``."""

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        time.sleep(2 * BUDGET_S)
        return super().embed(texts)


def nli(
    calibrator: VerdictCalibrator | None = None, embedder: BagOfWordsEmbedder | None = None
) -> NliJudge:
    return NliJudge(
        OverlapScorer(),
        embedder or BagOfWordsEmbedder(),
        NliOptions(thresholds=NliThresholds(entailment=0.6), granularity="sentence"),
        calibrator=calibrator,
    )


def rules(checker: RulesChecker | None = None) -> ClaimJudge:
    return ClaimJudge(checker or RulesChecker(), granularity="sentence")


QUICK = event(FACT)  # one claim
UNSUPPORTED = "The depot in town ships green crates on sundays."
MANY = event(
    " ".join(
        [
            UNSUPPORTED.replace("green", colour)
            for colour in ["red", "blue", "grey", "pink", "teal", "gold", "jade", "ruby"]
        ]
    )
)


def test_deadline_counts_only_the_running_stretches() -> None:
    clock = Deadline(0.5).start(3)
    clock.pause()
    time.sleep(0.6)
    clock.check()  # paused: the sleep does not count
    assert clock.elapsed_s < 0.5
    with clock.running():
        time.sleep(0.6)
    with pytest.raises(AnswerTimedOut) as raised:
        clock.check()
    assert raised.value.index == 3
    assert raised.value.budget_s == 0.5
    assert raised.value.elapsed_s >= 0.6


def test_no_budget_never_expires() -> None:
    clock = Deadline(None).start(0)
    time.sleep(0.01)
    clock.check()


def test_zero_budget_fires_on_the_first_answer() -> None:
    for judge in (rules(), nli()):
        with pytest.raises(AnswerTimedOut) as raised:
            judge.judge_batch([QUICK, MANY], deadline_s=0.0)
        assert raised.value.index == 0


def test_the_nli_judge_names_the_slow_answer() -> None:
    judge = nli(slow_calibrator())
    with pytest.raises(AnswerTimedOut) as raised:
        judge.judge_batch([QUICK, MANY, QUICK], deadline_s=BUDGET_S)
    assert raised.value.index == 1
    assert raised.value.elapsed_s > BUDGET_S


def test_the_rules_judge_names_the_slow_answer() -> None:
    judge = rules(SlowExplainer())
    with pytest.raises(AnswerTimedOut) as raised:
        judge.judge_batch([QUICK, MANY], deadline_s=BUDGET_S)
    assert raised.value.index == 1


def test_without_a_deadline_the_slow_answer_is_judged() -> None:
    [quick, many] = rules(SlowExplainer()).judge_batch([QUICK, MANY], deadline_s=None)
    assert many.checked_claims == 8
    assert many.hallucinated and not quick.hallucinated


def test_the_shared_model_call_does_not_count_against_an_answer() -> None:
    [judgement] = nli(embedder=SlowEmbedder()).judge_batch([QUICK], deadline_s=BUDGET_S)
    assert judgement.checked_claims == 1


@pytest.mark.parametrize("make", [rules, nli], ids=["rules", "nli"])
def test_an_answer_under_budget_is_judged_identically(make: Callable[[], Judge]) -> None:
    answers: list[AnswerEvent] = [
        QUICK,
        MANY,
        event(f"{FACT} Incomplete orders can be billed [D1]."),
    ]
    plain = make().judge_batch(answers)
    assert make().judge_batch(answers, deadline_s=None) == plain
    assert make().judge_batch(answers, deadline_s=60.0) == plain
