"""What Legion needs from a code forge: pull requests, their review outcome and their CI checks."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from legion.core.model import ChecksState, ReviewOutcome, combine_checks
from legion.errors import NotFoundError


class PrState(Enum):
    OPEN = "open"
    MERGED = "merged"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class Review:
    outcome: str  # approved, changes_requested or commented
    author: str
    body: str
    created_at: str
    # Written by someone who decides for the project, as the forge says (GitHub's
    # `authorAssociation`; Legion's own account; everyone on the embedded forge, which only
    # this machine writes): only such a review's words are passed on to a worker.
    by_member: bool = True


@dataclass(frozen=True, slots=True)
class Check:
    """One CI check on a pull request's head commit (a GitHub check run or commit status):
    its name, its own state (passing, failing or pending) and where its log is ("" if
    nowhere). Name and URL are the forge's text: escape them where they are printed."""

    name: str
    state: ChecksState
    url: str = ""
    # What the forge says of it, lowercased: a check run's `status` (queued, in_progress,
    # completed) and `conclusion` (success, failure, timed_out, ...; "" until it completes);
    # a commit status has no status and its state as conclusion. And the forge's handle on
    # its log ("" when it has none it can read: a commit status). Detail, not identity.
    status: str = field(default="", compare=False)
    conclusion: str = field(default="", compare=False)
    log_id: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class CheckLog:
    """The end of one check's log: at most its last `legion.core.text.LOG_TAIL_LINES` lines
    and `LOG_TAIL_BYTES` bytes (`cut`: earlier lines were left out). The forge's text, CI's
    output: untrusted; escape it where it is printed."""

    name: str
    text: str
    cut: bool = False


@dataclass(frozen=True, slots=True)
class PrChecks:
    """The CI checks on a pull request's head commit, and one check's log when asked for.
    `note` is the forge's word when it has none to show (the embedded forge runs no CI)."""

    number: int
    head: str  # the head commit ("" when the forge does not say)
    checks: tuple[Check, ...] = ()
    log: CheckLog | None = None
    note: str = ""


def named_check(checks: tuple[Check, ...], name: str, number: int) -> Check:
    """The check of PR `number` called `name` (exactly, else the only one whose name matches
    ignoring case); NotFoundError saying which there are."""
    for check in checks:
        if check.name == name:
            return check
    alike = [check for check in checks if check.name.casefold() == name.casefold()]
    if len(alike) == 1:
        return alike[0]
    names = ", ".join(check.name for check in checks[:20]) or "none"
    more = f" and {len(checks) - 20} more" if len(checks) > 20 else ""
    raise NotFoundError(f"PR #{number} has no check {name!r} (its checks: {names}{more})")


@dataclass(frozen=True, slots=True)
class PullRequest:
    number: int
    issue: str
    title: str
    body: str
    branch: str
    base: str
    state: PrState
    is_draft: bool
    reviews: tuple[Review, ...] = ()
    merge_commit: str | None = None
    created_at: str = ""
    updated_at: str = ""
    url: str = ""  # where a person opens it; "" for the embedded forge
    # The CI checks on the head commit; the embedded forge has no CI, so none.
    check_runs: tuple[Check, ...] = ()
    # Its head is another repository's (a fork's): someone else's work, which no session
    # writes to, whatever its branch or body names.
    from_fork: bool = False

    @property
    def checks(self) -> ChecksState:
        """Failing if any check failed, else pending if any has not finished, else passing
        if there is any, else none."""
        return combine_checks(check.state for check in self.check_runs)

    @property
    def failing_checks(self) -> tuple[Check, ...]:
        return tuple(c for c in self.check_runs if c.state is ChecksState.FAILING)

    @property
    def pending_checks(self) -> tuple[Check, ...]:
        return tuple(c for c in self.check_runs if c.state is ChecksState.PENDING)

    @property
    def review(self) -> ReviewOutcome:
        """The latest approving or change-requesting review decides; comments do not."""
        for review in reversed(self.reviews):
            if review.outcome == "approved":
                return ReviewOutcome.APPROVED
            if review.outcome == "changes_requested":
                return ReviewOutcome.CHANGES_REQUESTED
        return ReviewOutcome.NONE


class Forge(Protocol):
    def create_pr(
        self,
        issue: str,
        branch: str,
        *,
        title: str | None = None,
        body: str = "",
        draft: bool = False,
    ) -> PullRequest: ...

    def get_pr(self, ref: str) -> PullRequest:
        """`ref` is a PR number (`3`, `#3`) or an issue identifier (its latest PR)."""
        ...

    def list_prs(self) -> list[PullRequest]: ...

    def prs_by_issue(
        self, issues: Collection[str], links: Mapping[str, Collection[str]] | None = None
    ) -> dict[str, PullRequest]:
        """The current pull request of each of `issues` that has one: its open one, else its
        latest. `links` are the URLs of the PRs the tracker knows are an issue's (by issue):
        a forge that finds PRs by branch looks there for an issue whose branch has none. A
        real forge answers in a few batched requests, never one per issue."""
        ...

    def set_draft(self, ref: str, draft: bool) -> PullRequest: ...

    def add_review(self, ref: str, outcome: str, *, body: str, author: str) -> PullRequest: ...

    def branch_head(self, ref: str) -> str | None:
        """The commit the PR's branch is at now, as a merge would land it (None: no branch)."""
        ...

    def merge(self, ref: str, *, reviewed: str | None = None) -> PullRequest:
        """Merge the PR into its base. With `reviewed` (the head its approving review saw,
        from Legion's records), only when what lands is that head's work but for notes under
        `docs/solutions/` and a clean merge of the base (`legion.core.reviewed_head`), and
        exactly the head that was checked; else a `ConflictError` saying a new review is
        needed."""
        ...

    def pr_checks(self, ref: str, *, log: str | None = None) -> PrChecks:
        """The CI checks on the head of the PR `ref` (as `get_pr`); with `log`, also the end
        of that check's log (`CheckLog`). NotFoundError when the PR, the check, or its log
        does not exist."""
        ...
