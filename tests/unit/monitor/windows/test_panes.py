"""Window arithmetic: sizes and panes, which windows hold a pane, pane counting, the
latency histogram, and a window's aggregate as the sum of its panes."""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from streamproc.config import Settings
from streamproc.contracts.events import AnswerOutcome
from streamproc.kafka.store import decode_entry, encode_entry
from streamproc.monitor.options import HoppingWindow, WindowSettings
from streamproc.monitor.windows.panes import (
    LATENCY_BINS,
    LiveCounts,
    Pane,
    WindowTotals,
    add_outcome,
    close_pane,
    latency_bin,
    latency_quantiles,
)
from streamproc.monitor.windows.spec import (
    SeriesKey,
    WindowSpec,
    next_window_end,
    pane_ms_of,
    pane_start_ms,
    size_label,
    window_specs,
)
from streamproc.rates.corrected_rate import ConfusionCounts, corrected_rate_mixed
from streamproc.rates.judge_accuracy import JudgeAccuracy, judge_accuracy
from streamproc.rates.stats import wilson_interval

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
START = int(T0.timestamp() * 1000)
MINUTE = 60_000


def outcome(
    event_id: str,
    *,
    at: float = 0.0,
    hallucinated: bool = False,
    abstained: bool = False,
    faithfulness: float | None = 1.0,
    judge_ms: float | None = 10.0,
    task_type: str | None = None,
    verified: bool = True,
) -> AnswerOutcome:
    return AnswerOutcome(
        event_id=event_id,
        answer_id=f"answer-{event_id}",
        assistant_id="bot",
        tenant="t",
        model="m",
        occurred_at=T0 + timedelta(seconds=at),
        hallucinated=hallucinated,
        abstained=abstained,
        contradicted_claims=int(hallucinated),
        unsupported_claims=0,
        faithfulness=faithfulness,
        judge_ms=judge_ms,
        task_type=task_type,
        verified=verified,
    )


def test_default_sizes_are_one_minute_tumbling_and_two_hopping_on_one_minute_panes() -> None:
    specs = window_specs(WindowSettings())
    assert specs == (
        WindowSpec(60_000, 60_000),
        WindowSpec(300_000, 60_000),
        WindowSpec(3_600_000, 300_000),
    )
    assert [spec.label for spec in specs] == ["1m", "5m", "1h"]
    assert [spec.tumbling for spec in specs] == [True, False, False]
    assert pane_ms_of(specs) == MINUTE
    odd = window_specs(WindowSettings(size_s=45, hopping=[HoppingWindow(size_s=120, hop_s=90)]))
    assert pane_ms_of(odd) == 15_000


def test_window_settings_refuse_gaps_sub_millisecond_sizes_and_too_many_panes() -> None:
    with pytest.raises(ValidationError, match="gaps"):
        WindowSettings(hopping=[HoppingWindow(size_s=60, hop_s=120)])
    with pytest.raises(ValidationError, match="whole milliseconds"):
        WindowSettings(size_s=0.0004)
    with pytest.raises(ValidationError, match="panes"):
        WindowSettings(size_s=0.5, hopping=[HoppingWindow(size_s=3600, hop_s=300)])


def test_hopping_windows_travel_through_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMPROC_WINDOW__HOPPING", '[{"size_s": 600, "hop_s": 120}]')
    assert Settings().window.hopping == [HoppingWindow(size_s=600, hop_s=120)]
    monkeypatch.setenv("STREAMPROC_WINDOW__HOPPING", "[]")
    assert window_specs(Settings().window) == (WindowSpec(60_000, 60_000),)


def test_panes_are_aligned_to_the_epoch() -> None:
    assert pane_start_ms(T0.timestamp() + 59.999, MINUTE) == START
    assert pane_start_ms(T0.timestamp() + 60, MINUTE) == START + MINUTE
    assert pane_start_ms(-0.5, MINUTE) == -MINUTE


