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


# The layers, lowest first: a unit imports only from its own layer or a lower one (issue 20:
# "no import from a lower layer to a higher one"). A new folder or top-level module must be
# placed here, so where it sits is a decision, not an accident.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("errors", frozenset({"errors"})),  # the one error tree: every layer raises from it
    ("pure policy", frozenset({"core"})),
    (
        "foundations",
        frozenset(
            {
                "diagnostics",
                "files",
                "trust",
                "git",
                "config",
                "store",
                "graphql_client",
                "daemon_link",
                "plugins",
                "setting_spec",
                "sandbox",
            }
        ),
    ),
    (
        "adapters and stores",
        frozenset(
            {"trackers", "forges", "github", "workspaces", "bus", "relay", "runtime", "fleet"}
        ),
    ),
    (
        "services",
        frozenset({"backends", "sessions", "reconcile", "proxy", "services"}),
    ),
    ("shells", frozenset({"daemon", "tui", "web", "demo", "skills", "cli", "__main__"})),
)


def _layer_of() -> dict[str, int]:
    return {unit: rank for rank, (_, units) in enumerate(LAYERS) for unit in units}


def test_every_unit_has_a_layer() -> None:
    units = {
        p.stem if p.is_file() else p.name
        for p in ROOT.iterdir()
        if (p.is_file() and p.suffix == ".py" and p.stem != "__init__")
        or (p.is_dir() and (p / "__init__.py").exists())
    }
    placed = _layer_of()
    assert not units - placed.keys(), f"place these in LAYERS: {sorted(units - placed.keys())}"
    assert not placed.keys() - units, f"gone, take out of LAYERS: {sorted(placed.keys() - units)}"


def test_no_import_from_a_lower_layer_to_a_higher_one() -> None:
    rank = _layer_of()
    upward = [
        f"{source} ({LAYERS[rank[source]][0]}) -> {target} ({LAYERS[rank[target]][0]}) "
        f"in {', '.join(sorted(set(files))[:3])}"
        for source, targets in folder_imports().items()
        for target, files in targets.items()
        if source in rank and target in rank and rank[target] > rank[source]
    ]
    assert not upward, "imports up the layers: " + "; ".join(sorted(upward))
