"""Only a runtime's own package (`legion/runtime/<name>/`) and the registry (`legion.plugins`)
know a runtime by name (issue 39): every other module asks the registry what a runtime
declares (its `ModelRoute`, its question tools, its children's variables, its install...), so
that adding a runtime is its package, its registry entry, the proxy's route table entry for
the API its CLI speaks, and the demo's scripted server for that API. A module outside those
that imports `legion.runtime.claude` or `legion.runtime.codex`, names `plugins.CLAUDE_CODE` or
`plugins.CODEX`, or holds the string "claude-code", "codex" or "claude" fails this test,
unless it is listed in ALLOWED with why (the list only shrinks: an entry no longer found
fails too)."""

from __future__ import annotations

import ast
from pathlib import Path

import legion

ROOT = Path(legion.__file__).parent

RUNTIME_PACKAGES = ("legion.runtime.claude", "legion.runtime.codex", "legion.runtime.gemini")
RUNTIME_CONSTANTS = frozenset({"CLAUDE_CODE", "CODEX", "GEMINI"})
RUNTIME_NAMES = frozenset({"claude-code", "codex", "claude", "gemini"})
# The registry: where each runtime is declared, by name.
REGISTRY = "plugins.py"

# (module, what it names): why. Each must still be found, or it is taken off.
ALLOWED: dict[tuple[str, str], str] = {
    ("runtime/hook_entry.py", "legion.runtime.claude.hook_entry"): (
        "the hook command's old path, which Claude Code sessions started before the hooks "
        "moved still run: a shim, not a decision"
    ),
    ("cli/doctor.py", "CODEX"): (
        "`legion doctor --install --codex`, older than `--runtime codex`, is used by "
        "scripts/test and the docs"
    ),
}


def _named(tree: ast.AST) -> list[tuple[str, int]]:
    """What in a module names a runtime: an import of a runtime's package, a runtime constant
    of the registry (imported, or read as `plugins.X`), a runtime's name as a string."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(RUNTIME_PACKAGES):
                    found.append((alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith(RUNTIME_PACKAGES):
                found.append((node.module, node.lineno))
                continue
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full.startswith(RUNTIME_PACKAGES):
                    found.append((full, node.lineno))  # from legion.runtime import claude
                elif node.module == "legion.plugins" and alias.name in RUNTIME_CONSTANTS:
                    found.append((alias.name, node.lineno))
        elif isinstance(node, ast.Attribute) and node.attr in RUNTIME_CONSTANTS:
            if isinstance(node.value, ast.Name) and node.value.id == "plugins":
                found.append((node.attr, node.lineno))
        elif isinstance(node, ast.Constant) and node.value in RUNTIME_NAMES:
            found.append((repr(node.value), node.lineno))
    return found


def outside_the_runtimes() -> dict[tuple[str, str], list[int]]:
    """(module, what) -> its lines, for every module outside the runtimes' own packages
    (`legion/runtime/<name>/`; what all runtimes share beside them is scanned) and the
    registry."""
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        own = ("runtime/claude/", "runtime/codex/", "runtime/gemini/")
        if module.startswith(own) or module == REGISTRY:
            continue
        for what, line in _named(ast.parse(path.read_text(encoding="utf-8"))):
            found.setdefault((module, what), []).append(line)
    return found


def test_no_module_outside_a_runtime_and_the_registry_names_a_runtime() -> None:
    found = outside_the_runtimes()
    new = [
        f"{module}:{','.join(map(str, sorted(lines)))}: {what}"
        for (module, what), lines in sorted(found.items())
        if (module, what) not in ALLOWED
    ]
    assert not new, "ask the registry what the runtime declares (`legion.plugins`): " + "; ".join(
        new
    )
    gone = sorted(set(ALLOWED) - set(found))
    assert not gone, f"no longer found, take it off ALLOWED: {gone}"


def test_the_scan_finds_what_it_looks_for() -> None:
    source = (
        "import legion.runtime.codex.provider\n"
        "from legion.runtime.claude.paths import X\n"
        "from legion.runtime import claude\n"
        "from legion.plugins import CODEX, load\n"
        "from legion import plugins\n"
        "if runtime == plugins.CLAUDE_CODE: pass\n"
        "table = {'codex': 1}\n"
        "from legion.runtime.tmux import Tmux\n"
        "said = 'claude code'\n"
    )
    assert sorted(_named(ast.parse(source))) == [
        ("'codex'", 7),
        ("CLAUDE_CODE", 6),
        ("CODEX", 4),
        ("legion.runtime.claude", 3),
        ("legion.runtime.claude.paths", 2),
        ("legion.runtime.codex.provider", 1),
    ]


def test_the_registry_declares_what_the_runtimes_own_modules_say() -> None:
    """The question tool the registry declares is the one Claude Code's transcript reader
    knows (the registry holds it as text, so that reading it imports nothing)."""
    from legion.plugins import CLAUDE_CODE, runtime_plugin
    from legion.runtime.claude.transcript import ASK_USER_QUESTION

    assert runtime_plugin(CLAUDE_CODE).question_tools == (ASK_USER_QUESTION,)
