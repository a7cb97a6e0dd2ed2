"""The windows' live accuracy table: the latest event per cell, tombstones, bad records
skipped; the judge's view of it (live only from ``min_labels`` on); and what it does to a
window's corrected rate: source, labels used, and an interval as wide as the labels are
few."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from streamproc.config import Settings
from streamproc.contracts.events import AnswerOutcome
from streamproc.contracts.label_events import AccuracyCell, JudgeAccuracyEvent, Tally
from streamproc.monitor.options import WindowSettings
from streamproc.monitor.windows.index import PartitionIndex
from streamproc.monitor.windows.live_accuracy import LiveAccuracy
from streamproc.monitor.windows.loop import WindowLoop
from streamproc.monitor.windows.panes import LiveCounts, WindowTotals
from streamproc.monitor.windows.table import close_due, count_outcome, window_timing
from streamproc.rates.corrected_rate import ConfusionCounts
from streamproc.rates.judge_accuracy import JudgeAccuracy
from streamproc.rates.live_accuracy import CellState, accuracy_event, live_confusion
from streamproc.wiring import kafka_loop_options, window_loop_options

JUDGE = "nli+some-calibrator"
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _tally(n: float) -> Tally:
    return Tally(n=n, w=n, w2=n)  # weight 1: every answer was certain to be reviewed


def event(
    tp: float,
    fn: float,
    tn: float,
    fp: float,
    *,
    task: str = "Summary",
    assistant: str = "bot",
    judge: str = JUDGE,
) -> JudgeAccuracyEvent:
    cell = AccuracyCell(tenant="t", assistant_id=assistant, task_type=task, judge_key=judge)
    labelled = round(tp + fn + tn + fp)
    state = CellState(
        tp=_tally(tp),
        fn=_tally(fn),
        tn=_tally(tn),
        fp=_tally(fp),
        labelled_answers=labelled,
        labels=labelled,
    )
    return accuracy_event(cell, state, offline=None, findings=[], now=NOW)


def record(found: JudgeAccuracyEvent) -> tuple[bytes, bytes]:
    return found.cell.key.encode(), found.model_dump_json().encode()


def table(*events: JudgeAccuracyEvent) -> LiveAccuracy:
    settings = Settings()
    live = LiveAccuracy(settings.bootstrap_servers, settings.labels.accuracy_topic)
    for each in events:
        live.apply(*record(each))
    return live


def window(counts: dict[str, tuple[int, int]]) -> WindowTotals:
    """A window's totals with (answered, hallucinated) per task type."""
    return WindowTotals(
        answered=sum(n for n, _ in counts.values()),
        by_task={task: [n, h] for task, (n, h) in counts.items()},
    )


OFFLINE = JudgeAccuracy.model_validate(
    {
        "measured_at": "by hand",
        "table": "this test",
        "tasks": {
            "Summary": {"tp": 20, "fn": 8, "tn": 50, "fp": 21},
            "Data2txt": {"tp": 50, "fn": 10, "tn": 30, "fp": 20},
        },
    }
)


def test_the_table_keeps_the_latest_event_per_cell_and_forgets_a_tombstoned_one() -> None:
    first, second = event(5, 5, 5, 5), event(9, 1, 8, 2)
    other = event(1, 1, 1, 1, task="Data2txt")
    live = table(first, other, second)
    assert live.lookup("t", "bot", "Summary", JUDGE) == second
    assert live.lookup("t", "bot", "Data2txt", JUDGE) == other
    assert live.lookup("t", "bot", "Summary", "rules") is None  # another judge's cell
    assert live.lookup("t", "other-bot", "Summary", JUDGE) is None
    live.apply(other.cell.key.encode(), None)
    assert live.lookup("t", "bot", "Data2txt", JUDGE) is None and len(live) == 1


def test_a_bad_record_is_skipped_and_the_cell_keeps_its_last_good_event() -> None:
    good = event(9, 1, 8, 2)
    live = table(good)
    live.apply(good.cell.key.encode(), b"{not json")
    live.apply(good.cell.key.encode(), b'{"cell": "not a cell"}')
    live.apply(None, None)  # a keyless tombstone: nothing to delete
    assert live.skipped == 2
    assert live.lookup("t", "bot", "Summary", JUDGE) == good


def test_a_cell_is_live_once_it_has_min_labels_of_both_classes() -> None:
    summary = event(14, 6, 7, 2)
    live = table(summary, event(10, 0, 30, 0, task="Data2txt"))
    view = live.for_judge(JUDGE, min_labels=29)
    found = view.live_counts("t", "bot", "Summary")
    assert found is not None and found.labelled_answers == 29
    assert found.counts == live_confusion(summary, min_labels=29)
    assert found.counts.sensitivity == pytest.approx(14 / 20)
    assert found.counts.specificity == pytest.approx(7 / 9)
    assert live.for_judge(JUDGE, min_labels=30).live_counts("t", "bot", "Summary") is None
    # Data2txt: 40 labels but never a faithful answer the judge flagged or a missed one -
    # both classes are there, so it is live.
    assert view.live_counts("t", "bot", "Data2txt") is not None
    one_class = table(event(12, 3, 0, 0))
    assert one_class.for_judge(JUDGE, min_labels=1).live_counts("t", "bot", "Summary") is None


