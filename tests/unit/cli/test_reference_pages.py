"""docs/reference/*.md are generated from the code (``streamproc docs write``) and must be
current: a setting or a topic added without regenerating them fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamproc.cli import _topics_page
from streamproc.cli.main import main
from streamproc.cli.reference import REFERENCE_DIR, render_reference, stale_pages, write_reference
from streamproc.config import Settings, setting_variables
from streamproc.kafka.topics import audit_checkpoint_topic_spec, topic_specs
from streamproc.wiring import topic_layout

REPO = Path(__file__).resolve().parents[3]


def test_the_pages_live_in_docs_reference() -> None:
    assert REFERENCE_DIR == REPO / "docs" / "reference"


@pytest.mark.parametrize("name", sorted(render_reference()))
def test_the_committed_page_is_the_generated_one(name: str) -> None:
    committed = (REFERENCE_DIR / name).read_text(encoding="utf-8")
    assert committed == render_reference()[name], (
        f"docs/reference/{name} is out of date: run `streamproc docs write`"
    )


def test_the_settings_page_lists_every_variable() -> None:
    page = render_reference()["settings.md"]
    listed = re.findall(r"^\| `(STREAMPROC_\w+)` \|", page, re.MULTILINE)
    values = [each.name for each in setting_variables() if each.kind != "group"]
    assert sorted(listed) == sorted(values), "each variable once"
    assert "STREAMPROC_AUDIT__STORE_URL" in listed


def test_the_settings_page_names_fields_as_variables() -> None:
    """A description's ``late_topic`` or ``topics.aggregates`` shows as the variable."""
    page = render_reference()["settings.md"]
    late = next(
        line for line in page.splitlines() if "`STREAMPROC_WINDOW__RETAIN_CLOSED_S`" in line
    )
    assert "`STREAMPROC_WINDOW__LATE_TOPIC`" in late
    assert "``" not in page
    assert "streamproc.monitor.options" not in page, "types without their module"


def test_the_topics_page_lists_every_topic_of_the_catalog() -> None:
    settings = Settings.model_construct()
    page = render_reference()["topics.md"]
    headings = re.findall(r"^## (\S+)$", page, re.MULTILINE)
    catalog = [spec.name for spec in topic_specs(topic_layout(settings))]
    assert set(headings) == {*catalog, audit_checkpoint_topic_spec(topic_layout(settings)).name}
    assert len(headings) == len(set(headings))


def test_the_topics_page_says_key_value_settings_and_config() -> None:
    page = render_reference()["topics.md"]
    audit = page[page.index("## streamproc.audit\n") :].split("\n## ")[0]
    assert "set by `STREAMPROC_AUDIT__TOPIC`" in audit
    assert "key: `<tenant>/<answer_id>`" in audit
    assert "key: `label:<answer_id>:<label_id>`" in audit
    assert "[audit-record.schema.json](../../schemas/audit-record.schema.json)" in audit
    assert "`cleanup.policy`: `compact,delete`" in audit
    assert "from `STREAMPROC_AUDIT__RETENTION_DAYS`" in audit
    assert "Read by `streamproc audit-sink`" in audit
    changelog = page[page.index("## streamproc.window-state-changelog\n") :]
    assert "set by `STREAMPROC_APP_ID` + `.window-state-changelog`" in changelog
    for link in re.findall(r"\(\.\./\.\./schemas/([^)]+)\)", page):
        assert (REPO / "schemas" / link).is_file(), link


def test_a_topic_nobody_described_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    flows = dict(_topics_page._FLOWS)
    del flows["<STREAMPROC_TOPICS__FLAGS>"]
    monkeypatch.setattr(_topics_page, "_FLOWS", flows)
    with pytest.raises(KeyError, match=r"groundedness\.flags"):
        _topics_page.render_topics_page()


def test_the_pages_do_not_depend_on_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    before = render_reference()
    monkeypatch.setenv("STREAMPROC_TOPICS__PARTITIONS", "12")
    monkeypatch.setenv("STREAMPROC_TOPICS__VERDICTS", "elsewhere.verdicts")
    assert render_reference() == before


def test_docs_check_names_each_stale_page_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["docs", "write", "--output", str(tmp_path)]) == 0
    assert stale_pages(tmp_path) == []
    assert main(["docs", "check", "-o", str(tmp_path)]) == 0
    page = tmp_path / "settings.md"
    page.write_text(page.read_text(encoding="utf-8").replace("STREAMPROC_APP_ID", "X"))
    (tmp_path / "topics.md").unlink()
    capsys.readouterr()
    assert main(["docs", "check", "-o", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert (
        lines[0].startswith(str(tmp_path / "settings.md")) and "streamproc docs write" in lines[0]
    )
    assert lines[1].startswith(str(tmp_path / "topics.md"))


def test_write_returns_the_pages(tmp_path: Path) -> None:
    written = write_reference(tmp_path / "new")
    assert [path.name for path in written] == ["settings.md", "topics.md"]


def test_settings_markdown_prints_the_settings_page(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["settings", "--markdown"]) == 0
    assert capsys.readouterr().out == render_reference()["settings.md"]


def test_the_readme_links_the_pages() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "docs/reference/settings.md" in readme and "docs/reference/topics.md" in readme
