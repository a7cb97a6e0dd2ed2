"""Review sampling: flagged answers always, passed ones by a seeded, per-cell rate."""

from __future__ import annotations

import json
from collections.abc import Sequence

from streamproc.config import Settings
from streamproc.contracts.label_events import ReviewItem, SampledBecause
from streamproc.inference.options import JudgeSettings
from streamproc.verdicts.options import SampleRate
from streamproc.verdicts.record import OutboundRecord
from streamproc.verdicts.review_sampling import ReviewSampling, review_draw
from streamproc.verdicts.stage import StageLimits, judge_messages
from streamproc.wiring import build_judge, output_topics
from tests.unit.verdicts.test_stage import BAD, GOOD, answer, message

RULES = build_judge(JudgeSettings(name="rules"))
TOPICS = output_topics(Settings.model_construct())


def test_the_draw_is_fixed_by_seed_and_answer_and_uniform() -> None:
    assert review_draw(3, "a1") == review_draw(3, "a1")
    assert review_draw(3, "a1") != review_draw(4, "a1")
    draws = [review_draw(0, f"answer-{i}") for i in range(20_000)]
    assert all(0 <= d < 1 for d in draws)
    share = sum(d < 0.02 for d in draws) / len(draws)
    assert 0.017 < share < 0.023  # 2 % within about 3 standard errors


def test_the_most_specific_override_wins() -> None:
    sampling = ReviewSampling(
        rate=0.02,
        rates=(
            SampleRate(tenant="acme", rate=0.1),
            SampleRate(tenant="acme", task_type="Summary", rate=0.5),
            SampleRate(assistant_id="bot", rate=0.3),
        ),
    )
    assert sampling.rate_for("acme", "x", "QA") == 0.1
    assert sampling.rate_for("acme", "x", "Summary") == 0.5
    assert sampling.rate_for("other", "bot", "QA") == 0.3
    assert sampling.rate_for("acme", "bot", "QA") == 0.1  # one field each: the first listed
    assert sampling.rate_for("other", "x", None) == 0.02


def review_items(records: Sequence[OutboundRecord]) -> list[ReviewItem]:
    return [
        ReviewItem.model_validate(json.loads(r.value or b""))
        for r in records
        if r.topic == TOPICS.review_items.name
    ]


def test_every_flagged_answer_is_queued_with_probability_one() -> None:
    limits = StageLimits(review=ReviewSampling(rate=0.0, judge_key="rules"))
    output = judge_messages([message(GOOD, 0), message(BAD, 1)], RULES, limits=limits)
    items = review_items(output.records)
    assert [i.answer_id for i in items] == ["ans-e2"]
    (item,) = items
    assert item.sampled_because is SampledBecause.FLAGGED
    assert item.inclusion_probability == 1.0
    assert item.judge_key == "rules" and item.task_type == "QA"
    assert item.evidence[0].text == "The order 7 was shipped on 5 May."
    assert item.judgement == output.verdicts[1].judgement
    assert output.review_items == items
    # Next to the answer's other records, after its verdict.
    topics = [r.topic for r in output.records]
    assert topics.index(TOPICS.review_items.name) > topics.index(TOPICS.verdicts.name)


def test_passed_answers_are_drawn_at_their_rate() -> None:
    text, evidence = "The order was shipped on Monday [D1].", "The order was shipped on Monday."
    passed = [answer(f"p{i}", text, evidence) for i in range(200)]
    limits = StageLimits(review=ReviewSampling(rate=0.25, seed=7))
    output = judge_messages([message(p, i) for i, p in enumerate(passed)], RULES, limits=limits)
    items = review_items(output.records)
    expected = {f"ans-p{i}" for i in range(200) if review_draw(7, f"ans-p{i}") < 0.25}
    assert {i.answer_id for i in items} == expected
    assert 30 < len(items) < 70
    assert {(i.sampled_because, i.inclusion_probability) for i in items} == {
        (SampledBecause.RANDOM, 0.25)
    }


def test_no_review_items_without_sampling() -> None:
    output = judge_messages([message(BAD, 0)], RULES, limits=StageLimits())
    assert review_items(output.records) == [] and output.review_items == []
