"""Workspaces as git worktrees on branch `legion/<issue>`, each of its issue's own repository.

Each is made by `git worktree add` at `<workspace root>/<issue>`, in the issue's repository
(`legion.workspaces.issue_repo`: `<repository's git folder>/legion/issues/<issue>.git`), with
its admin folder at `<that repository>/worktrees/<issue>`: all are Legion's records, never read
back from the workspace. Before git runs on one (its status, its removal, a checkpoint, a
restore), its `.git` is checked to still point there (`place_of`); a tampered one is reported
and left.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from legion.config.values import DEFAULT_REGENERABLE
from legion.core.ids import BRANCH_PREFIX, branch_for
from legion.core.model import normalize_identifier
from legion.errors import ConflictError, GitError, InputError, TamperedWorkspaceError
from legion.git import GitPlace, checked_worktree, main_git_dir, rev_parse, run_git
from legion.sandbox import git_jail
from legion.workspaces import checkpoint, issue_repo
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

    def repo_for(self, issue: str) -> Path:
        """The issue's own repository (`legion.workspaces.issue_repo`)."""
        return issue_repo.repo_of(self.git_dir, issue)

    def _older(self, workspace: Path) -> bool:
        """Whether `workspace` is a worktree of the project's own repository (as an older Legion
        made them), not of its issue's."""
        return os.path.isdir(self.git_dir / "worktrees" / workspace.name) and (
            workspace.resolve() in self._registered()
        )

    def place_at(self, workspace: Path) -> GitPlace:
        """Where to run git on the workspace Legion made at `workspace`, once checked; a
        TamperedWorkspaceError saying what was found when its `.git` points elsewhere. A
        workspace an older Legion made in the project's own repository is checked there (until
        its next start moves it: `_move_in`)."""
        place = issue_repo.place_at(self.git_dir, workspace)
        if place is not None:
            return place
        older = self.git_dir / "worktrees" / workspace.name
        if self._older(workspace):
            return checked_worktree(self.git_dir, workspace, older)
        repo = self.repo_for(workspace.name)  # none: said as its missing git folder
        return checked_worktree(repo, workspace, repo / "worktrees" / workspace.name)

    def place_of(self, issue: str) -> GitPlace:
        """`place_at` the issue's workspace."""
        return self.place_at(self.path_for(issue))

    def home_place(self, workspace: GitPlace) -> GitPlace:
        """Where Legion writes what it makes of a checked workspace (a checkpoint): the
        project's own repository, with the workspace as the work tree, never the issue's
        repository a worker writes."""
        home = self.git_dir
        return GitPlace(git_dir=home, common_dir=home, work_tree=workspace.work_tree)

    def _base_refs(self) -> dict[str, str]:
        """The base branch as the project has it, for an issue's repository: `BASE`, and
        `REMOTE/BASE` as last fetched when there is a remote."""
        refs: dict[str, str] = {}
        local = rev_parse(self.repo, f"refs/heads/{self.base_branch}")
        if local is not None:
            refs[f"refs/heads/{self.base_branch}"] = local
        if self.remote is not None:
            tracking = f"refs/remotes/{self.remote}/{self.base_branch}"
            fetched = rev_parse(self.repo, tracking)
            if fetched is not None:
                refs[tracking] = fetched
        return refs

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
        """Worktree path -> branch, for the project's repository's own linked worktrees (an
        older Legion's workspaces, and any of the user's)."""
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
        repo = self.repo_for(issue)
        made = issue_repo.exists(repo) and os.path.isdir(repo / "worktrees" / path.name)
        if not made and not self._older(path):
            return None
        return Workspace(normalize_identifier(issue), path, branch_for(issue), self.kind)

    def ensure(self, issue: str) -> Workspace:
        path = self.path_for(issue)
        if path.is_dir() and self._older(path):
            self._move_in(issue, path)
        existing = self.get(issue)
        if existing is not None:
            # A session starts: the base as it is now, to merge or compare with.
            issue_repo.set_refs(self.repo_for(issue), self._base_refs())
            return existing
        claim_folder(path, f"a worktree of {self.repo}")
        branch = branch_for(issue)
        if issue_repo.exists(self.repo_for(issue)):
            # Its folder was deleted, its repository kept: the worker's branch comes home (a
            # checked fetch), and the repository is made anew, nothing of it read again.
            issue_repo.bring_home(self.repo, branch)
            issue_repo.delete(self.repo_for(issue))
        repo = issue_repo.create(self.git_dir, self.repo, issue)
        refs = self._base_refs()
        # The project's branch when it has one (pushed, restored, an earlier workspace's).
        start = rev_parse(self.repo, f"refs/heads/{branch}") or rev_parse(
            self.repo, self.start_point()
        )
        if start is None:
            raise GitError(f"{self.repo} has no commit on {self.start_point()} to start from")
        refs[f"refs/heads/{branch}"] = start
        issue_repo.set_refs(repo, refs)
        issue_repo.run_bare(repo, "worktree", "add", "--quiet", str(path), branch)
        self.place_at(path)  # as git made it, or said
        return Workspace(normalize_identifier(issue), path, branch, self.kind)

    def _move_in(self, issue: str, path: Path) -> None:
        """Make the workspace an older Legion made as a worktree of the project's repository a
        worktree of its issue's own (no worker of it runs: a session is about to start): the
        branch copied there, the admin folder moved, both links rewritten."""
        old = self.git_dir / "worktrees" / path.name
        checked_worktree(self.git_dir, path, old)  # a tampered one is left as it is
        repo = issue_repo.create(self.git_dir, self.repo, issue)
        admin = repo / "worktrees" / path.name
        if os.path.lexists(admin):
            raise ConflictError(f"{admin} is another worktree's: remove it and retry")
        refs = self._base_refs()
        branch = branch_for(issue)
        head = rev_parse(self.repo, f"refs/heads/{branch}")
        if head is not None:
            refs[f"refs/heads/{branch}"] = head
        issue_repo.set_refs(repo, refs)
        os.rename(old, admin)
        _replace(admin / "commondir", "../..\n")
        _replace(path / ".git", f"gitdir: {admin}\n")
        run_git(self.repo, "worktree", "prune")
        self.place_at(path)

    def check(self, issue: str) -> WorkspaceCheck:
        workspace = self.get(issue)
        if workspace is None:
            return WorkspaceCheck(exists=False)
        try:
            place = self.place_at(workspace.path)
        except TamperedWorkspaceError as exc:
            return WorkspaceCheck(True, detail=str(exc), tampered=True)
        # `--ignored`: ignored files too (`!!`), which removing the workspace would delete.
        # Confined, with nothing written (not even the index's refreshed stamps, through a link
        # the worker left there) and no submodule looked into (git would run what the
        # submodule's own config names).
        jail = git_jail(writable=[], readable=[workspace.path, self.git_dir])
        listing = run_git(
            place, "status", "--porcelain", "-z", "--ignored=matching",
            "--ignore-submodules=all", env={"GIT_OPTIONAL_LOCKS": "0"}, wrap=jail,
        ).stdout  # fmt: skip
        status, ignored_paths = parse_status(listing)
        ignored = precious(ignored_paths, self.regenerable)
        details = []
        try:
            # The worker's commits, into the project's repository, to be judged there.
            issue_repo.bring_home(self.repo, workspace.branch)
            unmerged = run_git(
                self.repo, "rev-list", "--max-count=1", workspace.branch,
                "--not", self.base_branch, "--remotes",
            ).stdout.strip()  # fmt: skip
            why_unmerged = (
                f"commits on {workspace.branch} neither merged into {self.base_branch} nor pushed"
            )
        except ConflictError as exc:
            unmerged, why_unmerged = "unknown", str(exc)  # kept: what it holds is not known
        if status:
            details.append(f"{len(status)} uncommitted change(s)")
        if unmerged:
            details.append(why_unmerged)
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
        # Deleted by Legion, not by git (which would read the worker's files once more, its
        # submodules' config too): through no link, the folder and its repository.
        shutil.rmtree(workspace.path)
        run_git(self.repo, "worktree", "prune")  # one an older Legion made in your repository
        # Safe delete: only succeeds when the branch is merged; a pushed branch stays.
        run_git(self.repo, "branch", "-d", workspace.branch, check=False)
        issue_repo.delete(self.repo_for(issue))  # its branch is home: nothing of it is lost
        # Nothing was left in it to keep: its checkpoint neither.
        checkpoint.forget(self.repo, issue)

    def list(self) -> list[Workspace]:
        root = self.root.resolve()
        paths = {p for p, branch in self._registered().items() if branch.startswith(BRANCH_PREFIX)}
        repos = self.git_dir.joinpath(*issue_repo.ISSUES)
        if repos.is_dir():
            paths |= {root / repo.name.removesuffix(".git") for repo in repos.glob("*.git")}
        found = []
        for path in sorted(paths):
            if path.parent != root:
                continue
            try:
                issue = normalize_identifier(path.name)
            except InputError:
                continue  # a folder someone else put there
            workspace = self.get(issue)
            if workspace is not None:
                found.append(workspace)
        return found


def _replace(path: Path, text: str) -> None:
    """Write `text` as the file at `path`, a new file renamed over the name (through no link:
    the workspace and its admin folder are a worker's)."""
    fresh = path.with_name(path.name + ".legion-new")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(fresh, path)