def test_the_windows_holding_a_pane_by_brute_force() -> None:
    rng = random.Random(7)
    for _ in range(200):
        pane = rng.choice([15_000, 60_000])
        hop = pane * rng.randint(1, 5)
        size = hop * rng.randint(1, 4) + pane * rng.randint(0, 3) if rng.random() < 0.5 else hop
        spec = WindowSpec(size, hop)
        start = pane * rng.randint(-100, 100)
        aligned = (start - 10 * size) // hop * hop
        expected = [
            end
            for end in range(aligned, start + 10 * size, hop)
            if end - size <= start and end >= start + pane
        ]
        assert list(spec.ends_containing(start, pane)) == expected, (spec, start, pane)


def test_next_window_end_is_the_earliest_end_after_a_time_with_a_pane_inside() -> None:
    specs = window_specs(WindowSettings())
    panes = [START, START + 2 * MINUTE]
    assert next_window_end(panes, None, specs, MINUTE) == START + MINUTE
    assert next_window_end(panes, START + MINUTE, specs, MINUTE) == START + 2 * MINUTE
    # After the last pane's minute only hopping windows remain: 5 min every 1 min ...
    assert next_window_end(panes, START + 3 * MINUTE, specs, MINUTE) == START + 4 * MINUTE
    # ... and, after the last 5-minute one, the hour every 5 minutes (aligned to 5 min).
    last_five = START + 2 * MINUTE + 5 * MINUTE
    after = next_window_end(panes, last_five, specs, MINUTE)
    assert after == START + 10 * MINUTE
    assert next_window_end(panes, START + 2 * MINUTE + 60 * MINUTE, specs, MINUTE) is None
    assert next_window_end([], None, specs, MINUTE) is None


def test_size_labels_match_the_metrics_window_label() -> None:
    assert [size_label(s) for s in (60, 300, 3600, 86400, 90, 5400, 7.5)] == [
        "1m",
        "5m",
        "1h",
        "1d",
        "90s",
        "90m",
        "7.5s",
    ]


def test_series_keys_cannot_be_confused_whatever_the_names() -> None:
    first = SeriesKey("a|b", "c", "m").text()
    second = SeriesKey("a", "b|c", "m").text()
    assert first != second
    assert SeriesKey.parse(first) == SeriesKey("a|b", "c", "m")
    assert SeriesKey.parse(SeriesKey('t"]', "ü", "|").text()) == SeriesKey('t"]', "ü", "|")


def fill(*items: AnswerOutcome, late: bool = False, examples: int = 5) -> Pane:
    pane = None
    for item in items:
        pane = add_outcome(pane, item, start=START, now=0.0, late=late, examples=examples) or pane
    assert pane is not None
    return pane


def test_a_pane_counts_answers_abstentions_claims_and_examples() -> None:
    pane = fill(
        outcome("a", hallucinated=True, faithfulness=0.5),
        outcome("b"),
        outcome("c", abstained=True, faithfulness=None),
        outcome("d", hallucinated=True, abstained=True),  # abstained: not in the rate
    )
    assert (pane.answers, pane.answered, pane.abstained) == (4, 2, 2)
    assert pane.hallucinated == 1
    assert pane.examples == ("answer-a",)
    assert pane.contradicted == 2 and pane.faith_n == 3
    assert pane.revision == -1 and not pane.dirty
    assert pane.latency == [latency_bin(10.0), 4]


def test_the_last_counted_event_again_is_recognised_by_the_pane_alone() -> None:
    pane = fill(outcome("a"))
    assert add_outcome(pane, outcome("a"), start=START, now=0, late=False, examples=5) is None
    assert add_outcome(pane, outcome("b"), start=START, now=0, late=False, examples=5) is pane
    assert pane.answers == 2 and pane.last_event_id == "b"


def test_a_pane_round_trips_through_its_changelog_record_and_stays_small() -> None:
    def serialised(answers: int) -> str:
        pane = fill(
            *(
                outcome(
                    f"{index:036d}",
                    hallucinated=index % 3 == 0,
                    judge_ms=0.1 * 2 ** ((index % LATENCY_BINS) / 4),  # every bin in turn
                )
                for index in range(answers)
            )
        )
        _, value = encode_entry("p|x|0", pane)
        assert value is not None
        assert Pane.from_json(decode_entry(value)) == pane
        return value.decode()

    # Every latency bin used and five examples kept, the pane is as large as it gets
    # but for the counters' digits (about 130 counts in each of 96 bins, then 1,300).
    full, tenfold = serialised(12_500), serialised(125_000)
    assert len(tenfold) - len(full) < LATENCY_BINS + 60, (full, tenfold)
    assert len(full) < 1_200
    small = serialised(1)
    assert len(small) < 200, small  # one answer: mostly its two ids (event, example)
    with pytest.raises(ValueError, match="layout"):
        Pane.from_json([99, *json.loads(small)[1:]])


