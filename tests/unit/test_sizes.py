"""No module under src/legion/ over 600 lines, and no class over 400 (issue 39): past that, a
file or a class holds more than one responsibility, and is split by them. Those over the
bounds today are listed in OVERSIZED, each with its size now and why; the list only shrinks:
one that grows past its listed size fails this test, and so does one back within bounds that
is still listed (take it off)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import legion

ROOT = Path(legion.__file__).parent
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 400

# A module's path under src/legion/, or `path::Class`: (its lines now, at most; why it is not
# split yet). Lower a size when you shrink one; never raise it.
OVERSIZED: dict[str, tuple[int, str]] = {}


def _classes(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """Every class in `tree` (nested ones as `Outer.Inner`), with its lines, decorators
    included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            assert node.end_lineno is not None
            yield prefix + node.name, node.end_lineno - first + 1
            yield from _classes(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _classes(node, prefix)


def sizes(root: Path = ROOT) -> dict[str, tuple[int, int]]:
    """Every module's and class's lines under `root`, by key (`path`, `path::Class`), each with
    its bound."""
    found: dict[str, tuple[int, int]] = {}
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        found[name] = (len(text.splitlines()), MAX_MODULE_LINES)
        for cls, lines in _classes(ast.parse(text)):
            found[f"{name}::{cls}"] = (lines, MAX_CLASS_LINES)
    return found


def oversize_problems(
    found: dict[str, tuple[int, int]], allowed: dict[str, tuple[int, str]]
) -> list[str]:
    """What is wrong with the sizes `found` given the list `allowed`: each module or class over
    its bound and not listed, grown past its listed size, or listed but within bounds (or
    gone)."""
    problems = []
    for key, (lines, bound) in sorted(found.items()):
        listed = allowed.get(key)
        if lines <= bound:
            if listed is not None:
                problems.append(f"{key} is {lines} lines, within {bound}: take it off OVERSIZED")
        elif listed is None:
            kind = "class" if "::" in key else "module"
            problems.append(f"{key} is {lines} lines, over the {kind} bound of {bound}: split it")
        elif lines > listed[0]:
            problems.append(f"{key} grew to {lines} lines, over its listed {listed[0]}")
    problems += [f"{key} is listed but gone: take it off" for key in allowed.keys() - found.keys()]
    return problems


def test_no_module_or_class_over_its_bound_but_those_listed() -> None:
    problems = oversize_problems(sizes(), OVERSIZED)
    assert not problems, "; ".join(problems)


def test_each_way_a_size_goes_wrong_is_found() -> None:
    found = {
        "a.py": (601, 600),
        "b.py": (700, 600),
        "c.py": (650, 600),
        "d.py": (600, 600),
        "d.py::Big": (401, 400),
    }
    allowed = {"b.py": (650, "why"), "c.py": (650, "why"), "d.py": (610, "why"), "e.py": (1, "")}
    problems = oversize_problems(found, allowed)
    assert [p.split(" ", 1)[0] for p in problems] == ["a.py", "b.py", "d.py", "d.py::Big", "e.py"]
    assert "over the class bound" in problems[3] and "grew to 700" in problems[1]
