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