def test_closing_reports_what_changed_and_revisions_count_up() -> None:
    pane = fill(outcome("a", hallucinated=True), outcome("b"))
    assert close_pane(pane) == (2, 1)
    assert pane.revision == 0
    add_outcome(pane, outcome("c", hallucinated=True), start=START, now=1, late=True, examples=5)
    assert pane.dirty and pane.late == 1
    assert close_pane(pane) == (1, 1)
    assert pane.revision == 1 and not pane.dirty


def test_latency_bins_cover_every_value_and_quantiles_are_within_nine_percent() -> None:
    assert latency_bin(0.0) == 0 and latency_bin(math.nan) == 0
    assert latency_bin(1e12) == LATENCY_BINS - 1
    rng = random.Random(3)
    values = [rng.lognormvariate(2, 1.5) for _ in range(5000)]
    counts: dict[int, int] = {}
    for value in values:
        counts[latency_bin(value)] = counts.get(latency_bin(value), 0) + 1
    histogram = [number for bin_ in sorted(counts) for number in (bin_, counts[bin_])]
    ordered = sorted(values)
    qs = (0.5, 0.95)
    for q, estimate in zip(qs, latency_quantiles(histogram, qs), strict=True):
        exact = ordered[math.ceil(q * len(values)) - 1]
        assert estimate is not None
        assert abs(estimate / exact - 1) <= 2 ** (1 / 8) - 1 + 1e-9, (q, estimate, exact)
    assert latency_quantiles([], (0.5,)) == [None]


def test_a_window_is_the_sum_of_its_panes() -> None:
    spec = WindowSpec(3 * MINUTE, MINUTE)
    panes = []
    for number in range(3):
        items = [
            outcome(f"{number}-{i}", at=number * 60 + i, hallucinated=i < number + 1)
            for i in range(4)
        ]
        pane = None
        for item in items:
            pane = add_outcome(
                pane, item, start=START + number * MINUTE, now=0, late=False, examples=2
            )
        assert pane is not None
        panes.append(pane)
    totals = WindowTotals()
    for pane in panes:
        totals.add(pane, examples=2)
    aggregate = totals.aggregate(SeriesKey("t", "bot", "m"), spec, START + 3 * MINUTE, now=1.0)
    assert (aggregate.answers, aggregate.answered, aggregate.hallucinated) == (12, 12, 6)
    assert (aggregate.rate_low, aggregate.rate_high) == wilson_interval(6, 12)
    assert aggregate.example_answer_ids == ["answer-0-0", "answer-1-0"]  # N = 2, in order
    assert (aggregate.window, aggregate.window_size_s, aggregate.window_hop_s) == ("3m", 180, 60)
    assert aggregate.window_start == T0 and aggregate.window_end == T0 + timedelta(minutes=3)
    assert (aggregate.tenant, aggregate.assistant_id, aggregate.model) == ("t", "bot", "m")
    assert aggregate.judge_latency_p50_ms == pytest.approx(10.0, rel=0.09)


def test_no_answered_answer_means_no_rate_and_no_latency_means_none() -> None:
    pane = fill(outcome("a", abstained=True, judge_ms=None))
    totals = WindowTotals()
    totals.add(pane, examples=5)
    aggregate = totals.aggregate(SeriesKey("t", "b", "m"), WindowSpec(MINUTE, MINUTE), START, now=0)
    assert aggregate.rate is None and aggregate.rate_low is None
    assert aggregate.judge_latency_p50_ms is None and aggregate.abstentions == 1