def test_live_counts_correct_the_window_and_say_so() -> None:
    live = table(event(18, 2, 45, 5)).for_judge(JUDGE, min_labels=30)
    totals = window({"Summary": (100, 40)})
    corrected = totals.corrected(OFFLINE, lambda task: live.live_counts("t", "bot", task))
    assert corrected is not None and corrected.identifiable
    assert (corrected.source, corrected.labels_used) == ("live", 70)
    se, sp = 18 / 20, 45 / 50
    assert corrected.estimate == pytest.approx((0.40 + sp - 1) / (se + sp - 1))
    offline = totals.corrected(OFFLINE)
    assert offline is not None and (offline.source, offline.labels_used) == ("offline-benchmark", 0)
    assert offline.estimate != pytest.approx(corrected.estimate)


def test_a_window_live_for_one_task_type_and_offline_for_another_is_mixed() -> None:
    live = table(event(18, 2, 45, 5)).for_judge(JUDGE, min_labels=30)
    totals = window({"Summary": (100, 40), "Data2txt": (50, 30)})
    corrected = totals.corrected(OFFLINE, lambda task: live.live_counts("t", "bot", task))
    assert corrected is not None and (corrected.source, corrected.labels_used) == ("mixed", 70)
    # Live counts need no offline ones; a type with neither leaves the window uncorrected.
    assert totals.corrected(None, lambda task: live.live_counts("t", "bot", task)) is None
    alone = window({"Summary": (100, 40)})
    only_live = alone.corrected(None, lambda task: live.live_counts("t", "bot", task))
    assert only_live is not None and only_live.source == "live"


def test_few_labels_give_a_wider_interval_than_many_with_the_same_accuracy() -> None:
    totals = window({"Summary": (200, 80)})
    widths = []
    for scale in (1, 10):
        cells = table(event(18 * scale, 2 * scale, 45 * scale, 5 * scale))
        live = cells.for_judge(JUDGE, min_labels=30)
        corrected = totals.corrected(None, lambda task: live.live_counts("t", "bot", task))  # noqa: B023
        assert corrected is not None and corrected.low is not None and corrected.high is not None
        assert corrected.labels_used == 70 * scale
        widths.append(corrected.high - corrected.low)
    few, many = widths
    assert few > 1.5 * many


def test_weights_shrink_the_effective_counts_and_widen_the_interval() -> None:
    """Passed answers sampled at 10 % weigh 10: the misses among them decide sensitivity,
    measured on fewer effective answers than labels."""
    cell = AccuracyCell(tenant="t", assistant_id="bot", task_type="Summary", judge_key=JUDGE)

    def weighted(weight: float) -> JudgeAccuracyEvent:
        passed = {"n": 1.0, "w": weight, "w2": weight * weight}
        state = CellState(
            tp=_tally(40),
            fp=_tally(10),
            fn=Tally(**{k: v * 5 for k, v in passed.items()}),
            tn=Tally(**{k: v * 45 for k, v in passed.items()}),
            labelled_answers=100,
            labels=100,
        )
        return accuracy_event(cell, state, offline=None, findings=[], now=NOW)

    plain = live_confusion(weighted(1.0), min_labels=30)
    heavy = live_confusion(weighted(10.0), min_labels=30)
    assert isinstance(plain, ConfusionCounts) and isinstance(heavy, ConfusionCounts)
    assert heavy.tp + heavy.fn < plain.tp + plain.fn
    totals = window({"Summary": (200, 80)})
    widths = []
    for counts in (plain, heavy):

        def lookup(_task: str, counts: ConfusionCounts = counts) -> LiveCounts:
            return LiveCounts(counts, 100)

        corrected = totals.corrected(None, lookup)
        assert corrected is not None and corrected.low is not None and corrected.high is not None
        widths.append(corrected.high - corrected.low)
    assert widths[1] > widths[0]


def test_the_window_loop_needs_the_judge_key_with_a_live_table() -> None:
    settings = Settings()
    with pytest.raises(ValueError, match="judge_key"):
        WindowLoop(
            kafka_loop_options(settings),
            window_loop_options(settings),
            live_accuracy=LiveAccuracy(settings.bootstrap_servers, settings.labels.accuracy_topic),
        )


def test_closed_windows_carry_the_live_correction_through_the_table() -> None:
    """window_timing(live=...) -> close_series -> the aggregate, as the loop runs it."""
    live = table(event(18, 2, 45, 5, assistant="bot")).for_judge(JUDGE, min_labels=30)
    timing = window_timing(WindowSettings(), max_event_age_s=86400.0, accuracy=OFFLINE, live=live)
    store: dict[str, Any] = {}
    index = PartitionIndex(timing)
    for number in range(10):
        outcome = AnswerOutcome(
            event_id=f"e{number}",
            answer_id=f"a{number}",
            tenant="t",
            assistant_id="bot",
            model="m",
            occurred_at=NOW + timedelta(seconds=number),
            hallucinated=number < 4,
            abstained=False,
            contradicted_claims=0,
            unsupported_claims=0,
            faithfulness=None,
            judge_ms=None,
            task_type="Summary",
        )
        count_outcome(store, index, outcome, partition=0, now=NOW.timestamp() + number)
    closed = close_due(store, index, NOW.timestamp() + 3600)
    rates = {spec.label: aggregate.corrected_rate for spec, aggregate in closed.aggregates}
    assert rates and all(r is not None and r.source == "live" for r in rates.values())
    assert {r.labels_used for r in rates.values() if r is not None} == {70}
