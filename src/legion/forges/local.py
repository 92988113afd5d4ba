"""The embedded forge: a pull request is a branch of the local repository plus a database record.

Merging is a real git merge into the base branch. It is computed with `git merge-tree` first, so
a conflict is reported without touching any working tree, and the base branch only moves by a
fast-forward (in the worktree that has it checked out) or a compare-and-swap `update-ref`: a
user's uncommitted work is never overwritten.

In a fleet (a PostgreSQL store), the hosts' clones share the records but not their branches:
the base branch's truth is the shared remote (`shared_remote`, the `remote` setting). A merge
starts from the remote's base (this clone's is brought up to it first), pushes the merge
there before it moves the base here, and so a host that leads after another sees every merge
that one made. A push the remote refuses (its base moved meanwhile) merges nothing.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Mapping
from pathlib import Path

from legion.config import Project
from legion.core.model import normalize_identifier
from legion.core.text import clean_body, clean_branch, clean_title
from legion.diagnostics.faults import fault_point
from legion.errors import (
    ConflictError,
    GitError,
    InputError,
    NotFoundError,
    TamperedWorkspaceError,
)
from legion.files.locking import exclusive
from legion.forges.base import PrChecks, PrState, PullRequest, Review
from legion.forges.local_checks import LocalChecks, checks_of, with_checks
from legion.forges.reviewed import reviewed_refusal
from legion.git import (
    current_branch,
    is_ancestor,
    last_line,
    rev_parse,
    run_git,
    worktree_for_branch,
    worktree_place,
)
from legion.store import Connection, Row, Store, in_fleet, now
from legion.workspaces import issue_repo

REVIEW_OUTCOMES = ("approved", "changes_requested", "commented")
_PR_NUMBER = re.compile(r"^#?([1-9][0-9]{0,8})$")


class LocalForge:
    def __init__(
        self,
        db: Store,
        repo: Path,
        *,
        merge_lock: Path,
        base_branch: str | None = None,
        shared_remote: str | None = None,
        checks: LocalChecks | None = None,
    ) -> None:
        self._db = db
        self.checks = checks  # its CI (`legion.forges.local_checks`); None: it runs none
        self.repo = repo
        self._merge_lock = merge_lock  # a file in the state folder: merges run on this machine
        self._base_branch = base_branch
        self.shared_remote = shared_remote  # in a fleet: the remote every host's merges go to

    @property
    def base_branch(self) -> str:
        branch = self._base_branch or current_branch(self.repo)
        if branch is None:
            raise InputError(
                f"{self.repo} has no branch checked out: set `base_branch` in .legion/config.toml"
            )
        return branch

    # -- reading -------------------------------------------------------------------------------

    def get_pr(self, ref: str) -> PullRequest:
        with self._db.read() as conn:
            pr = self._load(conn, self._row_id(conn, ref))
        return with_checks(self.checks, self.repo, [pr])[0]

    def list_prs(self) -> list[PullRequest]:
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT p.*, i.identifier FROM pull_requests p JOIN issues i ON i.id = p.issue_id "
                "ORDER BY p.number"
            ).fetchall()
            reviews = _reviews_by_pr(conn, None)
        return with_checks(self.checks, self.repo, [_pull_request(row, reviews) for row in rows])

    def prs_by_issue(
        self, issues: Collection[str], links: Mapping[str, Collection[str]] | None = None
    ) -> dict[str, PullRequest]:
        # Every PR here records its issue, so the tracker's links add nothing.
        wanted = set(issues)
        current: dict[str, PullRequest] = {}
        for pr in self.list_prs():
            if pr.issue not in wanted:
                continue
            previous = current.get(pr.issue)
            # An open PR wins over older closed or merged ones; among equals, the newest.
            if previous is None or pr.state is PrState.OPEN or previous.state is not PrState.OPEN:
                current[pr.issue] = pr
        return current

    def pr_checks(self, ref: str, *, log: str | None = None) -> PrChecks:
        pr = self.get_pr(ref)
        head = rev_parse(self.repo, f"refs/heads/{pr.branch}") or ""
        return checks_of(self.checks, pr, head, log)

    # -- writing -------------------------------------------------------------------------------

    def create_pr(
        self,
        issue: str,
        branch: str,
        *,
        title: str | None = None,
        body: str = "",
        draft: bool = False,
    ) -> PullRequest:
        identifier = normalize_identifier(issue)
        branch = clean_branch(branch)
        body = clean_body(body)
        base = self.base_branch
        if branch == base:
            raise InputError(f"the PR branch must differ from the base branch {base!r}")
        issue_repo.bring_home(self.repo, branch)  # the worker's commits, checked, first
        head = rev_parse(self.repo, f"refs/heads/{branch}")
        if head is None:
            raise NotFoundError(f"no branch {branch!r} in {self.repo} (commit and create it first)")
        remote = self._remote()
        if remote is not None:
            # In a fleet, what a pull request holds is on the shared remote, not only on this
            # host (a refusal is said by the next checkpoint, which sends it again).
            from legion.workspaces.checkpoint import send_branch  # a fleet's only

            send_branch(self.repo, remote, branch)
        with self._db.write() as conn:
            issue_row = conn.execute(
                "SELECT id, title FROM issues WHERE identifier = ?", (identifier,)
            ).fetchone()
            if issue_row is None:
                raise NotFoundError(f"no issue {identifier} (see `legion issue list`)")
            open_pr = conn.execute(
                "SELECT number FROM pull_requests WHERE issue_id = ? AND state = 'open'",
                (issue_row["id"],),
            ).fetchone()
            if open_pr is not None:
                raise ConflictError(f"{identifier} already has open PR #{open_pr[0]}")
            pr_title = clean_title(title) if title else f"{identifier}: {issue_row['title']}"
            number = conn.execute(
                "SELECT COALESCE(MAX(number), 0) + 1 FROM pull_requests"
            ).fetchone()[0]
            stamp = now()
            values = (number, issue_row["id"], pr_title, body, branch, base, int(draft), stamp)
            pr_id = conn.execute(
                "INSERT INTO pull_requests (number, issue_id, title, body, branch, base, state, "
                "is_draft, created_at, updated_at, head) "
                "VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?, ?, ?) RETURNING id",
                (*values, stamp, head),
            ).fetchone()[0]
            return self._load(conn, int(pr_id))

    def set_draft(self, ref: str, draft: bool) -> PullRequest:
        with self._db.write() as conn:
            row_id = self._row_id(conn, ref)
            self._require_open(conn, row_id)
            conn.execute(
                "UPDATE pull_requests SET is_draft = ?, updated_at = ? "
                "WHERE id = ? AND is_draft != ?",
                (int(draft), now(), row_id, int(draft)),
            )
            return self._load(conn, row_id)

    def add_review(self, ref: str, outcome: str, *, body: str, author: str) -> PullRequest:
        if outcome not in REVIEW_OUTCOMES:
            raise InputError(
                f"unknown review outcome {outcome!r} (known: {', '.join(REVIEW_OUTCOMES)})"
            )
        body = clean_body(body, "the review")
        if outcome != "approved" and not body.strip():
            raise InputError("a review that requests changes or comments needs --body")
        with self._db.write() as conn:
            row_id = self._row_id(conn, ref)
            self._require_open(conn, row_id)
            stamp = now()
            conn.execute(
                "INSERT INTO reviews (pr_id, outcome, author, body, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (row_id, outcome, author.strip() or "unknown", body, stamp),
            )
            conn.execute("UPDATE pull_requests SET updated_at = ? WHERE id = ?", (stamp, row_id))
            return self._load(conn, row_id)

    def branch_head(self, ref: str) -> str | None:
        pr = self.get_pr(ref)
        head = self._branch_head(pr.branch, self._remote())
        if head is not None and pr.state is PrState.OPEN:
            self._keep_head(pr, head)
        return head

    def _keep_head(self, pr: PullRequest, head: str) -> None:
        """Record `head` as the newest head of the open PR's branch seen, unless the branch
        went back: a ConflictError when it no longer holds a commit it had (reset to an older
        one, or its commits lost with the host they were made on, so this repository lacks
        its last head). A rewritten branch (a rebase, an amend) is a new head, not a loss."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT head FROM pull_requests WHERE number = ?", (pr.number,)
            ).fetchone()
        seen = row["head"] if row is not None else None
        if seen == head:
            return
        if seen:
            known = rev_parse(self.repo, seen) is not None
            if not known or is_ancestor(self.repo, head, seen):
                how = (
                    "went back to an older commit"
                    if known
                    else "is not in this repository: the work was lost with its host"
                )
                raise ConflictError(
                    f"PR #{pr.number}: its branch {pr.branch} no longer holds {seen[:12]}, "
                    f"its head when last seen ({seen[:12]} {how}); nothing of it is merged or "
                    "approved. Bring that work back to the branch (or add a commit that "
                    "replaces it), or close the PR"
                )
        with self._db.write() as conn:
            conn.execute(
                "UPDATE pull_requests SET head = ? WHERE number = ? AND state = 'open'",
                (head, pr.number),
            )

    def merge(self, ref: str, *, reviewed: str | None = None) -> PullRequest:
        pr = self.get_pr(ref)
        if pr.state is PrState.MERGED:
            return pr  # idempotent: merging a merged PR is done already
        if pr.state is not PrState.OPEN:
            raise ConflictError(f"PR #{pr.number} is {pr.state.value}")
        if pr.is_draft:
            raise ConflictError(
                f"PR #{pr.number} is a draft: mark it ready with `legion pr ready {pr.number}`"
            )
        # One merge at a time: two finishers merging at once would both start from the same
        # base, and the second would fail to move it.
        with exclusive(self._merge_lock):
            current = self.get_pr(ref)
            remote = self._remote()
            if remote is not None:
                self._catch_up(current.base, remote)
            merge_commit = self._git_merge(current, remote, reviewed)
        fault_point("merge_after_git")
        with self._db.write() as conn:
            row_id = self._row_id(conn, str(pr.number))
            conn.execute(
                "UPDATE pull_requests SET state = 'merged', merge_commit = ?, updated_at = ? "
                "WHERE id = ? AND state = 'open'",
                (merge_commit, now(), row_id),
            )
            merged = self._load(conn, row_id)
        fault_point("merge_recorded")
        return merged

    # -- git -----------------------------------------------------------------------------------

    def _remote(self) -> str | None:
        """The shared remote merges go through: in a fleet, when this clone has it (a fleet set
        up without one merges in each leader's clone, as on one machine)."""
        if self.shared_remote is None:
            return None
        known = run_git(self.repo, "remote", "get-url", self.shared_remote, check=False)
        return self.shared_remote if known.returncode == 0 else None

    def _catch_up(self, base: str, remote: str) -> None:
        """Bring this clone's `base` up to the shared remote's (merges other hosts made), by a
        fast-forward only; a base that went its own way here is a conflict to resolve by hand."""
        fetched = run_git(self.repo, "fetch", "--quiet", remote, f"refs/heads/{base}", check=False)
        if fetched.returncode != 0:
            raise GitError(
                f"cannot fetch {base} from the shared remote {remote!r}: "
                f"{last_line(fetched.stderr) or 'git refused'}"
            )
        theirs = rev_parse(self.repo, "FETCH_HEAD")
        ours = rev_parse(self.repo, f"refs/heads/{base}")
        if theirs is None or theirs == ours:
            return
        if ours is not None and is_ancestor(self.repo, theirs, ours):
            return  # this clone is ahead (its own commits): the push says whether that holds
        if ours is not None and not is_ancestor(self.repo, ours, theirs):
            raise ConflictError(
                f"{base} here and on {remote!r} went different ways; "
                f"bring {base} here up to the remote's, then try the merge again"
            )
        self._move_base(base, theirs, ours, f"legion: {base} from {remote}")

    def _branch_head(self, branch: str, remote: str | None) -> str | None:
        """A PR branch's head: this clone's; in a fleet, the shared remote's where this clone
        has none or an older one (its worker ran on another host, and pushed it there). The
        worker's commits here are brought home (`issue_repo.bring_home`) first."""
        issue_repo.bring_home(self.repo, branch)
        ours = rev_parse(self.repo, f"refs/heads/{branch}")
        if remote is None:
            return ours
        fetched = run_git(
            self.repo, "fetch", "--quiet", remote, f"refs/heads/{branch}", check=False
        )
        theirs = rev_parse(self.repo, "FETCH_HEAD") if fetched.returncode == 0 else None
        if theirs is None or theirs == ours:
            return ours
        if ours is None or is_ancestor(self.repo, ours, theirs):
            return theirs
        return ours

    def _move_base(self, base: str, to: str, was: str | None, why: str) -> None:
        """Move `base` here from `was` to `to` (a fast-forward where it is checked out, else a
        compare-and-swap of the ref)."""
        checked_out = worktree_for_branch(self.repo, base)
        if checked_out is not None:
            # Its git folders named, never found there (a worker may have checked the base out
            # in its workspace, and pointed its `.git` elsewhere): a tampered one is refused.
            try:
                place = worktree_place(self.repo, checked_out)
            except TamperedWorkspaceError as exc:
                raise ConflictError(f"cannot update {base}: {exc}") from None
            # Fast-forward the checked-out base: git refuses rather than overwrite local changes.
            forward = run_git(place, "merge", "--ff-only", "--quiet", to, check=False)
            if forward.returncode != 0:
                raise ConflictError(
                    f"cannot update {base} in {checked_out}: "
                    f"{last_line(forward.stderr) if forward.stderr.strip() else 'git refused'}"
                    "; commit or stash your local changes and try again"
                )
            return
        run_git(self.repo, "update-ref", "-m", why, f"refs/heads/{base}", to, was or "")

    def _git_merge(self, pr: PullRequest, remote: str | None, reviewed: str | None) -> str:
        base_sha = rev_parse(self.repo, f"refs/heads/{pr.base}")
        head_sha = self._branch_head(pr.branch, remote)
        # The PR exists but the repository no longer matches it: a conflict, not bad input.
        if base_sha is None:
            raise ConflictError(f"PR #{pr.number}: base branch {pr.base!r} does not exist")
        if head_sha is None:
            raise ConflictError(f"PR #{pr.number}: branch {pr.branch!r} does not exist any more")
        self._keep_head(pr, head_sha)
        if is_ancestor(self.repo, head_sha, base_sha):
            return base_sha  # everything on the branch is in the base already
        trial = run_git(
            self.repo,
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            base_sha,
            head_sha,
            check=False,
        )
        if trial.returncode == 1:
            files = [line for line in trial.stdout.splitlines()[1:] if line.strip()]
            raise ConflictError(
                f"PR #{pr.number} cannot be merged: "
                f"conflicts in {', '.join(files) or 'some files'}; "
                f"merge {pr.base} into {pr.branch}, resolve them, and try again"
            )
        if trial.returncode != 0:
            raise GitError(f"git merge-tree failed: {trial.stderr.strip() or trial.stdout.strip()}")
        tree = trial.stdout.splitlines()[0].strip()
        if reviewed is not None:
            # What lands is checked against what the review saw, and the merge commit below
            # is made of exactly this base and head.
            refusal = reviewed_refusal(self.repo, pr.number, reviewed, base_sha, tree)
            if refusal is not None:
                raise ConflictError(refusal)
        message = merge_message(pr)
        commit = run_git(
            self.repo,
            "commit-tree",
            tree,
            "-p",
            base_sha,
            "-p",
            head_sha,
            "-F",
            "-",
            check=False,
            input_text=message,
        )
        if commit.returncode != 0:
            if "identity" in commit.stderr or "tell me who you are" in commit.stderr.lower():
                raise GitError(
                    "git needs your identity to commit the merge: "
                    'run git config user.name "Your Name" and git config user.email you@example.com'
                )
            raise GitError(f"git commit-tree failed: {commit.stderr.strip()}")
        merge_sha = commit.stdout.strip()
        if remote is not None:
            # The remote first: a host that leads next starts from it.
            target = f"{merge_sha}:refs/heads/{pr.base}"
            pushed = run_git(self.repo, "push", "--quiet", remote, target, check=False)
            if pushed.returncode != 0:
                raise ConflictError(
                    f"PR #{pr.number}: the shared remote {remote!r} refused the "
                    f"merge ({last_line(pushed.stderr) or 'git refused'}); try again"
                )
        try:
            self._move_base(pr.base, merge_sha, base_sha, f"legion: merge PR #{pr.number}")
        except ConflictError as exc:
            raise ConflictError(f"PR #{pr.number}: {exc}") from None
        return merge_sha

    # -- helpers -------------------------------------------------------------------------------

    def _row_id(self, conn: Connection, ref: str) -> int:
        match = _PR_NUMBER.fullmatch(ref.strip())
        if match is not None:
            row = conn.execute(
                "SELECT id FROM pull_requests WHERE number = ?", (int(match.group(1)),)
            ).fetchone()
            if row is None:
                raise NotFoundError(f"no pull request #{match.group(1)}")
            return int(row[0])
        identifier = normalize_identifier(ref)
        row = conn.execute(
            "SELECT p.id FROM pull_requests p JOIN issues i ON i.id = p.issue_id "
            "WHERE i.identifier = ? ORDER BY p.state = 'open' DESC, p.id DESC LIMIT 1",
            (identifier,),
        ).fetchone()
        if row is None:
            raise NotFoundError(f"{identifier} has no pull request")
        return int(row[0])

    def _require_open(self, conn: Connection, row_id: int) -> None:
        row = conn.execute(
            "SELECT number, state FROM pull_requests WHERE id = ?", (row_id,)
        ).fetchone()
        if row["state"] != "open":
            raise ConflictError(f"PR #{row['number']} is {row['state']}")

    def _load(self, conn: Connection, row_id: int) -> PullRequest:
        row = conn.execute(
            "SELECT p.*, i.identifier FROM pull_requests p JOIN issues i ON i.id = p.issue_id "
            "WHERE p.id = ?",
            (row_id,),
        ).fetchone()
        return _pull_request(row, _reviews_by_pr(conn, row_id))


