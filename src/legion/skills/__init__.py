"""Legion's skills, packaged with Legion and installed where Claude Code (or Codex) finds them.

Each skill is a folder holding a `SKILL.md` (YAML front matter with `name` and `description`)
and the Markdown files it refers to. The files ship as package data, so they are read with
`importlib.resources` and work from a wheel as well as from a source checkout. Nothing is read
at import time.
"""

from __future__ import annotations

import os
import tempfile
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from legion.files.locking import exclusive_folder

__all__ = ["SKILL_NAMES", "install", "installed", "skill_files"]

SKILL_NAMES: tuple[str, ...] = ("legion-controller", "legion-oracle", "legion-worker")

_SUFFIX = ".md"
_FILE_MODE = 0o644


def skill_files() -> dict[str, str]:
    """Every skill file: its path relative to a skills folder (`legion-worker/SKILL.md`, with
    `/` separators) -> its text. Sorted by path."""
    root = resources.files(__name__)
    found: dict[str, str] = {}
    for name in SKILL_NAMES:
        _collect(root / name, name, found)
    return dict(sorted(found.items()))


def _collect(node: Traversable, relative: str, into: dict[str, str]) -> None:
    if node.is_dir():
        for child in node.iterdir():
            _collect(child, f"{relative}/{child.name}", into)
    elif node.is_file() and node.name.endswith(_SUFFIX):
        into[relative] = node.read_text(encoding="utf-8")


def install(target: Path) -> list[Path]:
    """Install every skill file under `target` (a Claude Code skills folder such as
    `~/.claude/skills` or `<repo>/.claude/skills`); returns the installed files' paths.

    Idempotent: a file that already has the current content is left untouched; any other is
    written to a temporary file beside it and renamed over it, so a reader never sees half a
    file. Files that an earlier Legion version installed and this one no longer ships are
    removed, only inside the folders of Legion's own skills; other skills in `target` are
    never touched.

    One process at a time (a lock on `target` itself): the daemon and a `legion` command may
    install into one home at once, and one's clean-up would remove the other's temporary file
    before it is renamed into place.
    """
    files = skill_files()
    written: list[Path] = []
    target.mkdir(parents=True, exist_ok=True)
    with exclusive_folder(target):
        for relative, text in files.items():
            path = target.joinpath(*relative.split("/"))
            data = text.encode("utf-8")
            if _read_bytes(path) != data:
                path.parent.mkdir(parents=True, exist_ok=True)
                _write_atomic(path, data)
            written.append(path)
        _remove_stale(target, {target.joinpath(*relative.split("/")) for relative in files})
    return written


def installed(target: Path) -> bool:
    """True when every skill file is present under `target` with the current content."""
    return all(
        _read_bytes(target.joinpath(*relative.split("/"))) == text.encode("utf-8")
        for relative, text in skill_files().items()
    )


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _write_atomic(path: Path, data: bytes) -> None:
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        temp.chmod(_FILE_MODE)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _remove_stale(target: Path, current: set[Path]) -> None:
    """Delete files not in `current` inside Legion's own skill folders, then the folders this
    leaves empty. A skill folder that is a symlink (a developer's checkout) is left alone."""
    for name in SKILL_NAMES:
        top = target / name
        if top.is_symlink() or not top.is_dir():
            continue
        for folder, dirs, names in os.walk(top, topdown=False):
            here = Path(folder)
            for file_name in names:
                path = here / file_name
                if path not in current:
                    path.unlink(missing_ok=True)
            for dir_name in dirs:
                sub = here / dir_name
                if sub.is_symlink():
                    sub.unlink(missing_ok=True)
                elif not any(sub.iterdir()):
                    sub.rmdir()