def _window_of(counts: dict[str | None, tuple[int, int]]) -> WindowTotals:
    """One pane with (answered, hallucinated) answers per task type (None: untyped)."""
    items = [
        outcome(f"{task}-{i}", at=i % 60, hallucinated=i < flagged, task_type=task)
        for task, (answered, flagged) in counts.items()
        for i in range(answered)
    ]
    totals = WindowTotals()
    totals.add(fill(*items), examples=0)
    return totals


def test_the_corrected_rate_uses_the_judges_accuracy_on_each_task_type() -> None:
    """Counts of the judge's own (the shipped table may be re-measured any day)."""
    accuracy = JudgeAccuracy.model_validate(
        {
            "measured_at": "by hand",
            "table": "this test",
            "tasks": {
                "QA": {"tp": 480, "fn": 110, "tn": 581, "fp": 9},
                "Data2txt": {"tp": 28, "fn": 10, "tn": 26, "fp": 6},
            },
        }
    )
    qa = accuracy.for_task("QA")
    assert qa == ConfusionCounts(tp=480, fn=110, tn=581, fp=9)
    aggregate = _window_of({"QA": (1000, 60)}).aggregate(
        SeriesKey("t", "b", "m"),
        WindowSpec(MINUTE, MINUTE),
        START + MINUTE,
        now=0,
        accuracy=accuracy,
    )
    corrected = aggregate.corrected_rate
    assert corrected is not None and corrected.identifiable
    # Rogan-Gladen by hand: Se = 480/590, Sp = 581/590, p = (0.06 + Sp - 1) / (Se + Sp - 1).
    se, sp = 480 / 590, 581 / 590
    assert corrected.estimate == pytest.approx((0.06 + sp - 1) / (se + sp - 1))  # 0.0561
    assert corrected.estimate == pytest.approx(0.05605, abs=1e-4)
    low, estimate, high = corrected.low, corrected.estimate, corrected.high
    assert low is not None and estimate is not None and high is not None
    assert low < estimate < high
    assert aggregate.rate == 0.06 and corrected.observed == 0.06

    d2t = accuracy.for_task("Data2txt")
    assert d2t is not None
    mixed = _window_of({"QA": (1000, 60), "Data2txt": (200, 40)}).corrected(accuracy)
    assert mixed == corrected_rate_mixed([(60, 1000, qa), (40, 200, d2t)])


def test_no_corrected_rate_for_an_unmeasured_judge_or_untyped_answers() -> None:
    accuracy = judge_accuracy("nli+verdict-calibrator-verifier-v1")
    assert _window_of({"QA": (100, 6)}).corrected(None) is None
    assert _window_of({"QA": (100, 6), None: (5, 0)}).corrected(accuracy) is None
    assert _window_of({"Essay": (100, 6)}).corrected(accuracy) is None
    # The rules judge flagged every Data2txt answer: its flags say nothing there.
    rules = _window_of({"Data2txt": (50, 20)}).corrected(judge_accuracy("rules"))
    assert rules is not None and not rules.identifiable and rules.estimate is None


class _Cells:
    """Live counts for one (tenant, assistant, task type), recording what was asked."""

    def __init__(self, cell: tuple[str, str, str], counts: ConfusionCounts) -> None:
        self.cell, self.counts = cell, counts
        self.asked: list[tuple[str, str, str]] = []

    def live_counts(self, tenant: str, assistant_id: str, task_type: str) -> LiveCounts | None:
        self.asked.append((tenant, assistant_id, task_type))
        if (tenant, assistant_id, task_type) != self.cell:
            return None
        return LiveCounts(self.counts, 42)


