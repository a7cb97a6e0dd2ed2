"""A reason is its code and detail in the process and the same one string on the wire:
what a verdict said before reads back exactly, and programs never parse the text."""

from __future__ import annotations

import pickle

import pytest

from streamproc.contracts.events import ClaimClass, ClaimVerdict
from streamproc.contracts.reasons import Reason


def _claim(*reasons: str) -> ClaimVerdict:
    document = {
        "index": 0,
        "sentence_index": 0,
        "text": "x",
        "start": 0,
        "end": 1,
        "claim_class": ClaimClass.RULE.value,
        "reasons": list(reasons),
    }
    return ClaimVerdict.model_validate(document)


def test_a_reason_is_its_code_and_detail_and_prints_as_its_wire_text() -> None:
    reason = Reason("AMOUNT_MISMATCH", "amount claimed 120 EUR, record 95 EUR (R1)")
    assert (reason.code, reason.detail) == (
        "AMOUNT_MISMATCH",
        "amount claimed 120 EUR, record 95 EUR (R1)",
    )
    assert reason == "AMOUNT_MISMATCH: amount claimed 120 EUR, record 95 EUR (R1)"
    assert Reason("CITATION_MISSING") == "CITATION_MISSING"
    assert Reason("CITATION_MISSING").detail is None


@pytest.mark.parametrize("code", ["", "lower", "TWO WORDS", "CODE: detail", "9LIVES"])
def test_a_code_that_is_not_one_is_refused(code: str) -> None:
    with pytest.raises(ValueError, match="not a reason code"):
        Reason(code, "detail")


@pytest.mark.parametrize(
    "text",
    [
        "NUMBER_MISMATCH: 80 not in the evidence",
        "CALIBRATED_RISK: 0.81 >= 0.45 (entail_logit_max +1.30, coverage_evidence +0.60)",
        "NEGATION_FLIP: against D1: The shop is not open on Sundays.",
        "CITATION_MISSING",
        "EMPTY_DETAIL: ",
        "a hand-written note: no code",
        "",
    ],
)
def test_every_text_on_the_wire_reads_back_and_writes_out_unchanged(text: str) -> None:
    claim = _claim(text)
    (reason,) = claim.reasons
    assert isinstance(reason, Reason)
    assert reason == text
    assert claim.model_dump(mode="json")["reasons"] == [text]
    again = ClaimVerdict.model_validate_json(claim.model_dump_json())
    assert again.reasons == [text] and again.reasons[0].code == reason.code
    assert pickle.loads(pickle.dumps(reason)).code == reason.code


def test_the_code_is_what_comes_before_the_first_colon_and_space() -> None:
    read = _claim("NEGATION_FLIP: against D1: not on Sundays", "a note: no code").reasons
    assert [(r.code, r.detail) for r in read] == [
        ("NEGATION_FLIP", "against D1: not on Sundays"),
        ("", "a note: no code"),
    ]


def test_the_schema_still_says_a_reason_is_a_string() -> None:
    schema = ClaimVerdict.model_json_schema()["properties"]["reasons"]
    assert schema["type"] == "array" and schema["items"] == {"type": "string"}
