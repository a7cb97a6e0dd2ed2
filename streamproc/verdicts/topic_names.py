"""Names and size limits of topics that more than one part of streamproc must agree on:
the loops' changelogs (named after the app id, :mod:`streamproc.contracts.topic_names`)
and the byte caps of the topics that carry whole events (dead letters, audit records, the
review queue)."""

from __future__ import annotations

from streamproc.contracts.topic_names import (
    accuracy_changelog_topic,
    judge_dedup_changelog_topic,
    labels_changelog_topic,
    window_changelog_topic,
)

__all__ = [
    "AUDIT_MAX_MESSAGE_BYTES",
    "DEAD_LETTER_MAX_BYTES",
    "accuracy_changelog_topic",
    "judge_dedup_changelog_topic",
    "labels_changelog_topic",
    "window_changelog_topic",
]

DEAD_LETTER_MAX_BYTES = 8 * 1024 * 1024
"""A dead letter carries the original bytes base64-encoded (4/3 larger), so its topic
accepts bigger records than the input topic."""

AUDIT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024
"""An audit record holds the event exactly as received (base64) and parsed for display,
next to the whole verdict: with the default 512 KiB event cap it stays far below this."""
