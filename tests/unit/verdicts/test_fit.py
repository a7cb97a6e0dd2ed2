"""Fitting outputs under a topic's size limit: verdicts degrade (signals, then the least
severe claims), records that cannot degrade are refused, dead letters always come back."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from streamproc.contracts.events import (
    Action,
    AnswerJudgement,
    ClaimClass,
    ClaimVerdict,
    DeadLetter,
    DeadLetterReason,
    JudgeInfo,
    Outcome,
    Timings,
    Verdict,
    VerdictLabel,
)
from streamproc.verdicts.fit import (
    OVERHEAD_BYTES,
    Fitted,
    TooLarge,
    encode,
    fit_dead_letter,
    fit_record,
    fit_verdict,
    fits,
)

AT = datetime(2026, 1, 1, tzinfo=UTC)
KEY = b"ans-1"
LABELS = [VerdictLabel.SUPPORTED, VerdictLabel.CONTRADICTED, VerdictLabel.UNSUPPORTED, None]


def claim(index: int, label: VerdictLabel | None, signals: int = 20) -> ClaimVerdict:
    return ClaimVerdict(
        index=index,
        sentence_index=index,
        text=f"Claim number {index} says something about the order. " * 3,
        start=0,
        end=10,
        claim_class=ClaimClass.RULE if label else ClaimClass.CONVERSATIONAL,
        verdict=label,
        reasons=["NO_SUPPORT: nothing says so"] if label is VerdictLabel.UNSUPPORTED else [],
        signals={f"signal_{n}": n / 7 for n in range(signals)},
    )


def verdict(claims: list[ClaimVerdict], trim: list[str] | None = None) -> Verdict:
    judgement = AnswerJudgement(
        claims=claims,
        checked_claims=len(claims),
        supported_claims=0,
        contradicted_claims=0,
        unsupported_claims=0,
        faithfulness=None,
        hallucinated=False,
        abstained=False,
        outcome=Outcome.CORRECT,
        action=Action.PASS,
        trim_sentences=trim or [],
        limits=["LIMIT_UNITS: 400 of 900 evidence units read"],
    )
    return Verdict(
        event_id="e1",
        answer_id="ans-1",
        conversation_id="c",
        tenant="t",
        assistant_id="bot",
        model="llm",
        occurred_at=AT,
        judged_at=AT,
        judgement=judgement,
        judge=JudgeInfo(name="rules", version="1", granularity="sentence"),
        timings=Timings(judge_ms=1.0, batch_size=1),
    )


def mixed(n: int, signals: int = 20) -> list[ClaimVerdict]:
    return [claim(i, LABELS[i % len(LABELS)], signals) for i in range(n)]


def size(model: Verdict) -> int:
    return len(KEY) + len(encode(model)) + OVERHEAD_BYTES


def test_a_verdict_that_fits_is_left_whole() -> None:
    whole = verdict(mixed(10))
    fitted = fit_verdict(whole, KEY, size(whole))
    assert isinstance(fitted, Fitted)
    assert fitted.model is whole and fitted.value == encode(whole)


def test_signals_go_first() -> None:
    whole = verdict(mixed(40))
    slim_size = size(verdict([c.model_copy(update={"signals": {}}) for c in mixed(40)]))
    fitted = fit_verdict(whole, KEY, slim_size + 100)  # room for the note, not for signals
    assert isinstance(fitted, Fitted) and fitted.model != whole
    claims = fitted.model.judgement.claims
    assert len(claims) == 40 and all(not c.signals for c in claims)
    assert fitted.model.judgement.limits == [
        "LIMIT_UNITS: 400 of 900 evidence units read",
        "OUTPUT_TRIMMED: signals dropped",
    ]
    assert fits(KEY, fitted.value, slim_size + 100)
    assert json.loads(fitted.value) == json.loads(encode(fitted.model))


def test_then_the_least_severe_claims_go_and_the_counts_stay() -> None:
    claims = mixed(400)
    whole = verdict(claims)
    limit = size(whole) // 8
    fitted = fit_verdict(whole, KEY, limit)
    assert isinstance(fitted, Fitted) and fitted.model != whole
    assert fits(KEY, fitted.value, limit)
    kept = fitted.model.judgement.claims
    kept_indexes = [c.index for c in kept]
    assert kept_indexes == sorted(kept_indexes)  # listed in answer order
    # Every contradicted claim is kept before any unsupported one, and those before the rest.
    kept_labels = {c.index: c.verdict for c in kept}
    contradicted = [c.index for c in claims if c.verdict is VerdictLabel.CONTRADICTED]
    unsupported = [c.index for c in claims if c.verdict is VerdictLabel.UNSUPPORTED]
    assert all(i in kept_labels for i in contradicted)
    assert 0 < sum(i in kept_labels for i in unsupported) < len(unsupported)
    assert all(c.verdict in (VerdictLabel.CONTRADICTED, VerdictLabel.UNSUPPORTED) for c in kept)
    omitted = 400 - len(kept)
    note = f"OUTPUT_TRIMMED: signals dropped; {omitted} of 400 claims omitted"
    assert fitted.model.judgement.limits[-1] == note
    assert fitted.model.judgement.checked_claims == 400  # the whole answer's counts
    # As many as fit: one more claim (the next unsupported one) would not.
    next_index = next(i for i in unsupported if i not in kept_labels)
    one_more = sorted(
        [*kept, claims[next_index].model_copy(update={"signals": {}})], key=lambda c: c.index
    )
    judgement = fitted.model.judgement.model_copy(
        update={
            "claims": one_more,
            "limits": [
                *whole.judgement.limits,
                f"OUTPUT_TRIMMED: signals dropped; {omitted - 1} of 400 claims omitted",
            ],
        }
    )
    assert not fits(KEY, encode(fitted.model.model_copy(update={"judgement": judgement})), limit)


def test_without_signals_the_note_only_counts_claims() -> None:
    whole = verdict(mixed(100, signals=0))
    fitted = fit_verdict(whole, KEY, size(whole) // 2)
    assert isinstance(fitted, Fitted)
    note = fitted.model.judgement.limits[-1]
    assert note.startswith("OUTPUT_TRIMMED: ") and "signals" not in note
    assert note.endswith(" of 100 claims omitted")


def test_too_large_even_without_claims() -> None:
    whole = verdict(mixed(5), trim=["x" * 200_000])
    result = fit_verdict(whole, KEY, 100_000)
    assert isinstance(result, TooLarge)
    assert "100000" in result.detail and "every claim omitted" in result.detail


def test_a_record_that_cannot_degrade_is_refused() -> None:
    whole = verdict(mixed(3))
    assert fit_record(whole, KEY, size(whole)) == Fitted(whole, encode(whole))
    refused = fit_record(whole, KEY, size(whole) - 1)
    assert isinstance(refused, TooLarge) and "verdict of" in refused.detail


def letter(value: bytes, key: bytes | None = b"conv") -> DeadLetter:
    return DeadLetter(
        reason=DeadLetterReason.PROCESSING_ERROR,
        error="boom",
        topic="answers",
        partition=2,
        offset=7,
        key_b64=None if key is None else base64.b64encode(key).decode(),
        value_b64=base64.b64encode(value).decode(),
        received_at=AT,
    )


def test_a_dead_letter_that_fits_keeps_the_original_bytes() -> None:
    whole = letter(b"x" * 1000)
    assert fit_dead_letter(whole, b"conv", 64 * 1024) == Fitted(whole, encode(whole))


def test_a_dead_letter_too_large_drops_the_value_and_says_so() -> None:
    fitted = fit_dead_letter(letter(b"x" * 100_000), b"conv", 64 * 1024)
    value = fitted.value
    document = json.loads(value)
    assert document == fitted.model.model_dump(mode="json")
    assert document["value_b64"] == "" and document["key_b64"] is not None
    assert "original value left out: 133336 base64 characters" in document["error"]
    assert fits(b"conv", value, 64 * 1024)


def test_then_the_original_key_too() -> None:
    big_key = b"k" * 60_000
    value = fit_dead_letter(letter(b"x" * 10, key=big_key), None, 64 * 1024).value
    document = json.loads(value)
    assert document["value_b64"] == "" and document["key_b64"] is None
    assert "original key left out too" in document["error"]
    assert fits(None, value, 64 * 1024)


@settings(max_examples=40, deadline=None)
@given(
    labels=st.lists(st.sampled_from(LABELS), min_size=1, max_size=60),
    fraction=st.floats(min_value=0.01, max_value=1.2),
)
def test_whatever_comes_back_fits_and_keeps_the_most_severe(
    labels: list[VerdictLabel | None], fraction: float
) -> None:
    claims = [claim(i, label, signals=5) for i, label in enumerate(labels)]
    whole = verdict(claims)
    limit = max(OVERHEAD_BYTES + 1, int(size(whole) * fraction))
    result = fit_verdict(whole, KEY, limit)
    if isinstance(result, TooLarge):  # only when not even the claimless verdict fits
        note = f"OUTPUT_TRIMMED: signals dropped; {len(claims)} of {len(claims)} claims omitted"
        bare = verdict([])
        limits = [*bare.judgement.limits, note]
        bare = bare.model_copy(
            update={"judgement": bare.judgement.model_copy(update={"limits": limits})}
        )
        assert size(bare) > limit
        return
    assert fits(KEY, result.value, limit)
    kept = result.model.judgement.claims
    dropped = [c for c in claims if c.index not in {k.index for k in kept}]
    for k in kept:  # a kept claim is more severe, or as severe and earlier, than any dropped
        assert all((rank(k), k.index) < (rank(d), d.index) for d in dropped)


def rank(item: ClaimVerdict) -> int:
    order = [VerdictLabel.CONTRADICTED, VerdictLabel.UNSUPPORTED]
    return order.index(item.verdict) if item.verdict in order else 2
