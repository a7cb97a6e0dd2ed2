"""The package's dependency directions, read from every import statement in it.

The judge is a pure library, the alerting maths knows nothing of Kafka or models, the
event contract sits at the bottom, and adapters hang on the stream's hooks instead of
importing the stream. A rule broken here is a wrong-way import, wherever it sits in the
module: function-local and ``TYPE_CHECKING`` imports count as much as top-level ones.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "streamproc"


@dataclass(frozen=True)
class Import:
    """One imported module name, where it is imported, and the line."""

    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} imports {self.imported}"


def module_name(path: Path, root: Path = PACKAGE_ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, importer: str, *, is_package: bool = False) -> Iterator[Import]:
    """Every module ``source`` imports, at any depth of the syntax tree. ``from a import b``
    yields ``a`` and ``a.b`` (``b`` may be a module); relative imports are resolved."""
    package = importer if is_package else importer.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(importer, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            yield Import(importer, module, node.lineno)
            for alias in node.names:
                yield Import(importer, f"{module}.{alias.name}", node.lineno)


def all_imports() -> list[Import]:
    found: list[Import] = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        found.extend(
            imports_of(
                path.read_text(encoding="utf-8"),
                module_name(path),
                is_package=path.name == "__init__.py",
            )
        )
    return found


def within(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _private_judge_module(name: str) -> bool:
    parts = name.split(".")
    return within(name, "streamproc.judge") and any(
        p.startswith("_") and p != "__version__" for p in parts[2:]
    )


def broken(imports: list[Import]) -> dict[str, list[str]]:
    """Each rule's name -> the imports that break it."""
    ours = [i for i in imports if within(i.imported, "streamproc")]
    rules: dict[str, list[str]] = {
        "judge imports only judge, events, stats": [
            str(i)
            for i in ours
            if within(i.importer, "streamproc.judge")
            and not within(
                i.imported,
                "streamproc.judge",
                "streamproc.contracts.events",
                "streamproc.rates.stats",
            )
            and i.imported != "streamproc"
        ],
        "alerting imports no inference, adapters, stream, evaluate": [
            str(i)
            for i in ours
            if within(i.importer, "streamproc.monitor.alerts")
            and within(
                i.imported,
                "streamproc.inference",
                "streamproc.adapters",
                "streamproc.stream",
                "streamproc.evaluate",
                "streamproc.wiring",
            )
        ],
        "events imports nothing of streamproc": [
            str(i) for i in ours if i.importer == "streamproc.contracts.events"
        ],
        "label_events imports only events": [
            str(i)
            for i in ours
            if i.importer == "streamproc.contracts.label_events"
            and not within(i.imported, "streamproc.contracts.events")
        ],
        "adapters never import stream": [
            str(i)
            for i in ours
            if within(i.importer, "streamproc.adapters") and within(i.imported, "streamproc.stream")
        ],
        "inference imports no stream, adapters, evaluate": [
            str(i)
            for i in ours
            if within(i.importer, "streamproc.inference")
            and within(
                i.imported, "streamproc.stream", "streamproc.adapters", "streamproc.evaluate"
            )
        ],
        "gate imports only events, gate_events, config, judge, stream.judging, "
        "stream.output, stream.loop.publisher": [
            str(i)
            for i in ours
            if within(i.importer, "streamproc.gate")
            and not within(
                i.imported,
                "streamproc.gate",
                "streamproc.contracts.events",
                "streamproc.contracts.gate_events",
                "streamproc.config",
                "streamproc.judge",
                "streamproc.stream.judging",
                "streamproc.stream.output",
                "streamproc.kafka.publisher",
            )
            and i.imported != "streamproc"
            # The Kafka client is the caller's side, already allowed aiokafka: it needs
            # the broker's security options and the reply topic's name and creation.
            and not (
                i.importer == "streamproc.gate.client"
                and within(i.imported, "streamproc.kafka.security", "streamproc.kafka.topics")
            )
        ],
        "gate imports no aiohttp, nor aiokafka outside its client": [
            str(i)
            for i in imports
            if within(i.importer, "streamproc.gate")
            and (
                within(i.imported, "aiohttp")
                or (within(i.imported, "aiokafka") and i.importer != "streamproc.gate.client")
            )
        ],
        "nobody outside judge imports a private judge module": [
            str(i)
            for i in ours
            if not within(i.importer, "streamproc.judge") and _private_judge_module(i.imported)
        ],
    }
    return {rule: _once_per_statement(found) for rule, found in rules.items()}


def _once_per_statement(found: list[str]) -> list[str]:
    """``from a import b, c`` breaks a rule once, not once per name."""
    seen: dict[str, str] = {}
    for line in found:
        seen.setdefault(line.split(" imports ")[0], line)
    return list(seen.values())


@pytest.fixture(scope="module")
def package_imports() -> list[Import]:
    return all_imports()


def test_every_dependency_direction_holds(package_imports: list[Import]) -> None:
    breaks = {rule: found for rule, found in broken(package_imports).items() if found}
    assert not breaks, "\n".join(
        f"{rule}:\n  " + "\n  ".join(found) for rule, found in breaks.items()
    )


def test_the_reader_sees_every_module_of_the_package(package_imports: list[Import]) -> None:
    importers = {i.importer for i in package_imports}
    assert {
        "streamproc.judge.nli.judge",
        "streamproc.wiring",
        "streamproc.contracts.events",
    } <= importers
    assert len(importers) > 100


def test_function_local_and_type_checking_imports_are_read() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from streamproc.config import Settings\n"
        "def build() -> None:\n"
        "    from streamproc.inference.loader import load_nli\n"
        "    import streamproc.stream.worker\n"
        "class A:\n"
        "    def m(self) -> None:\n"
        "        from ..adapters import metrics\n"
    )
    found = {i.imported for i in imports_of(source, "streamproc.judge.engine")}
    assert {
        "streamproc.config",
        "streamproc.inference.loader",
        "streamproc.stream.worker",
        "streamproc.telemetry.metrics",
    } <= found


def test_a_wrong_way_import_is_reported() -> None:
    planted = [
        Import("streamproc.judge.engine", "streamproc.config", 3),
        Import("streamproc.monitor.alerts.alert_monitor", "streamproc.inference.loader", 9),
        Import("streamproc.contracts.events", "streamproc.rates.corrected_rate", 15),
        Import("streamproc.contracts.label_events", "streamproc.config", 12),
        Import("streamproc.telemetry.metrics", "streamproc.verdicts.stage", 34),
        Import("streamproc.evaluate.calibration.collect", "streamproc.judge._protocols", 20),
        Import("streamproc.gate.service", "streamproc.telemetry.otel", 7),
        Import("streamproc.gate.service", "aiokafka", 8),
    ]
    breaks = broken(planted)
    assert sum(len(found) for found in breaks.values()) == len(planted)
    assert breaks["nobody outside judge imports a private judge module"] == [
        "streamproc.evaluate.calibration.collect:20 imports streamproc.judge._protocols"
    ]
