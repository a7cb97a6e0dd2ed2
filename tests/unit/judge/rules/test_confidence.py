"""Level 1 token confidence: the two cuts, the LOW mark, and what a record confirms."""

from __future__ import annotations

import math
import re

import pytest

from streamproc.contracts.events import ConfidenceMark, EvidenceItem, EvidenceKind, TokenLogprob
from streamproc.judge.records.confirmation import confirmed_by_records, confirmed_values
from streamproc.judge.rules.confidence import (
    ConfidenceThresholds,
    sentence_confidence,
    specific_spans,
)


def tokens(
    answer: str, probabilities: dict[str, float], default: float = 0.95
) -> list[TokenLogprob]:
    """Word-level tokens with a leading space, as BPE tokenisers write them."""
    out = []
    for match in re.finditer(r"\s*(?:[^\s.,!?]+|[.,!?])", answer):
        word = match.group(0).strip()
        p = probabilities.get(word, default)
        out.append(TokenLogprob(text=match.group(0), logprob=math.log(p), offset=match.start()))
    return out


def whole(answer: str) -> tuple[int, int]:
    return (0, len(answer))


SHAKY = "Your refund of €120 for order 4500017312 was issued."


def test_a_shaky_number_is_cut() -> None:
    result = sentence_confidence(tokens(SHAKY, {"4500017312": 0.05}), *whole(SHAKY))
    assert result is not None
    assert result.mark is ConfidenceMark.CUT
    assert result.reasons == ("SHAKY_SPECIFIC: 4500017312",)
    # content tokens: refund, €120, order, 4500017312, issued ("your", "of", "for", "was" are
    # grammar, "." punctuation)
    assert result.content_tokens == 5
    assert result.mean == pytest.approx((4 * 0.95 + 0.05) / 5)
    assert result.low_share == pytest.approx(1 / 5)


def test_a_shaky_number_a_record_confirms_is_not_cut() -> None:
    record = EvidenceItem(
        id="R1", text="", kind=EvidenceKind.RECORD, fields={"order_id": "4500017312"}
    )
    result = sentence_confidence(
        tokens(SHAKY, {"4500017312": 0.05}),
        *whole(SHAKY),
        confirmed=confirmed_by_records([record]),
    )
    assert result is not None
    assert result.mark is ConfidenceMark.OK
    assert result.reasons == ("SHAKY_SPECIFIC_CONFIRMED: 4500017312",)


def test_confirmed_values_as_a_set_work_the_same() -> None:
    record = EvidenceItem(
        id="R1", text="", kind=EvidenceKind.RECORD, fields={"order_id": "4500017312"}
    )
    values = confirmed_values(SHAKY, [record])
    assert values == {"4500017312"}  # €120 is not in the record
    shaky = {"4500017312": 0.05, "€120": 0.05}
    result = sentence_confidence(tokens(SHAKY, shaky), *whole(SHAKY), confirmed=values)
    assert result is not None and result.mark is ConfidenceMark.CUT
    assert result.reasons == ("SHAKY_SPECIFIC: €120", "SHAKY_SPECIFIC_CONFIRMED: 4500017312")


def test_a_shaky_amount_is_reported_whole_even_when_split_into_tokens() -> None:
    answer = "You paid $118.84 today."
    toks = [
        TokenLogprob(text="You", logprob=math.log(0.9), offset=0),
        TokenLogprob(text=" paid", logprob=math.log(0.9), offset=3),
        TokenLogprob(text=" $", logprob=math.log(0.9), offset=8),
        TokenLogprob(text="118", logprob=math.log(0.9), offset=10),
        TokenLogprob(text=".84", logprob=math.log(0.1), offset=13),
        TokenLogprob(text=" today", logprob=math.log(0.9), offset=16),
        TokenLogprob(text=".", logprob=math.log(0.9), offset=22),
    ]
    result = sentence_confidence(toks, *whole(answer))
    assert result is not None and result.mark is ConfidenceMark.CUT
    assert result.reasons == ("SHAKY_SPECIFIC: $118.84",)
    confirmed = sentence_confidence(toks, *whole(answer), confirmed={"$118.84"})
    # content: paid, $, 118, .84, today (the currency of an amount counts); 1 of 5 < 0.2
    assert confirmed is not None and confirmed.mark is ConfidenceMark.OK
    assert confirmed.low_share == pytest.approx(1 / 5)
    assert confirmed.reasons == ("SHAKY_SPECIFIC_CONFIRMED: $118.84",)


