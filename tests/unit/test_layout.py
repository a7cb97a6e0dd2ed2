"""The house rules the import contracts cannot say: no module passes 600 lines, no two
classes share a name, and every public module says what it exports and why it exists."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "streamproc"
MAX_LINES = 600


def _python_files() -> list[Path]:
    roots = [PACKAGE, REPO / "bench", REPO / "modelwork", REPO / "scripts", REPO / "tests"]
    return sorted(path for root in roots for path in root.rglob("*.py"))


def test_no_module_passes_600_lines() -> None:
    long = {
        str(path.relative_to(REPO)): lines
        for path in _python_files()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_two_classes_share_a_name() -> None:
    where: defaultdict[str, list[str]] = defaultdict(list)
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}


def test_public_modules_declare_their_exports_and_say_why_they_exist() -> None:
    missing: list[str] = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        name = str(path.relative_to(REPO))
        if path.stat().st_size and ast.get_docstring(tree) is None:
            missing.append(f"{name}: no docstring")
        private = path.name.startswith("_") or any(p.startswith("_") for p in path.parts[:-1])
        declared = any(
            isinstance(node, ast.Assign | ast.AnnAssign)
            and any(
                isinstance(t, ast.Name) and t.id == "__all__"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
            for node in tree.body
        )
        if not private and not declared:
            missing.append(f"{name}: no __all__")
    assert missing == []
