"""The labels join, without a broker: a label before or after its review item, a
duplicate, a second reviewer (the answer counts once, the pair for kappa), a reviewer's
correction, refusals (another tenant, no tokens), a label that waits in vain, the state
surviving a rebuild, and the retention sweep."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, date, datetime
from typing import Any

import pytest

from streamproc.contracts.events import (
    Action,
    AnswerJudgement,
    ClaimClass,
    ClaimVerdict,
    DeadLetterReason,
    JudgeInfo,
    Outcome,
    VerdictLabel,
)
from streamproc.contracts.label_events import (
    AccuracyCell,
    AnswerLabel,
    LabelEvent,
    ReviewItem,
    SampledBecause,
    Tally,
)
from streamproc.kafka.store import TrackedStore
from streamproc.rates.live_accuracy import CellState, answer_contribution, apply_delta
from streamproc.review.labels.join import (
    ITEM_PREFIX,
    WAIT_PREFIX,
    Accepted,
    Duplicate,
    EntryTooLarge,
    LabelJoin,
    MayLabel,
    Rejected,
    Waiting,
    claim_agreement,
    item_key,
    wait_key,
)
from streamproc.verdicts.dead_letter import MessageOrigin

T0 = 1_790_000_000.0
WAIT_S = 60.0
ALLOWED = {("ann", "acme"), ("bob", "acme"), ("eve", "other")}


def may_label(reviewer: str, tenant: str) -> bool:
    return (reviewer, tenant) in ALLOWED


def review_item(
    answer_id: str = "a1",
    *,
    tenant: str = "acme",
    hallucinated: bool = True,
    p: float = 1.0,
    verdicts: tuple[VerdictLabel | None, ...] = (
        VerdictLabel.SUPPORTED,
        VerdictLabel.CONTRADICTED,
        None,
    ),
    task_type: str | None = "Summary",
    judge_key: str | None = "rules",
) -> ReviewItem:
    claims = [
        ClaimVerdict(
            index=index,
            sentence_index=index,
            text=f"claim {index}",
            start=0,
            end=1,
            claim_class=ClaimClass.DOCUMENT if verdict else ClaimClass.CONVERSATIONAL,
            verdict=verdict,
        )
        for index, verdict in enumerate(verdicts)
    ]
    return ReviewItem(
        answer_id=answer_id,
        event_id=f"e-{answer_id}",
        conversation_id="c",
        tenant=tenant,
        assistant_id="bot",
        model="m",
        task_type=task_type,
        occurred_at=datetime(2026, 11, 30, 23, 30, tzinfo=UTC),
        judged_at=datetime(2026, 11, 30, 23, 31, tzinfo=UTC),
        sampled_because=SampledBecause.FLAGGED if hallucinated else SampledBecause.RANDOM,
        inclusion_probability=p,
        answer="An answer.",
        judgement=AnswerJudgement(
            claims=claims,
            checked_claims=sum(v is not None for v in verdicts),
            supported_claims=sum(v is VerdictLabel.SUPPORTED for v in verdicts),
            contradicted_claims=sum(v is VerdictLabel.CONTRADICTED for v in verdicts),
            unsupported_claims=sum(v is VerdictLabel.UNSUPPORTED for v in verdicts),
            faithfulness=None,
            hallucinated=hallucinated,
            abstained=False,
            outcome=Outcome.CORRECT,
            action=Action.WITHHOLD if hallucinated else Action.PASS,
        ),
        judge=JudgeInfo(name="rules", version="1", granularity="sentence"),
        judge_key=judge_key,
    )


def label_bytes(
    label_id: str = "l1",
    *,
    answer_id: str = "a1",
    reviewer: str = "ann",
    tenant: str = "acme",
    answer_label: AnswerLabel | None = "hallucinated",
    claims: dict[int, str] | None = None,
) -> bytes:
    document: dict[str, Any] = {
        "label_id": label_id,
        "answer_id": answer_id,
        "tenant": tenant,
        "reviewer": reviewer,
        "labelled_at": "2026-12-01T10:00:00+00:00",
        "answer_label": answer_label,
        "claims": [{"index": i, "label": v} for i, v in (claims or {}).items()],
    }
    return json.dumps(document).encode()


def origin(offset: int = 7, answer_id: str = "a1") -> MessageOrigin:
    return MessageOrigin("labels", 0, offset, answer_id.encode())


def new_join(
    store: TrackedStore | None = None,
    *,
    may: MayLabel | None = may_label,
    max_entry_bytes: int = 1024 * 1024,
) -> LabelJoin:
    return LabelJoin(
        store if store is not None else TrackedStore(),
        wait_s=WAIT_S,
        retain_s=90 * 86400.0,
        may_label=may,
        max_entry_bytes=max_entry_bytes,
    )


def accepted(handled: object) -> Accepted:
    assert isinstance(handled, Accepted), handled
    return handled


def rejected(handled: object) -> Rejected:
    assert isinstance(handled, Rejected), handled
    return handled


def tallies(done: Accepted) -> dict[str, Tally]:
    return {k: getattr(done.delta, k) for k in ("tp", "fp", "fn", "tn")}


def test_a_label_after_its_item_is_accepted_with_audit_and_delta() -> None:
    join = new_join()
    assert join.item(review_item(), T0) == []
    raw = label_bytes(claims={0: "supported", 1: "supported", 2: "contradicted"})
    done = accepted(join.label(raw, origin(), T0 + 5))

    assert done.delta.cell == AccuracyCell(
        tenant="acme", assistant_id="bot", task_type="Summary", judge_key="rules"
    )
    assert done.delta.new_answer and done.delta.reviewer_pair is None
    assert done.delta.answer_day == date(2026, 11, 30)
    assert tallies(done) == {
        "tp": Tally(n=1.0, w=1.0, w2=1.0),
        "fp": Tally(),
        "fn": Tally(),
        "tn": Tally(),
    }
    # Claim 2 is unchecked by the judge: left out. Claim 1: the judge said contradicted.
    assert (done.delta.claims_compared, done.delta.claims_agreeing) == (2, 1)
    audit = done.audit
    assert audit.agrees_with_judge is True and audit.judge_hallucinated is True
    assert audit.claims_disagreeing == [1]
    assert audit.label_sha256 == hashlib.sha256(raw).hexdigest()
    assert audit.recorded_at == datetime.fromtimestamp(T0 + 5, UTC)
    assert (audit.tenant, audit.assistant_id, audit.judge_key) == ("acme", "bot", "rules")


def test_a_label_before_its_item_waits_and_is_accepted_when_the_item_comes() -> None:
    join = new_join()
    raw = label_bytes(answer_label="faithful")
    assert isinstance(join.label(raw, origin(), T0), Waiting)
    assert join.waiting() == 1
    (released,) = join.item(review_item(p=0.25, hallucinated=False), T0 + 30)
    done = accepted(released)
    # A passed answer sampled at 25 % stands for four: weight 4.
    assert tallies(done)["tn"] == Tally(n=1.0, w=4.0, w2=16.0)
    assert done.audit.label_sha256 == hashlib.sha256(raw).hexdigest()
    assert join.waiting() == 0
    assert join.expire(T0 + WAIT_S * 10) == []


def test_a_repeated_label_id_is_a_duplicate_waiting_or_joined() -> None:
    join = new_join()
    assert isinstance(join.label(label_bytes(), origin(1), T0), Waiting)
    assert join.label(label_bytes(), origin(2), T0) == Duplicate("l1")
    (released,) = join.item(review_item(), T0)
    accepted(released)
    assert join.label(label_bytes(), origin(3), T0) == Duplicate("l1")
    # A repeated item changes nothing and releases nothing.
    assert join.item(review_item(hallucinated=False), T0) == []


def test_a_second_reviewer_shares_the_answer_and_makes_a_pair() -> None:
    join = new_join()
    join.item(review_item(hallucinated=True, p=0.5), T0)
    first = accepted(join.label(label_bytes("l1", reviewer="ann"), origin(1), T0))
    second = accepted(
        join.label(label_bytes("l2", reviewer="bob", answer_label="faithful"), origin(2), T0)
    )
    assert not second.delta.new_answer
    assert second.delta.reviewer_pair == ("hallucinated", "faithful")
    assert second.audit.agrees_with_judge is False
    # The answer counts once: half of it moved from tp to fp.
    state = CellState()
    apply_delta(state, first.delta)
    apply_delta(state, second.delta)
    expected = answer_contribution(True, ["hallucinated", "faithful"], 2.0)
    for key, tally in expected.items():
        got = getattr(state, key)
        assert got.n == pytest.approx(tally.n) and got.w == pytest.approx(tally.w)
        assert got.w2 == pytest.approx(tally.w2)
    assert state.tp.w == pytest.approx(1.0) and state.fp.w == pytest.approx(1.0)
    assert (state.labelled_answers, state.labels) == (1, 2)


def test_a_third_reviewer_makes_no_second_pair_and_cant_tell_carries_nothing() -> None:
    join = new_join(may=lambda reviewer, tenant: True)
    join.item(review_item(hallucinated=False), T0)
    accepted(join.label(label_bytes("l1", reviewer="ann", answer_label=None), origin(1), T0))
    second = accepted(join.label(label_bytes("l2", reviewer="bob"), origin(2), T0))
    # The first reviewer could not tell: no pair, and the answer is wholly bob's fn.
    assert second.delta.reviewer_pair is None
    assert tallies(second)["fn"] == Tally(n=1.0, w=1.0, w2=1.0)
    third = accepted(join.label(label_bytes("l3", reviewer="cid"), origin(3), T0))
    assert third.delta.reviewer_pair is None
    assert tallies(third)["fn"].n == pytest.approx(0.0)


def test_a_reviewers_later_label_replaces_their_earlier_one() -> None:
    join = new_join()
    join.item(review_item(hallucinated=True), T0)
    first = accepted(join.label(label_bytes("l1", claims={1: "contradicted"}), origin(1), T0))
    fixed = accepted(
        join.label(
            label_bytes("l2", answer_label="faithful", claims={1: "supported"}), origin(2), T0
        )
    )
    assert not fixed.delta.new_answer and fixed.delta.reviewer_pair is None
    assert tallies(fixed)["tp"] == Tally(n=-1.0, w=-1.0, w2=-1.0)
    assert tallies(fixed)["fp"] == Tally(n=1.0, w=1.0, w2=1.0)
    # The claim comparison moves from the old label to the new one.
    assert (first.delta.claims_compared, first.delta.claims_agreeing) == (1, 1)
    assert (fixed.delta.claims_compared, fixed.delta.claims_agreeing) == (0, -1)
    state = CellState()
    apply_delta(state, first.delta)
    apply_delta(state, fixed.delta)
    assert state.fp.w == pytest.approx(1.0) and state.tp.w == pytest.approx(0.0)
    assert (state.claims_compared, state.claims_agreeing) == (1, 0)


@pytest.mark.parametrize(
    ("reviewer", "tenant", "may", "why"),
    [
        ("eve", "acme", may_label, "may not see tenant 'acme'"),
        ("ann", "acme", None, "no reviewer tokens"),
    ],
)
def test_a_label_a_reviewer_may_not_make_is_refused_with_its_bytes(
    reviewer: str, tenant: str, may: MayLabel | None, why: str
) -> None:
    store = TrackedStore()
    join = new_join(store, may=may)
    join.item(review_item(), T0)
    raw = label_bytes(reviewer=reviewer, tenant=tenant)
    refused = rejected(join.label(raw, origin(9), T0))
    assert refused.rejection.reason is DeadLetterReason.LABEL_REFUSED
    assert why in refused.rejection.error
    assert (refused.value, refused.origin, refused.outcome) == (raw, origin(9), "refused")
    # Refused, not remembered: the same label id later (once allowed) is not a duplicate.
    if tenant == "acme":
        accepted(new_join(store, may=lambda r, t: True).label(raw, origin(10), T0))


def test_a_label_its_reviewer_may_not_make_is_refused_before_waiting() -> None:
    join = new_join()
    raw = label_bytes(reviewer="eve")
    refused = rejected(join.label(raw, origin(4), T0))
    assert refused.rejection.reason is DeadLetterReason.LABEL_REFUSED
    assert (refused.origin, refused.value) == (origin(4), raw)
    assert join.waiting() == 0 and join.item(review_item(), T0 + 1) == []


def test_a_label_whose_item_never_comes_expires_whole_to_unknown_answer() -> None:
    store = TrackedStore()
    join = new_join(store)
    raw = label_bytes(answer_id="ghost")
    assert isinstance(join.label(raw, origin(5, "ghost"), T0), Waiting)
    assert join.expire(T0 + WAIT_S - 1) == []
    store.drain()
    (gone,) = join.expire(T0 + WAIT_S)
    assert gone.rejection.reason is DeadLetterReason.UNKNOWN_ANSWER
    assert "ghost" in gone.rejection.error
    assert (gone.value, gone.origin, gone.outcome) == (raw, origin(5, "ghost"), "unknown_answer")
    assert store.drain() == [(wait_key("acme", "ghost", "l1"), None)]  # its tombstone
    assert join.waiting() == 0 and join.expire(T0 + WAIT_S * 2) == []


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", DeadLetterReason.BAD_JSON),
        (None, DeadLetterReason.BAD_JSON),
        (b'{"label_id": "x"}', DeadLetterReason.SCHEMA_VIOLATION),
        (label_bytes(answer_label="maybe"), DeadLetterReason.SCHEMA_VIOLATION),  # type: ignore[arg-type]
    ],
)
def test_a_label_that_cannot_be_read_is_rejected_as_invalid(
    raw: bytes | None, reason: DeadLetterReason
) -> None:
    refused = rejected(new_join().label(raw, origin(), T0))
    assert (refused.rejection.reason, refused.outcome, refused.value) == (reason, "invalid", raw)


def test_state_rebuilt_from_the_store_keeps_items_labels_and_waiting_ones() -> None:
    store = TrackedStore()
    join = new_join(store)
    join.item(review_item("a1"), T0)
    accepted(join.label(label_bytes("l1"), origin(1), T0))
    join.label(label_bytes("l9", answer_id="a2"), origin(2, "a2"), T0)
    # What the changelog holds, read back (JSON round trip), in a new join.
    data = {key: json.loads(json.dumps(value)) for key, value in store.items()}
    again = new_join(TrackedStore(data))
    assert again.waiting() == 1
    assert again.label(label_bytes("l1"), origin(1), T0) == Duplicate("l1")
    second = accepted(again.label(label_bytes("l2", reviewer="bob"), origin(3), T0))
    assert second.delta.reviewer_pair == ("hallucinated", "hallucinated")
    (released,) = again.item(review_item("a2"), T0 + 1)
    assert accepted(released).delta.new_answer


def test_the_sweep_forgets_old_items_only() -> None:
    store = TrackedStore()
    join = LabelJoin(
        store, wait_s=WAIT_S, retain_s=100.0, may_label=may_label, max_entry_bytes=1 << 20
    )
    join.item(review_item("old"), T0)
    join.item(review_item("new"), T0 + 50)
    store.drain()
    assert join.sweep(T0 + 120) == 1
    assert store.drain() == [(item_key("acme", "old"), None)]
    # A label for the forgotten answer now waits like any unknown one.
    assert isinstance(join.label(label_bytes(answer_id="old"), origin(), T0 + 121), Waiting)


def test_entries_over_the_changelog_limit_are_refused_not_stored() -> None:
    join = new_join(max_entry_bytes=1500)
    big = label_bytes(answer_id="ghost", claims={i: "supported" for i in range(40)})
    gone = rejected(join.label(big, origin(), T0))
    assert gone.rejection.reason is DeadLetterReason.UNKNOWN_ANSWER and gone.value == big
    assert join.waiting() == 0
    many = tuple([VerdictLabel.SUPPORTED] * 200)
    with pytest.raises(EntryTooLarge):
        join.item(review_item(verdicts=many), T0)


def test_claim_agreement_counts_only_claims_both_judged() -> None:
    judge = {"0": "supported", "1": "contradicted", "2": None}
    labels = {"0": "supported", "1": "unsupported", "2": "supported", "3": "cant_tell"}
    assert claim_agreement(judge, labels) == (2, 1)
    assert claim_agreement(judge, {"0": "cant_tell"}) == (0, 0)


def test_a_waiting_entry_keeps_the_original_bytes_exactly() -> None:
    store = TrackedStore()
    join = new_join(store)
    raw = label_bytes(answer_id="a5") + b"  \n"  # trailing bytes: still valid JSON
    join.label(raw, origin(answer_id="a5"), T0)
    entry = store[wait_key("acme", "a5", "l1")]
    assert base64.b64decode(entry["value_b64"]) == raw
    assert LabelEvent.model_validate_json(raw).answer_id == "a5"


def test_one_label_id_waiting_for_two_answers_keeps_both() -> None:
    join = new_join()
    assert isinstance(join.label(label_bytes("l1", answer_id="a1"), origin(1), T0), Waiting)
    assert isinstance(join.label(label_bytes("l1", answer_id="a2"), origin(2), T0), Waiting)
    assert join.waiting() == 2
    (released,) = join.item(review_item("a2"), T0)
    assert accepted(released).delta.answer_id == "a2" and join.waiting() == 1


def test_another_tenants_item_of_the_same_answer_id_takes_no_label_of_this_tenant() -> None:
    """globex queues an item under acme's answer id first: acme's label waits for acme's
    own item and joins it; globex's item keeps its own labels."""
    join = new_join(may=lambda reviewer, tenant: True)
    join.item(review_item("a1", tenant="globex"), T0)
    acme_label = label_bytes("l1", tenant="acme")
    assert isinstance(join.label(acme_label, origin(1), T0), Waiting)
    (released,) = join.item(review_item("a1", tenant="acme"), T0 + 1)
    done = accepted(released)
    assert (done.audit.tenant, done.delta.cell.tenant) == ("acme", "acme")
    globex = accepted(join.label(label_bytes("l2", tenant="globex"), origin(2), T0 + 2))
    assert globex.delta.cell.tenant == "globex" and globex.delta.new_answer


