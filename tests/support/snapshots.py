"""Screens compared as text against files (`tests/unit/test_tui_snapshots.py`). A missing file
is a failure, as a different one is: a snapshot written by the run that checks it would prove
nothing. Files are written only when asked for, with `UPDATE_TUI_SNAPSHOTS=1` in the
environment (after a deliberate change; review the files in the diff)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

UPDATE_VARIABLE = "UPDATE_TUI_SNAPSHOTS"


def updating() -> bool:
    """Whether this run writes the snapshot files rather than checks them."""
    return os.environ.get(UPDATE_VARIABLE) == "1"


def snapshot_problems(folder: Path, shown: Mapping[str, str], update: bool = False) -> list[str]:
    """How `shown` (text by file name) differs from the files in `folder`: one entry per file
    missing or different, with both texts; [] when they match. With `update`, the files are
    written instead (and nothing differs)."""
    if update:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in shown.items():
            (folder / name).write_text(text, encoding="utf-8")
        return []
    problems = []
    for name, text in shown.items():
        path = folder / name
        if not path.exists():
            problems.append(f"{name}: no snapshot file ({path}); got\n{text}")
            continue
        expected = path.read_text(encoding="utf-8")
        if expected != text:
            problems.append(f"{name}: expected\n{expected}\ngot\n{text}")
    if problems:
        problems.append(f"({UPDATE_VARIABLE}=1 writes them; review the files in the diff)")
    return problems
