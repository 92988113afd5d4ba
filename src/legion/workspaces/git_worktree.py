"""Workspaces as git worktrees on branch `legion/<issue>`.

Each is made by `git worktree add` at `<workspace root>/<issue>`, with its admin folder at
`<repository's git folder>/worktrees/<issue>`: both are Legion's records, never read back from
the workspace. Before git runs on one (its status, its removal, a checkpoint, a restore), its
`.git` is checked to still point there (`place_of`); a tampered one is reported and left.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from legion.config import DEFAULT_REGENERABLE
from legion.core.ids import BRANCH_PREFIX, branch_for
from legion.core.model import normalize_identifier
from legion.errors import ConflictError, GitError, InputError, TamperedWorkspaceError
from legion.git import GitPlace, checked_worktree, main_git_dir, rev_parse, run_git
from legion.workspaces import checkpoint
from legion.workspaces.base import (
    Workspace,
    WorkspaceCheck,
    claim_folder,
    ignored_detail,
    precious,
    removable,
)


def parse_status(listing: str) -> tuple[list[str], list[str]]:
    """Pure: `git status --porcelain -z --ignored` as (changed paths, ignored paths). A rename
    or copy is followed by its source path as an entry of its own."""
    changed: list[str] = []
    ignored: list[str] = []
    entries = iter(listing.split("\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if code == "!!":
            ignored.append(path)
            continue
        changed.append(path)
        if code[0] in "RC":
            next(entries, None)
    return changed, ignored


class GitWorktrees:
    kind = "git"

    def __init__(
        self,
        repo: Path,
        root: Path,
        base_branch: str,
        regenerable: Sequence[str] = DEFAULT_REGENERABLE,
        *,
        remote: str | None = None,
    ) -> None:
        self.repo = repo
        self.root = root
        self.base_branch = base_branch
        self.regenerable = tuple(regenerable)
        # With a hosted forge the base that counts is the remote's (its pull requests merge
        # there): new branches start from `<remote>/<base>` as last fetched, when there is one.
        self.remote = remote
        self._git_dir: Path | None = None

    @property
    def git_dir(self) -> Path:
        """The repository's own git folder (the user's checkout's), where every workspace's
        admin folder is: found from the checkout, once."""
        if self._git_dir is None:
            found = main_git_dir(self.repo)
            if found is None:
                raise GitError(f"{self.repo} is not in a git repository")
            self._git_dir = found
        return self._git_dir

    def admin_for(self, workspace: Path) -> Path:
        """The admin folder `git worktree add` made for the workspace at `workspace` (named by
        its folder: `ensure` makes sure git chose no other)."""
        return self.git_dir / "worktrees" / workspace.name

    def place_at(self, workspace: Path) -> GitPlace:
        """Where to run git on the workspace Legion made at `workspace`, once checked; a
        TamperedWorkspaceError saying what was found when its `.git` points elsewhere."""
        return checked_worktree(self.git_dir, workspace, self.admin_for(workspace))

    def place_of(self, issue: str) -> GitPlace:
        """`place_at` the issue's workspace."""
        return self.place_at(self.path_for(issue))

    def start_point(self) -> str:
        """Where a new issue branch starts."""
        if self.remote is not None:
            tracking = f"refs/remotes/{self.remote}/{self.base_branch}"
            if rev_parse(self.repo, tracking) is not None:
                return tracking
        return self.base_branch

    def path_for(self, issue: str) -> Path:
        return self.root / normalize_identifier(issue).lower()

    def _registered(self) -> dict[Path, str]:
        """Worktree path -> branch, for this repository's linked worktrees."""
        listing = run_git(self.repo, "worktree", "list", "--porcelain").stdout
        result: dict[Path, str] = {}
        path: Path | None = None
        for line in listing.splitlines():
            if line.startswith("worktree "):
                path = Path(line.removeprefix("worktree "))
            elif line.startswith("branch refs/heads/") and path is not None:
                result[path.resolve()] = line.removeprefix("branch refs/heads/")
        return result

    def get(self, issue: str) -> Workspace | None:
        path = self.path_for(issue)
        if not path.is_dir():
            return None
        branch = self._registered().get(path.resolve())
        if branch is None:
            return None
        return Workspace(normalize_identifier(issue), path, branch, self.kind)

    def ensure(self, issue: str) -> Workspace:
        existing = self.get(issue)
        if existing is not None:
            return existing
        path = self.path_for(issue)
        claim_folder(path, f"a worktree of {self.repo}")
        run_git(self.repo, "worktree", "prune")  # forget worktrees whose folders were deleted
        admin = self.admin_for(path)
        if os.path.lexists(admin):
            # git would name the new one otherwise, and Legion would take it for tampered.
            raise ConflictError(
                f"{admin} is another worktree's: remove it (`git worktree remove`) and retry"
            )
        branch = branch_for(issue)
        if rev_parse(self.repo, f"refs/heads/{branch}") is not None:
            run_git(self.repo, "worktree", "add", "--quiet", str(path), branch)
        else:
            run_git(
                self.repo, "worktree", "add", "--quiet", "--no-track",
                "-b", branch, str(path), self.start_point(),
            )  # fmt: skip
        self.place_at(path)  # as git made it, or said
        return Workspace(normalize_identifier(issue), path, branch, self.kind)

    def check(self, issue: str) -> WorkspaceCheck:
        workspace = self.get(issue)
        if workspace is None:
            return WorkspaceCheck(exists=False)
        try:
            place = self.place_at(workspace.path)
        except TamperedWorkspaceError as exc:
            return WorkspaceCheck(True, detail=str(exc), tampered=True)
        # `--ignored`: ignored files too (`!!`), which `git worktree remove` would delete.
        listing = run_git(place, "status", "--porcelain", "-z", "--ignored=matching").stdout
        status, ignored_paths = parse_status(listing)
        ignored = precious(ignored_paths, self.regenerable)
        unmerged = run_git(
            self.repo, "rev-list", "--max-count=1", workspace.branch,
            "--not", self.base_branch, "--remotes",
        ).stdout.strip()  # fmt: skip
        details = []
        if status:
            details.append(f"{len(status)} uncommitted change(s)")
        if unmerged:
            details.append(
                f"commits on {workspace.branch} neither merged into {self.base_branch} nor pushed"
            )
        if ignored:
            details.append(ignored_detail(ignored))
        return WorkspaceCheck(
            True, bool(status), bool(unmerged), "; ".join(details), ignored=ignored
        )

    def remove(self, issue: str) -> None:
        if not removable(self.check(issue), self.path_for(issue)):
            return
        workspace = self.get(issue)
        assert workspace is not None
        run_git(self.repo, "worktree", "remove", str(workspace.path))
        # Safe delete: only succeeds when the branch is merged; a pushed branch stays.
        run_git(self.repo, "branch", "-d", workspace.branch, check=False)
        # Nothing was left in it to keep: its checkpoint neither.
        checkpoint.forget(self.repo, issue)

    def list(self) -> list[Workspace]:
        found = []
        root = self.root.resolve()
        for path, branch in sorted(self._registered().items()):
            if path.parent != root or not branch.startswith(BRANCH_PREFIX):
                continue
            try:
                issue = normalize_identifier(path.name)
            except InputError:
                continue  # a folder someone else put there
            found.append(Workspace(issue, path, branch, self.kind))
        return found
