"""The documents stay references a reader can take in: the README short, with a picture
that names every topic between the entry points, the figure pages within their size, and
no issue numbers anywhere a user reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
TOPICS_PAGE = REPO / "docs" / "reference" / "topics.md"
_TOPIC_ROW = re.compile(r"^\| \[`([a-z0-9.-]+)`\]", re.MULTILINE)
_ISSUE_NUMBER = re.compile(r"\bissues? ?#?\d+\b", re.IGNORECASE)


def _user_documents() -> list[Path]:
    return sorted([*REPO.glob("*.md"), *REPO.glob("docs/**/*.md"), *REPO.glob("deploy/**/*.md")])


def test_the_readme_is_short() -> None:
    assert len(README.read_text(encoding="utf-8")) <= 10_000


@pytest.mark.parametrize("name", ["BENCHMARKS.md", "EVALUATION.md", "RELIABILITY.md"])
def test_each_figure_page_is_within_its_size(name: str) -> None:
    assert len((REPO / name).read_text(encoding="utf-8")) <= 25_000


def test_the_readme_picture_names_every_topic_between_the_entry_points() -> None:
    readme = README.read_text(encoding="utf-8")
    picture = readme[readme.index("## The entry points") :].split("```")[1]
    topics = _TOPIC_ROW.findall(TOPICS_PAGE.read_text(encoding="utf-8"))
    assert "assistant.answers" in topics and "groundedness.gate-replies" in topics
    between = [t for t in topics if not t.endswith("-changelog")]  # a loop's own state
    # ".late-events" stands for "groundedness.late-events" beside the full name above it
    missing = [t for t in between if t not in picture and "." + t.split(".", 1)[1] not in picture]
    assert missing == []
    for process in ("judging loop", "window loop", "labels loop", "accuracy loop"):
        assert f"[worker: {process}]" in picture
    for entry_point in ("[audit-sink]", "[review serve", "[gate serve]"):
        assert entry_point in picture


def test_no_document_cites_an_issue_number() -> None:
    cited = {
        str(path.relative_to(REPO)): found
        for path in _user_documents()
        if (found := _ISSUE_NUMBER.findall(path.read_text(encoding="utf-8")))
    }
    assert cited == {}
