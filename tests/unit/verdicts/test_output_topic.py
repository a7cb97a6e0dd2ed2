"""An output topic turns a model into one outbound record: its topic, its key, its bytes
fitted under the topic's limit, the headers given; and it pickles into the judge's process."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime
from typing import Any

import pytest

from streamproc.config import Settings
from streamproc.contracts.events import AnswerOutcome, DeadLetter
from streamproc.kafka.topics import (
    DEAD_LETTER_MAX_BYTES,
    judge_dedup_changelog_topic,
    topic_specs,
    window_changelog_topic,
)
from streamproc.monitor.options import AlertSettings, WindowSettings
from streamproc.verdicts.fit import OVERHEAD_BYTES, TooLarge, encode
from streamproc.verdicts.options import TopicSettings
from streamproc.verdicts.output_topic import OutputTopic, Prepared, RecordTooLarge
from streamproc.verdicts.record import OutboundRecord
from streamproc.wiring import output_topics, topic_layout

AT = datetime(2026, 1, 1, tzinfo=UTC)
HEADERS = (("traceparent", b"00-abc"),)
OUTCOME = AnswerOutcome(
    event_id="e1",
    answer_id="a1",
    assistant_id="bot",
    tenant="t",
    model="llm",
    occurred_at=AT,
    hallucinated=False,
    abstained=False,
    contradicted_claims=0,
    unsupported_claims=0,
    faithfulness=None,
)


def outcomes(max_bytes: int) -> OutputTopic[AnswerOutcome]:
    return OutputTopic("outcomes", max_bytes, lambda outcome: outcome.assistant_id.encode())


def test_a_model_becomes_one_record() -> None:
    prepared = outcomes(64 * 1024).prepare(OUTCOME, headers=HEADERS)
    assert prepared == Prepared(
        OUTCOME, OutboundRecord("outcomes", b"bot", encode(OUTCOME), headers=HEADERS)
    )
    assert outcomes(64 * 1024).record(OUTCOME) == OutboundRecord(
        "outcomes", b"bot", encode(OUTCOME)
    )


def test_a_record_over_the_limit_is_refused_or_raises() -> None:
    limit = len(b"bot") + len(encode(OUTCOME)) + OVERHEAD_BYTES
    assert isinstance(outcomes(limit).prepare(OUTCOME), Prepared)
    refused = outcomes(limit - 1).prepare(OUTCOME)
    assert isinstance(refused, TooLarge) and "answeroutcome of" in refused.detail
    with pytest.raises(RecordTooLarge, match=r"^outcomes: answeroutcome of"):
        outcomes(limit - 1).record(OUTCOME)


def test_encoded_bytes_are_forwarded_as_they_are() -> None:
    topic: OutputTopic[AnswerOutcome] = OutputTopic("state", 2048)
    assert topic.forward(b"k", b"v", partition=4) == OutboundRecord("state", b"k", b"v", 4)
    assert topic.forward(b"k", None).value is None  # a tombstone
    with pytest.raises(RecordTooLarge, match=r"^state: record of 1026 bytes"):
        topic.forward(b"k", b"v" * 1025)
    with pytest.raises(TypeError, match="encoded records only"):
        topic.prepare(OUTCOME)


def test_the_catalog_names_keys_and_sizes_every_output() -> None:
    settings = Settings(
        topics=TopicSettings(output_max_message_bytes=200_000),
        window=WindowSettings(late_topic="late", hopping_topic="hop"),
        alerts=AlertSettings(topic="alerts"),
    )
    topics = output_topics(settings)
    names: dict[str, OutputTopic[Any]] = {
        topics.verdicts.name: topics.verdicts,
        topics.flags.name: topics.flags,
        topics.outcomes.name: topics.outcomes,
        topics.audit.name: topics.audit,
        topics.dead_letters.name: topics.dead_letters,
        topics.aggregates.name: topics.aggregates,
        topics.hopping.name: topics.hopping,
        topics.late.name: topics.late,
        topics.alerts.name: topics.alerts,
        topics.window_state.name: topics.window_state,
        topics.review_items.name: topics.review_items,
        topics.labels.name: topics.labels,
        topics.label_deltas.name: topics.label_deltas,
        topics.judge_accuracy.name: topics.judge_accuracy,
        topics.labels_state.name: topics.labels_state,
        topics.accuracy_state.name: topics.accuracy_state,
    }
    specs = {spec.name: spec for spec in topic_specs(topic_layout(settings))}
    # The gate's topics are no catalog outputs: its requests are read, its replies go to
    # the topic each request names (this default one sized as the other outputs).
    gate_replies = specs.pop(settings.gate.replies_topic)
    assert "max.message.bytes" not in specs.pop(settings.gate.requests_topic).config
    # The judging loop's (tenant, event_id) marks: written by its JudgeDedup, sized as the
    # other changelogs.
    dedup = specs.pop(judge_dedup_changelog_topic(settings.app_id))
    assert int(dedup.config["max.message.bytes"]) == topics.labels_state.max_bytes
    created = {
        name: int(spec.config["max.message.bytes"])
        for name, spec in specs.items()
        if name != settings.topics.answers  # the one topic read, not written
    }
    assert int(gate_replies.config["max.message.bytes"]) == topics.verdicts.max_bytes
    assert topics.label_audit.name == topics.audit.name  # labels join the audit chain
    assert {name: topic.max_bytes for name, topic in names.items()} == created
    assert topics.window_state.name == window_changelog_topic(settings.app_id)
    assert topics.dead_letters.max_bytes == DEAD_LETTER_MAX_BYTES
    assert topics.outcomes.record(OUTCOME).key == b"bot"
    assert topics.late.name == "late" and topics.hopping.name == "hop"


def test_the_topics_pickle() -> None:
    topics = output_topics(Settings.model_construct())
    assert pickle.loads(pickle.dumps(topics)) == topics
    letter: OutputTopic[DeadLetter] = pickle.loads(pickle.dumps(topics.dead_letters))
    assert letter.fit is topics.dead_letters.fit
