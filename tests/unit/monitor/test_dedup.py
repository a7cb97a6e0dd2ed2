"""The judging loop's (tenant, event_id) marks without a broker: a repeat within the
horizon is split off before judging, another tenant's event of the same id is not, the
marks are bounded in age and number, and what the changelog carries restores them."""

from __future__ import annotations

import json
from typing import Any

from streamproc.config import Settings
from streamproc.contracts.events import Verdict
from streamproc.inference.options import JudgeSettings
from streamproc.kafka.store import decode_entry
from streamproc.monitor.dedup import EventDedup, JudgeDedup, event_identity, mark_key
from streamproc.verdicts.dead_letter import MessageOrigin
from streamproc.verdicts.stage import IncomingMessage, StageLimits, judge_messages
from streamproc.wiring import build_judge, kafka_loop_options
from tests.unit.gate.conftest import event

ANSWER = "Incomplete orders cannot be delivered or billed [D1]."


def _message(
    offset: int, *, tenant: str = "acme", event_id: str = "e1", partition: int = 0
) -> IncomingMessage:
    body = json.dumps(event(ANSWER, event_id=event_id, tenant=tenant)).encode()
    return IncomingMessage(body, MessageOrigin("answers", partition, offset, b"k"))


def _changelog_state(records: list[Any]) -> dict[int, dict[str, Any]]:
    """What a restore would read back: the last value per key, tombstones deleting."""
    state: dict[int, dict[str, Any]] = {}
    for record in records:
        part = state.setdefault(record.partition, {})
        key = record.key.decode()
        if record.value is None:
            part.pop(key, None)
        else:
            part[key] = decode_entry(record.value)
    return state


def test_identity_is_read_only_from_a_json_object_with_both_fields() -> None:
    assert event_identity(b'{"tenant": "a", "event_id": "e"}', 100) == ("a", "e")
    assert event_identity(b'{"tenant": "a", "event_id": 5}', 100) is None
    assert event_identity(b'["a", "e"]', 100) is None
    assert event_identity(b"{oops", 100) is None
    assert event_identity(None, 100) is None
    assert event_identity(b'{"tenant": "a", "event_id": "e"}', 10) is None  # over the cap
    assert event_identity(b"[" * 100_000, 10**6) is None  # too deep for json: not a crash


def test_keys_cannot_be_forged_by_separators_in_the_ids() -> None:
    assert mark_key(("a|b", "c")) != mark_key(("a", "b|c"))
    assert mark_key(("a", "b,c")) != mark_key(("a,b", "c"))


def test_a_repeat_within_the_horizon_is_split_off_and_another_tenants_id_is_not() -> None:
    settings = Settings(judge={"name": "rules"}, worker={"dedup_horizon_s": 60.0})
    dedup = JudgeDedup(kafka_loop_options(settings), {})
    judge = build_judge(JudgeSettings(name="rules"))
    first = judge_messages([_message(0)], judge, limits=StageLimits(max_event_bytes=10**6))
    dedup.judged(first, now=1000.0)

    fresh, repeats = dedup.split(
        [_message(1), _message(2, tenant="globex"), _message(3, event_id="e2")], now=1030.0
    )

    assert [m.origin.offset for m in fresh] == [2, 3]
    assert [o.offset for o in repeats] == [1]
    later, _ = dedup.split([_message(4)], now=1061.0)  # past the horizon: judged again
    assert [m.origin.offset for m in later] == [4]


def test_one_batch_judges_each_tenants_event_of_a_shared_id() -> None:
    output = judge_messages(
        [_message(0, tenant="acme"), _message(1, tenant="globex"), _message(2, tenant="acme")],
        build_judge(JudgeSettings(name="rules")),
        limits=StageLimits(max_event_bytes=10**6),
    )
    assert sorted(v.tenant for v in output.verdicts) == ["acme", "globex"]
    assert [o.offset for o in output.repeats] == [2]


def test_marks_are_bounded_in_number_and_age() -> None:
    marks = EventDedup(horizon_s=100.0, max_entries=3)
    for i in range(5):
        marks.mark(0, ("t", f"e{i}"), now=float(i))
    assert marks.size(0) == 3
    assert not marks.seen(0, ("t", "e0"), now=5.0) and marks.seen(0, ("t", "e4"), now=5.0)
    marks.mark(0, ("t", "late"), now=150.0)  # e2, e3 and e4 are now older than the horizon
    assert marks.size(0) == 1
    assert marks.seen(0, ("t", "late"), now=150.0)
    assert not marks.seen(0, ("t", "e4"), now=150.0)


def test_the_changelog_restores_the_marks_and_tombstones_what_was_forgotten() -> None:
    settings = Settings(worker={"dedup_horizon_s": 100.0, "dedup_max_entries": 2})
    dedup = JudgeDedup(kafka_loop_options(settings), {})
    for i in range(3):
        dedup.marks.mark(i % 2, ("t", f"e{i}"), now=float(i))
    records = dedup.records()
    assert {r.topic for r in records} == {f"{settings.app_id}.judge-dedup-changelog"}
    assert dedup.records() == []  # drained

    restored = EventDedup(horizon_s=100.0, max_entries=2)
    for partition, state in _changelog_state(records).items():
        restored.restore(partition, state)
    assert restored.seen(0, ("t", "e0"), now=3.0) and restored.seen(0, ("t", "e2"), now=3.0)
    assert restored.seen(1, ("t", "e1"), now=3.0)
    assert not restored.seen(1, ("t", "e0"), now=3.0)  # marks are per partition


def test_forgotten_marks_go_out_as_tombstones() -> None:
    settings = Settings(worker={"dedup_horizon_s": 100.0, "dedup_max_entries": 1})
    dedup = JudgeDedup(kafka_loop_options(settings), {})
    dedup.marks.mark(0, ("t", "a"), now=0.0)
    dedup.records()
    dedup.marks.mark(0, ("t", "b"), now=1.0)
    changes = {(r.key or b"").decode(): r.value for r in dedup.records()}
    assert changes == {mark_key(("t", "a")): None, mark_key(("t", "b")): b"1.0"}


def test_a_zero_horizon_keeps_no_marks_and_writes_no_changelog() -> None:
    dedup = JudgeDedup(kafka_loop_options(Settings(worker={"dedup_horizon_s": 0.0})), {})
    output = judge_messages(
        [_message(0)],
        build_judge(JudgeSettings(name="rules")),
        limits=StageLimits(max_event_bytes=10**6),
    )
    dedup.judged(output, now=0.0)
    fresh, repeats = dedup.split([_message(1)], now=1.0)
    assert len(fresh) == 1 and repeats == [] and dedup.records() == []
    assert isinstance(output.verdicts[0], Verdict)


def test_a_changelog_value_that_is_no_time_is_left_out_of_the_restore() -> None:
    marks = EventDedup(horizon_s=100.0, max_entries=10)
    kept = marks.restore(0, {mark_key(("t", "a")): 1.0, mark_key(("t", "b")): "soon", "other": 2.0})
    assert kept == 1 and marks.seen(0, ("t", "a"), now=2.0)
    assert not marks.seen(0, ("t", "b"), now=2.0)
