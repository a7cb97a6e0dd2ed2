"""Every window, tumbling and hopping, against a brute-force count of the same answers:
random traffic over several tenants, assistants and models, late and too-late answers,
redeliveries, irregular ticks, and a restart from the table half-way."""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import pytest

from streamproc.contracts.events import AnswerOutcome, WindowAggregate
from streamproc.monitor.options import HoppingWindow, WindowSettings
from streamproc.monitor.windows.index import PartitionIndex
from streamproc.monitor.windows.spec import pane_ms_of, window_specs
from streamproc.monitor.windows.table import (
    Counted,
    close_due,
    count_outcome,
    forget_expired_seen,
    rebuild_index,
    window_timing,
)
from streamproc.rates.stats import wilson_interval

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
START = T0.timestamp()

Key = tuple[str, str, str, str, float]  # tenant, assistant, model, window, start


@pytest.mark.parametrize(
    "settings",
    [
        WindowSettings(grace_s=5, idle_close_s=3, retain_closed_s=900),
        WindowSettings(
            size_s=30,
            grace_s=2,
            idle_close_s=2,
            retain_closed_s=300,
            examples=2,
            hopping=[HoppingWindow(size_s=120, hop_s=90), HoppingWindow(size_s=600, hop_s=300)],
        ),
    ],
    ids=["defaults", "odd-sizes"],
)
def test_latest_revisions_equal_a_brute_force_count(settings: WindowSettings) -> None:
    rng = random.Random(2026)
    timing = window_timing(settings, max_event_age_s=7 * 86400)
    store: dict[str, Any] = {}
    index = PartitionIndex(timing)
    counted: list[tuple[AnswerOutcome, int]] = []  # with the order they were counted in
    latest: dict[Key, WindowAggregate] = {}
    late_topic: list[str] = []
    now = START
    for number in range(3000):
        now += rng.expovariate(1 / 1.5)
        lag = rng.choice([0.2] * 18 + [rng.uniform(20, 400), rng.uniform(400, 2000)])
        item = AnswerOutcome(
            event_id=f"e{number}",
            answer_id=f"a{number}",
            tenant=rng.choice(["A", "B"]),
            assistant_id="bot",  # one assistant id shared by both tenants
            model=rng.choice(["m1", "m2"]),
            occurred_at=datetime.fromtimestamp(now - lag, UTC),
            hallucinated=rng.random() < 0.3,
            abstained=rng.random() < 0.1,
            contradicted_claims=rng.randrange(3),
            unsupported_claims=rng.randrange(2),
            faithfulness=rng.random(),
            judge_ms=rng.uniform(1, 50),
        )
        for _ in range(2 if rng.random() < 0.05 else 1):  # a redelivery now and then
            result = count_outcome(store, index, item, partition=0, now=now)
            if result is Counted.COUNTED:
                counted.append((item, len(counted)))
            elif result is Counted.TOO_LATE:
                late_topic.append(item.event_id)
        if rng.random() < 0.3:
            _collect(latest, close_due(store, index, now).aggregates)
            forget_expired_seen(store, index, now)
        if number == 1500:  # a restart: the index comes back from the table alone
            index = rebuild_index(list(store.items()), 0, timing)
    for later in range(1, 200):  # quiet: everything left closes on the wall clock
        _collect(latest, close_due(store, index, now + later * 30).aggregates)

    assert len({o.event_id for o, _ in counted}) == len(counted)  # none counted twice
    assert late_topic, "the traffic should have had answers past the lateness"
    assert len(counted) + len(late_topic) == 3000  # every answer: in a window or late
    expected = _brute_force(counted, settings)
    assert set(latest) == set(expected)
    for key, aggregate in latest.items():
        answers, answered, hallucinated, examples = expected[key]
        assert (aggregate.answers, aggregate.answered, aggregate.hallucinated) == (
            answers,
            answered,
            hallucinated,
        ), key
        interval = wilson_interval(hallucinated, answered)
        assert aggregate.rate_low == (interval[0] if interval else None), key
        assert aggregate.example_answer_ids == examples, key


def _collect(latest: dict[Key, WindowAggregate], aggregates: list[Any]) -> None:
    for _, aggregate in aggregates:
        key = (
            aggregate.tenant,
            aggregate.assistant_id,
            aggregate.model,
            aggregate.window,
            aggregate.window_start.timestamp(),
        )
        if key in latest:
            assert aggregate.revision > latest[key].revision, key
        latest[key] = aggregate


def _brute_force(
    counted: list[tuple[AnswerOutcome, int]], settings: WindowSettings
) -> dict[Key, tuple[int, int, int, list[str]]]:
    """Answers, answered, hallucinated and examples of every window holding an answer."""
    specs = window_specs(settings)
    pane_s = pane_ms_of(specs) / 1000
    groups: dict[Key, list[tuple[AnswerOutcome, int]]] = defaultdict(list)
    for item, order in counted:
        at = item.occurred_at.timestamp()
        for spec in specs:
            size, hop = spec.size_ms / 1000, spec.hop_ms / 1000
            end = (at // hop + 1) * hop
            while end - size <= at:
                key = (item.tenant, item.assistant_id, item.model, spec.label, end - size)
                groups[key].append((item, order))
                end += hop
    result = {}
    for key, items in groups.items():
        # Examples: in pane order, and within a pane in the order counted.
        ordered = sorted(
            items, key=lambda pair: (pair[0].occurred_at.timestamp() // pane_s, pair[1])
        )
        examples = [str(o.answer_id) for o, _ in ordered if o.hallucinated and not o.abstained][
            : settings.examples
        ]
        answered = [o for o, _ in items if not o.abstained]
        result[key] = (
            len(items),
            len(answered),
            sum(o.hallucinated for o in answered),
            examples,
        )
    return result
