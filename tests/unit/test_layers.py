"""The package's folders import one another without loops (issue 20: "no folder-level import
loop, counting imports inside functions"). None is left; should one ever have to be allowed
for a while, it is listed in KNOWN_LOOP_EDGES, which only shrinks: a new loop fails this
test, and so does one that is gone but still listed."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import legion

ROOT = Path(legion.__file__).parent

# Folder -> folder imports that close a loop today, each to be taken apart (issue 20).
KNOWN_LOOP_EDGES: set[tuple[str, str]] = set()


def _unit(module: str) -> str:
    """The folder (or top-level module) of `legion.<unit>...`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "legion"


def folder_imports() -> dict[str, dict[str, list[str]]]:
    """unit -> imported unit -> the files importing it (imports inside functions included)."""
    found: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        source = _unit(".".join(parts))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name.startswith("legion."):
                    target = _unit(name)
                    if target != source:
                        found[source][target].append(str(path.relative_to(ROOT)))
    return found


def loop_edges() -> set[tuple[str, str]]:
    """Folder -> folder edges that lie on a loop of folders."""
    imports = folder_imports()
    folders = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}

    def reaches(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in imports.get(todo.pop(), {}):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    return {(a, b) for a in folders for b in imports.get(a, {}) if b in folders and a in reaches(b)}


def test_no_new_folder_level_import_loop() -> None:
    edges = loop_edges()
    imports = folder_imports()
    new = {
        f"{a} -> {b} (in {', '.join(sorted(set(imports[a][b]))[:3])})"
        for a, b in edges - KNOWN_LOOP_EDGES
    }
    assert not new, "a folder-level import loop: " + "; ".join(sorted(new))
    gone = KNOWN_LOOP_EDGES - edges
    assert not gone, f"no longer a loop, take it off KNOWN_LOOP_EDGES: {sorted(gone)}"


def test_the_tui_imports_no_cli_module() -> None:
    assert "cli" not in folder_imports()["tui"]
