"""The project's clone and its remote, as the forge uses them through git: pushing a branch
with the user's own git credentials (the API token is only ever an HTTP header), a branch's
last commit, and bringing a merged base home."""

from __future__ import annotations

from collections.abc import Callable

from legion.config import Project
from legion.core.text import MAX_TITLE_CHARS, clean_title
from legion.errors import ConflictError
from legion.git import fast_forward, last_line, rev_parse, run_git
from legion.workspaces import issue_repo


class RemoteBranches:
    """The project's branches and the configured remote (`remote`, the settings')."""

    def __init__(self, project: Project, warn: Callable[[str], None]) -> None:
        self.project = project
        # What went right but not all the way (the local base not updated).
        self.warn = warn

    def head(self, branch: str) -> str | None:
        """The local branch's commit, or None when there is no such branch; its worker's commits
        brought home first (`issue_repo.bring_home`)."""
        issue_repo.bring_home(self.project.root, branch)
        return rev_parse(self.project.root, f"refs/heads/{branch}")

    def contains(self, commit: str, ancestor: str) -> bool:
        """Whether `commit` has everything `ancestor` has (it is `ancestor` or after it)."""
        found = run_git(
            self.project.root, "merge-base", "--is-ancestor", ancestor, commit, check=False
        )
        return found.returncode == 0

    def push(self, branch: str) -> None:
        """Push the branch to the remote with the user's git credentials (never the token)."""
        remote = self.project.settings.remote
        issue_repo.bring_home(self.project.root, branch)
        refspec = f"refs/heads/{branch}:refs/heads/{branch}"
        result = run_git(self.project.root, "push", "--quiet", remote, refspec, check=False)
        if result.returncode != 0:
            raise ConflictError(
                f"cannot push {branch} to {remote}: {last_line(result.stderr or result.stdout)}; "
                f"if {remote} has commits the local branch lacks, merge them into it first"
            )

    def _fetch(self, branch: str) -> tuple[bool, str, str]:
        """Fetch the remote's `branch` to its remote-tracking ref: whether it was fetched, the
        ref, and what git said."""
        remote = self.project.settings.remote
        tracking = f"refs/remotes/{remote}/{branch}"
        fetched = run_git(
            self.project.root,
            "fetch",
            "--quiet",
            "--no-tags",
            remote,
            f"+refs/heads/{branch}:{tracking}",
            check=False,
        )
        return fetched.returncode == 0, tracking, fetched.stderr or fetched.stdout

    def fetch_branch(self, branch: str) -> str:
        """Fetch the remote's `branch` (to its remote-tracking ref) and return its commit."""
        remote = self.project.settings.remote
        ok, tracking, said = self._fetch(branch)
        commit = rev_parse(self.project.root, tracking) if ok else None
        if commit is None:
            raise ConflictError(
                f"cannot fetch {branch} from {remote}: {last_line(said)}; try again"
            )
        return commit

    def default_title(self, identifier: str, branch: str) -> str:
        """The branch's last commit subject, after the issue unless it names the issue."""
        subject = run_git(
            self.project.root, "log", "-1", "--format=%s", f"refs/heads/{branch}", "--", check=False
        ).stdout.strip()
        if not subject:
            return identifier
        if not subject.upper().startswith(identifier):
            subject = f"{identifier}: {subject}"
        return clean_title(subject[:MAX_TITLE_CHARS])

    def fetch_base(self, base: str) -> None:
        """Bring the merge home: fetch the base (new workspaces start from `<remote>/<base>`),
        then fast-forward the local base where that is safe. Where it is not (offline, local
        commits, a checkout with local changes) nothing is touched, and a warning says so."""
        remote = self.project.settings.remote
        ok, tracking, said = self._fetch(base)
        if not ok:
            self.warn(
                f"merged, but cannot fetch {base} from {remote} ({last_line(said)}): "
                f"local {base} not updated"
            )
            return
        merged = rev_parse(self.project.root, tracking)
        why = fast_forward(self.project.root, base, merged) if merged else "nothing fetched"
        if why is not None:
            self.warn(
                f"merged on {remote}, but local {base} was left as it is: {why}; "
                f"update it with `git merge --ff-only {remote}/{base}`"
            )
