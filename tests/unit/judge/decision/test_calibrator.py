"""The learned calibrator: numpy inference, payload checks, how it decides a verdict,
and the NLI judge with a calibrator wired in."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streamproc.contracts.events import VerdictLabel
from streamproc.contracts.reasons import Reason
from streamproc.inference.calibrator_loader import (
    load_answer_calibrator,
    load_calibrator,
    resolve_answer_calibrator,
)
from streamproc.inference.registry import ModelIntegrityError, sha256_of
from streamproc.judge.decision.calibrated import calibrated_decision
from streamproc.judge.decision.calibrator import (
    ALL_REGIMES,
    REGIMES,
    CalibratorError,
    VerdictCalibrator,
)
from streamproc.judge.decision.signals import SIGNAL_NAMES
from streamproc.judge.nli.judge import NliJudge, NliOptions, NliThresholds
from streamproc.judge.rules.settle import Settled
from tests.unit.judge.nli.test_judge import event
from tests.unit.judge.nli_fakes import BagOfWordsEmbedder, OverlapScorer


def part(**weights: float) -> dict[str, Any]:
    """One regime's weights over every signal, zero except ``weights``."""
    return {
        "mean": [0.0] * len(SIGNAL_NAMES),
        "scale": [1.0] * len(SIGNAL_NAMES),
        "coef": [weights.get(f, 0.0) for f in SIGNAL_NAMES],
        "intercept": weights.get("intercept", 0.0),
        "threshold": weights.get("threshold", 0.5),
    }


def payload(**weights: float) -> dict[str, Any]:
    """A calibrator with the same weights in every regime."""
    return {
        "name": "test-calibrator",
        "features": list(SIGNAL_NAMES),
        "regimes": {regime: part(**weights) for regime in REGIMES},
    }


def calibrator(**weights: float) -> VerdictCalibrator:
    return VerdictCalibrator.from_payload(payload(**weights), sha256="2" * 64)


def test_probability_is_the_logistic_of_the_standardised_dot_product() -> None:
    raw = payload(coverage_evidence=-2.0, intercept=1.0)
    task = raw["regimes"]["task"]
    task["mean"][SIGNAL_NAMES.index("coverage_evidence")] = 0.5
    task["scale"][SIGNAL_NAMES.index("coverage_evidence")] = 0.25
    model = VerdictCalibrator.from_payload(raw, sha256="2" * 64)
    signals = dict.fromkeys(SIGNAL_NAMES, 0.0) | {"coverage_evidence": 1.0}
    expected = 1 / (1 + math.exp(-(1.0 - 2.0 * (1.0 - 0.5) / 0.25)))
    assert model.probability(signals) == pytest.approx(expected)
    assert model.contributions(signals) == [("coverage_evidence", -4.0)]


def test_a_calibrator_runs_only_with_the_models_whose_signals_it_learned() -> None:
    bound = payload() | {"nli_model": "verifier-a", "embedding_model": "embedder-a"}
    model = VerdictCalibrator.from_payload(bound, sha256="2" * 64)
    model.check_models("verifier-a", "embedder-a")
    with pytest.raises(CalibratorError, match="NLI model 'verifier-a', not 'verifier-b'"):
        model.check_models("verifier-b", "embedder-a")
    with pytest.raises(CalibratorError, match="embedding model 'embedder-a', not 'embedder-b'"):
        model.check_models("verifier-a", "embedder-b")
    calibrator().check_models("any", "other")  # names neither: older calibrators run as before


def test_inconsistent_payloads_are_refused() -> None:
    broken = payload()
    broken["regimes"]["record"]["coef"] = broken["regimes"]["record"]["coef"][:-1]
    with pytest.raises(CalibratorError):
        VerdictCalibrator.from_payload(broken, sha256="2" * 64)
    with pytest.raises(CalibratorError):
        VerdictCalibrator.from_payload(payload(threshold=1.0), sha256="2" * 64)
    missing = payload()
    del missing["regimes"]["question"]
    with pytest.raises(CalibratorError, match="regimes"):
        VerdictCalibrator.from_payload(missing, sha256="2" * 64)
    one = {"mean": [0], "scale": [1], "coef": [1], "intercept": 0, "threshold": 0.5}
    unknown = VerdictCalibrator.from_payload(
        {"name": "u", "features": ["not_a_signal"], "regimes": dict.fromkeys(REGIMES, one)},
        sha256="2" * 64,
    )
    with pytest.raises(CalibratorError, match="not_a_signal"):
        unknown.check_signals(SIGNAL_NAMES)


def test_loader_refuses_weights_whose_hash_differs(tmp_path: Path) -> None:
    folder = tmp_path / "calibrators"
    folder.mkdir()
    data = json.dumps(payload()).encode()
    (folder / "c.json").write_bytes(data)
    manifest = f'name = "c"\n[weights]\npath = "c.json"\nsha256 = "{sha256_of(data)}"\n'
    (folder / "c.toml").write_text(manifest)
    assert load_calibrator("c", tmp_path).sha256 == sha256_of(data)
    (folder / "c.json").write_bytes(data + b" ")
    with pytest.raises(ModelIntegrityError):
        load_calibrator("c", tmp_path)


