"""Workspaces as jj (Jujutsu) workspaces, for repositories managed with jj.

Used only when configured with `workspace_vcs = "jj"` (in a colocated repository: `.jj` and
`.git`); `auto` picks git worktrees, also in a jj repository, until this adapter has run against
a real jj. Each issue gets `jj workspace add --name <issue> -r <base>`; removal is
`jj workspace forget` plus deleting the folder, under the same never-lose-work rule as git.

Not yet verified against a real jj binary: none can be installed on the machines this project
is built on (see docs/architecture.md). The commands follow jj's documented CLI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from legion.config.values import DEFAULT_REGENERABLE
from legion.core.ids import branch_for
from legion.core.model import normalize_identifier
from legion.errors import ConflictError, InputError, JjError, ToolMissingError
from legion.git import GitPlace
from legion.workspaces.base import (
    Workspace,
    WorkspaceCheck,
    claim_folder,
    ignored_detail,
    precious,
    removable,
)


def jj_only(folder: Path) -> Path | None:
    """The jj repository `folder` is in when git cannot see it (a `.jj` with no `.git` beside
    it, not colocated), else None."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return None
        if (candidate / ".jj").is_dir():
            return candidate
    return None


def refuse_jj_only(folder: Path) -> None:
    """Legion's workers, skills and forges work with git branches (`legion/<issue>`): a jj
    repository git cannot see is refused, in one line, with what to do."""
    root = jj_only(folder.resolve())
    if root is not None:
        raise InputError(
            f"{root} is a jj repository without git (no .git beside .jj): Legion works with "
            "git branches, so use a colocated jj repository (`jj git init --colocate`, or "
            "clone with `jj git clone --colocate`)"
        )


def workspace_name(issue: str) -> str:
    return normalize_identifier(issue).lower()


def untracked_files(folder: Path, tracked: set[str]) -> list[str]:
    """Files under `folder` (relative, `/`-separated) that are not in `tracked`; the VCS's own
    folders are skipped."""
    found = []
    for current, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in (".jj", ".git"))
        for name in sorted(files):
            relative = (Path(current) / name).relative_to(folder).as_posix()
            if relative not in tracked:
                found.append(relative)
    return found


class JjWorkspaces:
    kind = "jj"

    def __init__(
        self,
        repo: Path,
        root: Path,
        base: str,
        binary: str = "jj",
        regenerable: Sequence[str] = DEFAULT_REGENERABLE,
    ) -> None:
        self.repo = repo
        self.root = root
        self.base = base
        self.binary = binary
        self.regenerable = tuple(regenerable)

    def _jj(self, *args: str) -> str:
        try:
            proc = subprocess.run(
                [self.binary, "--no-pager", *args],
                cwd=self.repo,
                capture_output=True,
                text=True,
                check=False,
            )
        except FileNotFoundError:
            raise ToolMissingError("jj is not installed: install Jujutsu, or use git") from None
        if proc.returncode != 0:
            detail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"
            raise JjError(f"jj {args[0]} {args[1] if len(args) > 1 else ''}: {detail}")
        return proc.stdout

    def _names(self) -> set[str]:
        # `name: <change> <commit> <description>` per line
        return {
            line.split(":", 1)[0].strip()
            for line in self._jj("workspace", "list").splitlines()
            if ":" in line
        }

    def path_for(self, issue: str) -> Path:
        return self.root / workspace_name(issue)

    def get(self, issue: str) -> Workspace | None:
        name = workspace_name(issue)
        path = self.path_for(issue)
        if not path.is_dir() or name not in self._names():
            return None
        return Workspace(normalize_identifier(issue), path, branch_for(name), self.kind)

    def ensure(self, issue: str) -> Workspace:
        existing = self.get(issue)
        if existing is not None:
            return existing
        path = self.path_for(issue)
        claim_folder(path, f"a jj workspace of {self.repo}")
        name = workspace_name(issue)
        self._jj("workspace", "add", "--name", name, "-r", self.base, str(path))
        return Workspace(normalize_identifier(issue), path, branch_for(name), self.kind)

    def place_at(self, workspace: Path) -> GitPlace:
        raise ConflictError(f"{workspace} is a jj workspace: git is not run on it")

    def home_place(self, workspace: GitPlace) -> GitPlace:
        raise ConflictError(f"{workspace.work_tree} is a jj workspace: git is not run on it")

    def check(self, issue: str) -> WorkspaceCheck:
        if self.get(issue) is None:
            return WorkspaceCheck(exists=False)
        name = workspace_name(issue)
        changed = self._jj("diff", "--summary", "-r", f"{name}@").strip()
        # Non-empty commits of the workspace that neither the base nor any remote contains.
        unmerged = self._jj(
            "log", "--no-graph", "-T", 'commit_id ++ "\\n"',
            "-r", f"::{name}@ ~ ::{self.base} ~ ::remote_bookmarks() ~ empty()",
        ).strip()  # fmt: skip
        # jj snapshots every file it does not ignore (the diff above took the snapshot), so
        # the files of the folder that its working-copy commit lacks are the ignored ones.
        tracked = set(self._jj("file", "list", "-r", f"{name}@").splitlines())
        ignored = precious(untracked_files(self.path_for(issue), tracked), self.regenerable)
        details = []
        if changed:
            details.append(f"{len(changed.splitlines())} uncommitted change(s)")
        if unmerged:
            details.append(f"commits neither in {self.base} nor pushed")
        if ignored:
            details.append(ignored_detail(ignored))
        return WorkspaceCheck(
            True, bool(changed), bool(unmerged), "; ".join(details), ignored=ignored
        )

    def remove(self, issue: str) -> None:
        if not removable(self.check(issue), self.path_for(issue)):
            return
        self._jj("workspace", "forget", workspace_name(issue))
        shutil.rmtree(self.path_for(issue))

    def list(self) -> list[Workspace]:
        found = []
        for name in sorted(self._names()):
            try:
                issue = normalize_identifier(name)
            except InputError:
                continue  # `default` and workspaces Legion did not make
            if self.path_for(issue).is_dir():
                found.append(Workspace(issue, self.path_for(issue), branch_for(name), self.kind))
        return found
