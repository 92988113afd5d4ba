"""One workspace per issue, kept from plan to finish so every worker of the issue (and every
resumed session) works in the same folder."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import Protocol

from legion.errors import ConflictError
from legion.git import GitPlace


@dataclass(frozen=True, slots=True)
class Workspace:
    issue: str
    path: Path
    branch: str
    kind: str  # "git" (a worktree) or "jj" (a jj workspace)


def is_regenerable(path: str, patterns: Sequence[str]) -> bool:
    """Pure: whether an ignored path (a file, or a folder ending in /) is build output."""
    parts = PurePosixPath(path.rstrip("/")).parts
    return any(fnmatch(part, pattern) for part in parts for pattern in patterns)


def precious(ignored: Sequence[str], patterns: Sequence[str]) -> tuple[str, ...]:
    """Pure: the ignored paths that are not regenerable, i.e. exist nowhere else."""
    return tuple(path for path in ignored if not is_regenerable(path, patterns))


def ignored_detail(ignored: Sequence[str]) -> str:
    shown = ", ".join(ignored[:3]) + (", …" if len(ignored) > 3 else "")
    return f"{len(ignored)} ignored file(s) that exist nowhere else ({shown})"


@dataclass(frozen=True, slots=True)
class WorkspaceCheck:
    """What removing the workspace would lose."""

    exists: bool
    dirty: bool = False  # uncommitted or untracked files
    unmerged: bool = False  # commits neither in the base branch nor on any remote
    detail: str = ""
    # Ignored files (relative paths; folders end in /) that are not regenerable build output.
    ignored: tuple[str, ...] = ()
    # Its `.git` no longer points where Legion put it (`detail` says what was found): nothing
    # of it is read or removed.
    tampered: bool = False

    @property
    def safe_to_remove(self) -> bool:
        return (
            self.exists
            and not self.dirty
            and not self.unmerged
            and not self.ignored
            and not self.tampered
        )


def claim_folder(path: Path, what: str) -> None:
    """Make sure a new workspace can go at `path`: never into someone else's files."""
    if path.exists() and any(path.iterdir()):
        raise ConflictError(f"{path} exists but is not {what}: move it aside")
    path.parent.mkdir(parents=True, exist_ok=True)


def removable(check: WorkspaceCheck, path: Path) -> bool:
    """The never-lose-work rule every adapter applies before deleting: False when there is
    nothing to remove, ConflictError when removing would lose work, else True."""
    if not check.exists:
        return False
    if not check.safe_to_remove:
        raise ConflictError(f"kept workspace {path}: {check.detail}")
    return True


class Workspaces(Protocol):
    kind: str

    def path_for(self, issue: str) -> Path: ...

    def get(self, issue: str) -> Workspace | None: ...

    def ensure(self, issue: str) -> Workspace:
        """The issue's workspace: the one there is, else a new one. Called as each of its
        sessions starts (no worker of the issue runs): what Legion keeps current in it (the
        base branch) is set then."""
        ...

    def place_at(self, workspace: Path) -> GitPlace:
        """Where to run git on the workspace Legion made at `workspace`, its `.git` checked to
        still point where Legion put it (TamperedWorkspaceError, else); ConflictError for a
        workspace git does not keep (jj)."""
        ...

    def home_place(self, workspace: GitPlace) -> GitPlace:
        """Where Legion writes what it makes of the checked workspace `workspace` (a
        checkpoint): a repository no worker writes, the workspace as the work tree."""
        ...

    def check(self, issue: str) -> WorkspaceCheck: ...

    def remove(self, issue: str) -> None:
        """Delete the workspace; refuses (ConflictError) when that would lose work."""
        ...

    def list(self) -> list[Workspace]: ...