def test_a_label_for_an_answer_id_only_another_tenant_has_expires_as_unknown() -> None:
    join = new_join(may=lambda reviewer, tenant: True)
    join.item(review_item("a1", tenant="globex"), T0)
    assert isinstance(join.label(label_bytes(tenant="acme"), origin(), T0), Waiting)
    (gone,) = join.expire(T0 + WAIT_S)
    assert gone.rejection.reason is DeadLetterReason.UNKNOWN_ANSWER
    assert "tenant 'acme'" in gone.rejection.error


def test_state_of_the_earlier_layout_moves_to_tenant_keys_on_restore() -> None:
    """Entries keyed by answer id alone (before tenants scoped them) are re-keyed when a
    join is built on them; the moves go out as changelog changes."""
    store = TrackedStore()
    join = new_join(store)
    join.item(review_item("a1"), T0)
    join.label(label_bytes("l9", answer_id="a2"), origin(2, "a2"), T0)
    old: dict[str, Any] = {}
    for key, value in store.items():
        if key.startswith(ITEM_PREFIX):
            value = {k: v for k, v in value.items() if k != "answer_id"}
            old[ITEM_PREFIX + "a1"] = value
        else:
            value = {k: v for k, v in value.items() if k != "tenant"}
            old[WAIT_PREFIX + json.dumps(["a2", "l9"])] = value
    restored = TrackedStore(old)
    again = new_join(restored)
    assert set(restored) == {item_key("acme", "a1"), wait_key("acme", "a2", "l9")}
    assert again.waiting() == 1
    accepted(again.label(label_bytes("l1"), origin(1), T0))
    (released,) = again.item(review_item("a2"), T0 + 1)
    accepted(released)
