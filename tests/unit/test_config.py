"""One settings object, from STREAMPROC_* variables, round-tripping to a child process."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from streamproc.config import Settings, UnknownVariablesError, unknown_setting_variables


def test_env_prefix_and_nested_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMPROC_BROKER_URL", "kafka://a:1;kafka://b:2")
    monkeypatch.setenv("STREAMPROC_WINDOW__SIZE_S", "30")
    monkeypatch.setenv("STREAMPROC_TOPICS__PARTITIONS", "12")
    settings = Settings()
    assert settings.bootstrap_servers == "a:1,b:2"
    assert settings.window.size_s == 30
    assert settings.topics.partitions == 12


def test_invalid_values_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMPROC_WINDOW__SIZE_S", "-1")
    with pytest.raises(ValidationError):
        Settings()


def test_to_env_round_trips(monkeypatch: pytest.MonkeyPatch) -> None:
    original = Settings(
        app_id="x", log_json=False, window={"size_s": 7.5}, topics={"partitions": 2}
    )
    for name, value in original.to_env().items():
        monkeypatch.setenv(name, value)
    assert Settings() == original


def test_overriding_sets_only_the_given_values_of_one_group() -> None:
    base = Settings(gate={"port": 9000, "host": "0.0.0.0"}, review={"port": 8000})
    changed = base.overriding("gate", port=9100, host=None, tokens_file=None)
    assert (changed.gate.port, changed.gate.host) == (9100, "0.0.0.0")
    assert changed.review == base.review and base.gate.port == 9000
    assert base.overriding("gate", port=None) is base


@pytest.mark.parametrize(
    ("name", "closest"),
    [
        ("STREAMPROC_BROKR_URL", "STREAMPROC_BROKER_URL"),  # pydantic-settings alone ignores it
        ("STREAMPROC_WORKER__BATCH_MAXX", "STREAMPROC_WORKER__BATCH_MAX"),
        ("streamproc_log_levle", "STREAMPROC_LOG_LEVEL"),  # read in any case, so checked too
        ("STREAMPROC_LOG_JSON__X", "STREAMPROC_LOG_JSON"),  # a plain value has no fields
        ("STREAMPROC_ZZZZ", None),
    ],
)
def test_an_unknown_name_is_refused_with_the_closest_setting(
    name: str, closest: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, "1")
    with pytest.raises(UnknownVariablesError) as refused:
        Settings()
    assert [(each.name, each.suggestion) for each in refused.value.unknown] == [(name, closest)]


def test_known_names_are_not_refused() -> None:
    environ = {
        "STREAMPROC_WORKER": '{"batch_max": 3}',  # a whole group as JSON
        "STREAMPROC_JUDGE__INFERENCE__NLI_MODEL": "x",  # two levels down
        "STREAMPROC_JUDGE__CONFIDENCE_BY_MODEL__LLM_1": "{}",  # a free-form key
        "STREAMPROC_REVIEWER_TOKEN": "t",  # not a setting, read on its own
        "PATH": "/bin",
    }
    assert unknown_setting_variables(environ) == []