def merge_message(pr: PullRequest) -> str:
    """The merge commit's message: the PR, its issue once, its title, and what went where.

    A PR's default title already starts with its issue (`LEG-1: Add a flag`), so the issue is
    named in front only when the title does not start with it."""
    title = pr.title.strip()
    lead = re.match(rf"{re.escape(pr.issue)}(?![0-9])[\s:.-]*", title, re.IGNORECASE)
    rest = title[lead.end() :] if lead else title
    subject = f"{pr.issue}: {rest}" if rest else pr.issue
    return f"Merge PR #{pr.number}: {subject}\n\nBranch {pr.branch} into {pr.base}."


def _reviews_by_pr(conn: Connection, pr_id: int | None) -> dict[int, list[Review]]:
    query = (
        "SELECT * FROM reviews" + (" WHERE pr_id = ?" if pr_id is not None else "") + " ORDER BY id"
    )
    result: dict[int, list[Review]] = defaultdict(list)
    for row in conn.execute(query, () if pr_id is None else (pr_id,)):
        result[row["pr_id"]].append(
            Review(row["outcome"], row["author"], row["body"], row["created_at"])
        )
    return result


def _pull_request(row: Row, reviews: dict[int, list[Review]]) -> PullRequest:
    return PullRequest(
        number=row["number"],
        issue=row["identifier"],
        title=row["title"],
        body=row["body"],
        branch=row["branch"],
        base=row["base"],
        state=PrState(row["state"]),
        is_draft=bool(row["is_draft"]),
        reviews=tuple(reviews.get(row["id"], ())),
        merge_commit=row["merge_commit"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def open_forge(project: Project, db: Store) -> LocalForge:
    """The registry's opener (`legion.backends`)."""
    return LocalForge(
        db,
        project.root,
        merge_lock=project.state_dir / "merge.lock",
        base_branch=project.settings.base_branch,
        shared_remote=project.settings.remote if in_fleet(project.settings) else None,
        # In a fleet the branches' truth is the shared remote, whose own CI gates them: the
        # leader's clone may not hold a worker's branch another host pushed.
        checks=LocalChecks(db, project.state_dir, project.settings.checks)
        if project.settings.checks and not in_fleet(project.settings)
        else None,
    )
