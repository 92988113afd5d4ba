"""Only the CLI (`legion/cli/`) prints: every other module says what it has to say through its
logger (`legion.diagnostics.log`), so that the daemon's log has one format and one level, and
nothing is said past it (issue 39). A module outside the CLI that calls `print(` or names
`sys.stderr` fails this test, unless it is one of the few whose stream is a protocol, listed
in ALLOWED with why."""

from __future__ import annotations

import ast
from pathlib import Path

import legion

ROOT = Path(legion.__file__).parent

# (module, what it does): why. Each must still be found, or it is taken off.
ALLOWED: dict[tuple[str, str], str] = {
    ("runtime/claude/hook_entry.py", "sys.stderr"): (
        "a failed hook's one line: Claude Code reads a hook's stderr as its reason"
    ),
    ("relay/client.py", "sys.stderr"): (
        "a session's `legion` command telling its user it waits for the daemon: that "
        "command's own output (the stream is the caller's to give)"
    ),
    ("relay/client.py", "print("): "the same waiting line",
    ("demo/scripted.py", "print("): (
        "the stand-alone scripted model server's one line on stdout, which says where it listens"
    ),
    ("diagnostics/log.py", "sys.stderr"): "the log's own handler: it writes the log there",
}


def _said(tree: ast.AST) -> list[tuple[str, int]]:
    """What writes to the terminal in a module: `print(` calls and `sys.stderr` (or
    `sys.__stderr__`) named, with their lines."""
    streams = ("stderr", "__stderr__")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "print":
                found.append(("print(", node.lineno))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "sys" and node.attr in streams:
                found.append(("sys.stderr", node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module == "sys":
            found += [("sys.stderr", node.lineno) for a in node.names if a.name in streams]
    return found


def outside_the_cli() -> dict[tuple[str, str], list[int]]:
    """(module, what) -> its lines, for every module outside `legion/cli/`."""
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if module.startswith("cli/"):
            continue
        for what, line in _said(ast.parse(path.read_text(encoding="utf-8"))):
            found.setdefault((module, what), []).append(line)
    return found


def test_no_module_outside_the_cli_prints_or_writes_to_stderr() -> None:
    found = outside_the_cli()
    new = [
        f"{module}:{','.join(map(str, sorted(lines)))}: {what}"
        for (module, what), lines in sorted(found.items())
        if (module, what) not in ALLOWED
    ]
    assert not new, "log it instead (`logging.getLogger(__name__)`): " + "; ".join(new)
    gone = sorted(set(ALLOWED) - set(found))
    assert not gone, f"no longer found, take it off ALLOWED: {gone}"


def test_the_scan_finds_what_it_looks_for() -> None:
    source = (
        "import sys\nfrom sys import stderr\n"
        "print('x')\nsys.stderr.write('y')\nprint('z', file=sys.__stderr__)\n"
    )
    assert sorted(_said(ast.parse(source))) == [
        ("print(", 3),
        ("print(", 5),
        ("sys.stderr", 2),
        ("sys.stderr", 4),
        ("sys.stderr", 5),
    ]
