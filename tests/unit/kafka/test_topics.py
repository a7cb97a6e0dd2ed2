"""Topics are created with explicit limits: output sizes and dead-letter retention."""

from __future__ import annotations

from streamproc.config import Settings
from streamproc.kafka.topics import DEAD_LETTER_MAX_BYTES, topic_specs
from streamproc.wiring import topic_layout


def test_every_output_topic_has_an_explicit_message_size_and_the_dead_letters_a_retention() -> None:
    settings = Settings(
        topics={"output_max_message_bytes": 2 * 1024 * 1024, "dead_letter_retention_ms": 3600000}
    )
    specs = {spec.name: spec.config for spec in topic_specs(topic_layout(settings))}
    topics = settings.topics
    for name in (topics.verdicts, topics.flags, topics.outcomes, topics.aggregates):
        assert specs[name]["max.message.bytes"] == str(2 * 1024 * 1024), name
    assert specs[topics.dead_letter] == {
        "max.message.bytes": str(DEAD_LETTER_MAX_BYTES),
        "retention.ms": "3600000",
    }
    assert specs[topics.answers] == {}, "the input topic belongs to the producers"
