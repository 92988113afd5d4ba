"""Every test the docs name as proof (`tests/…/test_x.py::test_name`, as in
docs/failure-model.md) exists: a renamed or moved test must take its references along."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = re.compile(r"(tests/[\w/]+\.py)::(\w+)")


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def test_every_test_the_docs_name_exists() -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = []
    found = 0
    for doc in docs:
        for match in REFERENCE.finditer(doc.read_text(encoding="utf-8")):
            found += 1
            path, name = ROOT / match.group(1), match.group(2)
            if not path.exists() or name not in _tests_in(path):
                missing.append(f"{doc.name}: {match.group(0)}")
    assert found > 100, f"only {found} references found: has the docs' format changed?"
    assert not missing, "the docs name tests that do not exist: " + "; ".join(missing)


SOURCE = ROOT / "src" / "legion"
MODULE_PATH = re.compile(r"`(?!tests/|src/)((?:[a-z_]+/)+(?:[a-z_]+\.py)?)`")


def _layout_paths(doc: str) -> list[str]:
    """The paths the layout's tree in docs/architecture.md names: each entry's first word, under
    the folders above it (by indentation, two spaces a level); `a.py, b.py` names two."""
    tree = doc.split("```\nsrc/legion/\n", 1)[1].split("```", 1)[0]
    folders: list[str] = []
    paths = []
    for line in tree.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        words = line.split()
        if not words or indent >= 19 or indent % 2:  # a description's continuation
            continue
        level = indent // 2 - 1
        del folders[level:]
        names = [w.rstrip(",") for w in words[:3] if w.rstrip(",").endswith((".py", "/"))]
        if not names:
            continue
        for name in names:
            paths.append("".join(folders) + name)
        if names[0].endswith("/"):
            folders.append(names[0])
    return paths


def test_every_module_docs_architecture_names_exists() -> None:
    """The layout and the domain model in docs/architecture.md name only what is there: a module
    moved or renamed must take the doc along."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = _layout_paths(doc)
    model = doc.split("## The domain model", 1)[1].split("\n## ", 1)[0]
    named += [m.group(1) for m in MODULE_PATH.finditer(model)]
    assert len(named) > 150, f"only {len(named)} paths found: has the layout's format changed?"
    missing = sorted({p for p in named if not (SOURCE / p).exists()})
    assert not missing, "docs/architecture.md names what is not in src/legion/: " + ", ".join(
        missing
    )