def test_shipped_calibrator_loads_and_fits_the_signals() -> None:
    folder = Path(__file__).parents[4] / "models" / "calibrators"
    shipped = sorted(folder.glob("verdict-calibrator-*.toml"))
    assert shipped, "a trained calibrator ships in models/calibrators/"
    for manifest in shipped:
        model = load_calibrator(manifest.stem)
        model.check_signals(SIGNAL_NAMES)
        assert set(REGIMES) <= set(model.parts) <= set(ALL_REGIMES)
    answers = sorted(folder.glob("answer-calibrator-*.toml"))
    assert len(shipped) + len(answers) == len(list(folder.glob("*.toml")))
    for manifest in answers:
        answer_model = load_answer_calibrator(manifest.stem)
        assert set(REGIMES) <= set(answer_model.parts) <= set(ALL_REGIMES)
        assert answer_model.claim_calibrator in {m.stem for m in shipped}


def test_calibrated_decision_keeps_the_rule_reasons_or_overrules_them() -> None:
    rule_no = Settled(
        VerdictLabel.CONTRADICTED, 0.1, (Reason("NEGATION_FLIP", "against D1"),), ("D1",)
    )
    rule_yes = Settled(VerdictLabel.SUPPORTED, 0.9, (), ("D2",))
    low = calibrated_decision(rule_no, 0.2, 0.5, [], ())
    assert low.verdict is VerdictLabel.SUPPORTED
    assert low.reasons == ("CALIBRATED_RISK: 0.20 < 0.50",)
    high = calibrated_decision(rule_no, 0.8, 0.5, [("negation_flip", 1.5)], ())
    assert high.verdict is VerdictLabel.CONTRADICTED
    assert high.reasons[0] == "NEGATION_FLIP: against D1"
    assert high.reasons[-1] == "CALIBRATED_RISK: 0.80 >= 0.50 (negation_flip +1.50)"
    overruled = calibrated_decision(
        rule_yes, 0.7, 0.5, [], (Reason("NAME_NOT_IN_EVIDENCE", "acme"),)
    )
    assert overruled.verdict is VerdictLabel.UNSUPPORTED
    assert overruled.reasons[0] == "NAME_NOT_IN_EVIDENCE: acme"
    assert [r.code for r in overruled.reasons] == ["NAME_NOT_IN_EVIDENCE", "CALIBRATED_RISK"]
    assert overruled.score == pytest.approx(0.3)


def test_judge_with_a_calibrator_decides_by_risk_and_records_it(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    # Risk rises as the evidence covers fewer of the claim's words.
    model = calibrator(coverage_evidence=-12.0, intercept=6.0)
    nli = NliJudge(
        scorer,
        embedder,
        NliOptions(thresholds=NliThresholds(entailment=0.6), granularity="sentence"),
        calibrator=model,
    )
    covered, invented = nli.judge_batch(
        [
            event("The supplier delivered pieces."),
            event("The warehouse manager praised the courier yesterday."),
        ]
    )
    [good], [bad] = covered.claims, invented.claims
    assert good.verdict is VerdictLabel.SUPPORTED and good.risk is not None and good.risk < 0.5
    assert bad.verdict is VerdictLabel.UNSUPPORTED and bad.risk is not None and bad.risk > 0.5
    assert bad.reasons[-1].startswith("CALIBRATED_RISK")
    assert set(good.signals) == set(SIGNAL_NAMES)
    assert nli.info.models["test-calibrator"] == "2" * 64
    assert nli.info.thresholds["calibrator_threshold_question"] == 0.5


def test_soft_rules_leave_names_and_numbers_to_the_calibrator(
    scorer: OverlapScorer, embedder: BagOfWordsEmbedder
) -> None:
    answer = event("The supplier delivered 90 of 100 pieces to Acme.")
    strict = NliJudge(scorer, embedder, NliOptions(granularity="sentence"))
    [hard] = strict.judge_batch([answer])
    assert hard.claims[0].reasons[0].startswith("NAME_NOT_IN_EVIDENCE")
    soft = NliJudge(
        scorer, embedder, NliOptions(granularity="sentence"), calibrator=calibrator(intercept=-5)
    )
    [result] = soft.judge_batch([answer])
    claim = result.claims[0]
    assert claim.verdict is VerdictLabel.SUPPORTED, "the calibrator overrules a soft rule"
    assert claim.signals["unknown_names"] == 1.0
    assert claim.risk == pytest.approx(1 / (1 + np.exp(5)), abs=1e-4)


def test_each_answer_regime_has_its_own_weights_and_threshold() -> None:
    raw = payload()
    raw["regimes"]["record"] = part(threshold=0.2, intercept=2.0)
    raw["regimes"]["question"] = part(threshold=0.7)
    model = VerdictCalibrator.from_payload(raw, sha256="2" * 64)
    base = dict.fromkeys(SIGNAL_NAMES, 0.0)
    record = base | {"structured_evidence": 1.0, "has_question": 1.0}
    assert model.threshold_for(record) == 0.2
    assert model.threshold_for(base | {"has_question": 1.0}) == 0.7
    assert model.threshold_for(base) == 0.5
    assert model.probability(record) == pytest.approx(1 / (1 + math.exp(-2.0)))
    assert model.probability(base) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("setting", "claim", "expected"),
    [
        ("auto", "verdict-calibrator-verifier-v2", "answer-calibrator-v1"),
        ("auto", "verdict-calibrator-verifier-v1", None),  # none was fitted on its risks
        ("auto", None, None),
        ("answer-calibrator-v1", "verdict-calibrator-verifier-v1", "answer-calibrator-v1"),
        (None, "verdict-calibrator-verifier-v2", None),
        ("", "verdict-calibrator-verifier-v2", None),
    ],
)
def test_the_answer_calibrator_follows_the_claim_calibrator(
    setting: str | None, claim: str | None, expected: str | None
) -> None:
    assert resolve_answer_calibrator(setting, claim) == expected
