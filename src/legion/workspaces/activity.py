"""When a workspace last moved: its newest commit, or the newest change to a file in it (what
is regenerable, a build's output or a cache, not counted: a loop that reruns the tests is not
progress). Read only when a session has spent past `idle_spend_limit` (`legion.daemon.idle_step`),
so a walk of the folder is affordable."""

from __future__ import annotations

import os
from collections.abc import Sequence
from fnmatch import fnmatch
from pathlib import Path

from legion.git import GitPlace, run_git

_READ_TIMEOUT_S = 30.0
# Folders never looked into: the version control's own.
_SKIPPED = frozenset({".git", ".jj"})


def last_change(
    workspace: Path, regenerable: Sequence[str], place: GitPlace | None = None
) -> float | None:
    """Seconds since the epoch of the workspace's newest commit (read at `place`, its git
    folders as Legion made them; none without one) or file change; None when there is no
    workspace to read."""
    if not workspace.is_dir():
        return None
    newest = 0.0
    if place is not None:
        # Bounded: a pipe the worker planted in its repository would hold git for ever.
        committed = run_git(
            place, "log", "-1", "--format=%ct", "HEAD", check=False, timeout=_READ_TIMEOUT_S
        )
        if committed.returncode == 0 and committed.stdout.strip().isdigit():
            newest = float(committed.stdout.strip())
    for root, folders, files in os.walk(workspace):
        folders[:] = [
            name
            for name in folders
            if name not in _SKIPPED and not any(fnmatch(name, p) for p in regenerable)
        ]
        for name in files:
            if any(fnmatch(name, pattern) for pattern in regenerable):
                continue
            try:
                newest = max(newest, os.lstat(os.path.join(root, name)).st_mtime)
            except OSError:
                continue  # gone meanwhile
    return newest