def test_an_aggregate_reads_live_counts_of_its_own_series_cells_only() -> None:
    offline = judge_accuracy("rules")
    assert offline is not None
    live = ConfusionCounts(tp=30.5, fn=4.0, tn=20.0, fp=3.5)
    totals = _window_of({"QA": (100, 30), "Summary": (50, 10)})
    spec = WindowSpec(MINUTE, MINUTE)
    mine = _Cells(("t", "b", "Summary"), live)
    aggregate = totals.aggregate(
        SeriesKey("t", "b", "m"), spec, START + MINUTE, now=0, accuracy=offline, live=mine
    )
    assert sorted(mine.asked) == [("t", "b", "QA"), ("t", "b", "Summary")]
    qa = offline.for_task("QA")
    assert qa is not None
    assert aggregate.corrected_rate == corrected_rate_mixed(
        [(30, 100, qa), (10, 50, live)]
    ).model_copy(update={"source": "mixed", "labels_used": 42})
    # Another tenant's series with the same assistant id: the cell is not its own.
    other = totals.aggregate(
        SeriesKey("u", "b", "m"), spec, START + MINUTE, now=0, accuracy=offline, live=mine
    )
    assert other.corrected_rate == totals.corrected(offline)
    assert other.corrected_rate is not None and other.corrected_rate.source == "offline-benchmark"


def test_a_pane_of_the_layout_before_task_types_still_reads() -> None:
    pane = fill(outcome("a", hallucinated=True, task_type="QA"), outcome("b", task_type="QA"))
    assert pane.by_task == {"QA": [2, 1]}
    old = [1, *pane.to_json()[1:-2]]  # layout 1: no by_task, no unverified
    restored = Pane.from_json(old)
    assert restored.by_task == {} and restored.answered == 2
    assert restored.unverified == 0


def test_a_pane_of_the_layout_before_unverified_answers_reads_with_none() -> None:
    pane = fill(outcome("a", hallucinated=True, task_type="QA"), outcome("b", task_type="QA"))
    old = [2, *pane.to_json()[1:-1]]  # layout 2: no unverified
    restored = Pane.from_json(old)
    assert restored == pane and restored.unverified == 0


def test_unverified_answers_are_counted_apart_from_faithful_and_hallucinated() -> None:
    pane = fill(
        outcome("a", hallucinated=True, faithfulness=0.5, task_type="QA"),
        outcome("b", task_type="QA"),
        outcome("c", abstained=True, faithfulness=None),
        # not checked: a refused language (no claim checked), a budget that ran out with
        # one checked claim refuting the answer - neither counts in the rate
        outcome("d", faithfulness=None, verified=False, task_type="QA"),
        outcome("e", hallucinated=True, faithfulness=0.0, verified=False, task_type="QA"),
        outcome("f", abstained=True, faithfulness=None, verified=False),
    )
    assert (pane.answers, pane.answered, pane.abstained, pane.unverified) == (6, 2, 1, 3)
    assert pane.hallucinated == 1 and pane.examples == ("answer-a",)
    assert pane.contradicted == 1  # e's refuted claim is not counted either
    assert (pane.faith_sum, pane.faith_n) == (1.5, 2)
    assert pane.by_task == {"QA": [2, 1]}
    assert pane.latency == [latency_bin(10.0), 6]  # the judge spent its time on all six
    assert Pane.from_json(pane.to_json()) == pane
    assert close_pane(pane) == (2, 1)  # what the alerts count: verified answers only

    totals = WindowTotals()
    totals.add(pane, examples=5)
    totals.add(fill(outcome("g", at=1, verified=False)), examples=5)
    aggregate = totals.aggregate(SeriesKey("t", "b", "m"), WindowSpec(MINUTE, MINUTE), START, now=0)
    assert (aggregate.answers, aggregate.answered, aggregate.abstentions) == (7, 2, 1)
    assert aggregate.unverified == 4
    assert aggregate.answers == aggregate.answered + aggregate.abstentions + aggregate.unverified
    assert aggregate.hallucinated == 1 and aggregate.rate == 0.5
    assert (aggregate.rate_low, aggregate.rate_high) == wilson_interval(1, 2)
    assert aggregate.mean_faithfulness == 0.75


def test_a_window_of_unverified_answers_only_has_no_rate() -> None:
    totals = WindowTotals()
    totals.add(fill(outcome("a", verified=False), outcome("b", verified=False)), examples=5)
    aggregate = totals.aggregate(SeriesKey("t", "b", "m"), WindowSpec(MINUTE, MINUTE), START, now=0)
    assert (aggregate.answers, aggregate.unverified, aggregate.answered) == (2, 2, 0)
    assert aggregate.rate is None and aggregate.mean_faithfulness is None
