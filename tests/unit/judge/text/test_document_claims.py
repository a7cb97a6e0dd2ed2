"""Sentences about the document: which shape, and what part of them is checked."""

from __future__ import annotations

import pytest

from streamproc.judge.text.document_claims import about_document, topic_reason
from streamproc.judge.text.features import content_words


@pytest.mark.parametrize(
    ("sentence", "kind", "content"),
    [
        (
            "The article discusses the killing of Walter Scott.",
            "topic",
            "the killing of Walter Scott.",
        ),
        ("The author also reflects on his childhood in Ohio.", "topic", "his childhood in Ohio."),
        ("This report focuses on flood defences.", "topic", "flood defences."),
        ("The author argues that body cameras help.", "report", "Body cameras help."),
        ("Overall, the article concludes that the plan failed.", "report", "The plan failed."),
        ("According to the article, prices rose by 4%.", "report", "Prices rose by 4%."),
        ("The article highlights that turnout fell.", "report", "Turnout fell."),
        (
            "However, the author also acknowledges that cameras cost money.",
            "report",
            "Cameras cost money.",
        ),
        (
            "The author, a defense attorney, argues that bail is too high.",
            "report",
            "Bail is too high.",
        ),
        ("The author expresses horror at the video.", "topic", "horror at the video."),
    ],
)
def test_sentences_about_the_document(sentence: str, kind: str, content: str) -> None:
    found = about_document(sentence)
    assert found is not None
    assert (found.kind, found.content) == (kind, content)


@pytest.mark.parametrize(
    "sentence",
    [
        "The mayor discusses the budget on Monday.",  # a person, not the source
        "Articles discuss many things.",
        "The court noted the delay.",  # reported speech of someone in the story
        "The storm described in the forecast never came.",
    ],
)
def test_sentences_about_the_world_are_left_alone(sentence: str) -> None:
    assert about_document(sentence) is None


def test_the_topic_must_be_the_evidence_s_and_name_nothing_new() -> None:
    evidence = content_words("Floods hit the coast of Devon after three days of storms.")
    assert topic_reason("the floods on the Devon coast", evidence, 0) is None
    assert topic_reason("the election of a new mayor", evidence, 0) is not None
    reason = topic_reason("the floods on the Devon coast", evidence, 1)
    assert reason is not None and "1 name(s)" in reason
