"""The tests' own layout: helpers are imported from tests/support, never from a conftest (whose
fixtures pytest provides), and end-to-end tests live in tests/e2e (tests/conftest.py marks them
by folder, and refuses an `e2e` mark anywhere else)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_test_module_imports_a_conftest() -> None:
    offenders = {
        str(path.relative_to(TESTS)): sorted(m for m in modules if m.split(".")[-1] == "conftest")
        for path in TESTS.rglob("*.py")
        if (modules := _imported_modules(path))
    }
    assert {path: found for path, found in offenders.items() if found} == {}


def test_the_e2e_mark_is_only_set_in_tests_e2e() -> None:
    needle = "mark." + "e2e"  # not spelt out: this file would match itself
    marked = [
        str(path.relative_to(TESTS))
        for path in TESTS.rglob("test_*.py")
        if needle in path.read_text(encoding="utf-8") and not path.is_relative_to(TESTS / "e2e")
    ]
    assert marked == []
