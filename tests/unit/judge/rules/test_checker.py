"""The rules checker: what it catches, and the blind spots it is known to have."""

from __future__ import annotations

import pytest

from streamproc.contracts.events import VerdictLabel
from streamproc.judge import PremiseCheck
from streamproc.judge.rules.checker import RulesChecker
from streamproc.judge.text.features import content_words, numbers

D07 = (
    "Question: Why is the invoice blocked?\nThe supplier delivered 90 of 100 pieces but "
    "invoiced all 100. The invoice was blocked for payment."
)


def verdict(claim: str, premise: str = D07) -> tuple[VerdictLabel, float]:
    return RulesChecker().check([PremiseCheck(claim, premise)])[0]


def test_features_match_the_course() -> None:
    assert numbers("Order 4500017311, error PRC-112 and RM-4711 at 1.5 percent.") == {
        "4500017311", "prc-112", "rm-4711", "1.5"
    }  # fmt: skip
    assert content_words("The supplier's invoices were blocked; process it") == {
        "supplier", "invoice", "blocked", "process"
    }  # fmt: skip


def test_a_changed_number_is_contradicted() -> None:
    assert verdict("The supplier delivered 80 of 100 pieces.") == (VerdictLabel.CONTRADICTED, 0.0)


def test_a_number_with_no_numbers_in_the_evidence_is_unsupported() -> None:
    assert verdict("It takes 5 days.", "Question: When?\nIt takes a while.") == (
        VerdictLabel.UNSUPPORTED,
        0.0,
    )


def test_missing_words_are_unsupported_with_their_coverage() -> None:
    label, score = verdict("The invoice stays blocked until the plant manager signs a waiver.")
    assert label is VerdictLabel.UNSUPPORTED
    assert score == pytest.approx(2 / 8)  # invoice, blocked of 8 content words


def test_covered_words_are_supported() -> None:
    assert verdict("The supplier delivered 90 of 100 pieces.") == (VerdictLabel.SUPPORTED, 1.0)


def test_paraphrase_is_unsupported_a_known_blind_spot() -> None:
    premise = "The buyer asks for a corrected invoice or a credit memo."
    label, _ = verdict("The buyer requests an amended bill or a credit note.", premise)
    assert label is VerdictLabel.UNSUPPORTED


def test_negation_is_missed_a_known_blind_spot() -> None:
    premise = "Incomplete orders cannot be delivered or billed."
    label, _ = verdict("Incomplete orders can be billed once they are delivered.", premise)
    assert label is VerdictLabel.SUPPORTED  # a person says contradicted; NLI will fix this


def test_the_threshold_is_configurable_and_reasons_explain() -> None:
    pair = PremiseCheck("The supplier delivered pieces to the plant.", D07)
    assert RulesChecker(0.75).check([pair])[0][0] is VerdictLabel.SUPPORTED  # 3 of 4
    strict = RulesChecker(1.0)
    assert strict.check([pair])[0][0] is VerdictLabel.UNSUPPORTED
    assert strict.explain(pair) == ["LOW_WORD_COVERAGE: 0.75 < 1.00; not in the evidence: plant"]
    assert RulesChecker().explain(PremiseCheck("It took 80 days.", D07)) == [
        "NUMBER_MISMATCH: 80 not in the evidence"
    ]
    with pytest.raises(ValueError):
        RulesChecker(0.0)