def test_a_degenerate_sentence_is_cut() -> None:
    answer = "The warranty covers accidental water damage."
    result = sentence_confidence(tokens(answer, {}, default=0.4), *whole(answer))
    assert result is not None
    assert result.mark is ConfidenceMark.CUT
    assert result.reasons == ("LOW_CONFIDENCE_SENTENCE: content mean 0.40 < 0.5",)


def test_a_somewhat_unsure_sentence_is_marked_low_not_cut() -> None:
    answer = "The warranty covers accidental water damage."
    result = sentence_confidence(tokens(answer, {}, default=0.55), *whole(answer))
    assert result is not None and result.mark is ConfidenceMark.LOW
    assert result.reasons[0].startswith("LOW_CONFIDENCE: content mean 0.55")


def test_many_guessed_words_mark_low_even_with_a_high_mean() -> None:
    answer = "The warranty covers accidental water damage."
    guesses = {"accidental": 0.15, "water": 0.15}  # 2 of 5 content words < 0.2
    result = sentence_confidence(tokens(answer, guesses, default=0.99), *whole(answer))
    assert result is not None
    assert result.mean > 0.6 and result.low_share == pytest.approx(2 / 5)
    assert result.mark is ConfidenceMark.LOW


def test_grammar_words_do_not_count() -> None:
    answer = "The warranty covers the damage."
    result = sentence_confidence(tokens(answer, {"The": 0.01, "the": 0.01}), *whole(answer))
    assert result is not None
    assert result.mark is ConfidenceMark.OK and result.reasons == ()
    assert result.content_tokens == 3


def test_only_the_tokens_of_the_sentence_count() -> None:
    answer = "The warranty covers damage. It costs 99 euros."
    toks = tokens(answer, {"99": 0.05})
    first = sentence_confidence(toks, 0, 27)
    second = sentence_confidence(toks, 28, len(answer))
    assert first is not None and first.mark is ConfidenceMark.OK
    assert second is not None and second.reasons == ("SHAKY_SPECIFIC: 99",)


def test_no_tokens_means_no_confidence() -> None:
    assert sentence_confidence(None, 0, 5) is None
    assert sentence_confidence([], 0, 5) is None
    answer = "Yes. The warranty covers damage."
    assert sentence_confidence(tokens(answer, {})[1:], 0, 4) is None


def test_thresholds_are_per_model() -> None:
    answer = "The warranty covers accidental water damage."
    toks = tokens(answer, {}, default=0.55)
    lenient = ConfidenceThresholds(cut_mean=0.3, shaky_p=0.1, low_mean=0.5, low_share=0.5)
    result = sentence_confidence(toks, *whole(answer), thresholds=lenient)
    assert result is not None and result.mark is ConfidenceMark.OK
    strict = ConfidenceThresholds(cut_mean=0.6, low_mean=0.7)
    result = sentence_confidence(toks, *whole(answer), thresholds=strict)
    assert result is not None and result.mark is ConfidenceMark.CUT
    assert ConfidenceThresholds().as_dict()["confidence_cut_mean"] == 0.5
    with pytest.raises(ValueError):
        ConfidenceThresholds(shaky_p=1.5)
    with pytest.raises(ValueError):
        ConfidenceThresholds(cut_mean=0.7, low_mean=0.6)


def test_specifics_are_ids_amounts_dates_and_numbers() -> None:
    text = "Order PRC-112 for €1,200.00 ships on March 3, 2024, in twelve boxes at 1.5 percent."
    assert [text[s:e] for s, e in specific_spans(text)] == [
        "PRC-112",
        "€1,200.00",
        "March 3, 2024",
        "twelve",
        "1.5",
    ]
