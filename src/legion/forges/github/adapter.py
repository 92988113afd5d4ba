"""The GitHub forge: Legion's pull requests as GitHub pull requests, over GraphQL.

`GitHubForge` is the `Forge` protocol, composed of one part per job: the way to the
repository (`connection.py`: the client, the repository, its context), finding PRs
(`lookups.py`: an issue's PR by its branch or its tracker's links, batched), reading a PR
(`records.py`, with `checks.py` and `reviews.py`), the review labels (`review_labels.py`)
and git on the project's side (`remote.py`: push, fetch the merged base). Work is pushed to
the configured remote with the user's own git credentials; the API token is only ever an
HTTP header.

Review outcome: a worker's verdict is a label plus a marked comment (see `reviews.py`); the
label decides, and without one a person's native review does.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from legion.config import Project
from legion.core.ids import branch_for
from legion.core.model import normalize_identifier
from legion.core.text import (
    LOG_TAIL_BYTES,
    clean_body,
    clean_branch,
    clean_title,
    for_display,
    log_tail,
)
from legion.errors import (
    BackendError,
    BackendErrorKind,
    ConfigError,
    ConflictError,
    InputError,
    NotFoundError,
)
from legion.forges.base import CheckLog, PrChecks, PrState, PullRequest, named_check
from legion.forges.github import documents as docs
from legion.forges.github.checks import checks_line
from legion.forges.github.connection import RepositoryConnection
from legion.forges.github.lookups import PullRequestLookups
from legion.forges.github.records import GitHubPullRequest, record_of
from legion.forges.github.remote import RemoteBranches
from legion.forges.github.review_labels import ReviewLabels
from legion.forges.github.reviews import REVIEW_OUTCOMES, review_comment
from legion.forges.reviewed import merged_tree, reviewed_refusal
from legion.git import rev_parse
from legion.github.settings import GitHubSettings
from legion.graphql_client import DEFAULT_TIMEOUT_S, GraphQLClient

logger = logging.getLogger(__name__)

MERGE_METHODS = {"squash": "SQUASH", "merge": "MERGE", "rebase": "REBASE"}
PUSH_SYNC_WAITS = (0.5, 1.0, 2.0, 4.0)  # GitHub sees a push within seconds


def linked_body(identifier: str, body: str) -> str:
    """The caller's body, naming the issue it resolves when the body does not already."""
    if re.search(rf"(?<![A-Za-z0-9]){re.escape(identifier)}(?![0-9])", body, re.I):
        return body
    return f"{body.rstrip()}\n\nResolves {identifier}" if body.strip() else f"Resolves {identifier}"


class GitHubForge:
    """The `Forge` over GitHub. `client` (or `timeout`/`sleep` for the one it makes) is there for
    tests; the token is looked up on the first request, so opening the forge costs nothing."""

    def __init__(
        self,
        project: Project,
        *,
        client: GraphQLClient | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        sleep: Callable[[float], None] = time.sleep,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.project = project
        self.connection = RepositoryConnection(project, client=client, timeout=timeout, sleep=sleep)
        self.lookups = PullRequestLookups(self.connection)
        self.review_labels = ReviewLabels(self.connection)
        # What went right but not all the way (the local base not updated): on stderr, which
        # is the user's terminal for `legion pr merge` and the daemon's log for a worker's.
        self.branches = RemoteBranches(project, warn or _warn_on_stderr)

    @property
    def client(self) -> GraphQLClient:
        return self.connection.client

    def close(self) -> None:
        self.connection.close()

    @property
    def viewer_login(self) -> str:
        """Who the token is: its reviews and comments are Legion's, anyone else's a person's."""
        return self.connection.context().viewer_login

    # -- reading -------------------------------------------------------------------------------

    def get_pr(self, ref: str) -> PullRequest:
        return self.lookups.find(ref).pr

    def list_prs(self) -> list[PullRequest]:
        return [record.pr for record in self.lookups.listed()]

    def prs_by_issue(
        self, issues: Collection[str], links: Mapping[str, Collection[str]] | None = None
    ) -> dict[str, PullRequest]:
        return {issue: record.pr for issue, record in self.lookups.by_issue(issues, links).items()}

    def pr_checks(self, ref: str, *, log: str | None = None) -> PrChecks:
        record = self.lookups.find(ref)
        pr = record.pr
        found = None
        if log is not None:
            check = named_check(pr.check_runs, log, pr.number)
            if not check.log_id:
                where = f": see {check.url}" if check.url else ""
                raise NotFoundError(
                    f"check {check.name!r} of PR #{pr.number} has no log on GitHub (a commit "
                    f"status, not a GitHub Actions job){where}"
                )
            found = self._job_log(pr.number, check.name, check.log_id, check.url)
        return PrChecks(pr.number, record.head_oid, pr.check_runs, found)

    def _job_log(self, number: int, name: str, job: str, url: str) -> CheckLog:
        """The end of a GitHub Actions job's log (the REST API's; GitHub answers with a
        redirect to a signed URL, which the client follows without the token)."""
        # A few lines more than are shown: the first, cut short, is left out.
        keep = LOG_TAIL_BYTES + 4096
        logs = f"{self.connection.api_base}/repos/{self.connection.slug}/actions/jobs/{job}/logs"
        try:
            raw, more = self.client.download_tail(logs, "GET job logs", keep=keep)
        except BackendError as exc:
            if exc.kind is not BackendErrorKind.NOT_FOUND:
                raise
            where = f": see {url}" if url else ""
            raise NotFoundError(
                f"check {name!r} of PR #{number} has no log GitHub serves (not a GitHub "
                f"Actions job, still running, or past its retention){where}"
            ) from None
        text, cut = log_tail(raw.decode("utf-8", "replace"), cut=more)
        return CheckLog(name, text, cut)

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
        body = linked_body(identifier, clean_body(body))
        expected = branch_for(identifier)
        if branch != expected:
            # On GitHub an issue's PR is found by its branch: any other name would be lost.
            raise InputError(f"the PR branch for {identifier} is {expected!r}, not {branch!r}")
        if self.branches.head(branch) is None:
            raise NotFoundError(
                f"no branch {branch!r} in {self.project.root} (commit and create it first)"
            )
        pr_title = clean_title(title) if title else self.branches.default_title(identifier, branch)
        context = self.connection.context()
        base = self.project.settings.base_branch or context.default_branch
        if not base:
            raise ConfigError(f"{self.connection.slug} has no default branch: set `base_branch`")
        if branch == base:
            raise InputError(f"the PR branch must differ from the base branch {base!r}")
        existing = self.lookups.by_issue([identifier]).get(identifier)
        if existing is not None and existing.pr.state is PrState.OPEN:
            raise ConflictError(f"{identifier} already has open PR #{existing.pr.number}")
        self.branches.push(branch)
        data = self.client.execute(
            docs.CREATE_PULL_REQUEST,
            {
                "input": {
                    "repositoryId": context.id,
                    "baseRefName": base,
                    "headRefName": branch,
                    "title": pr_title,
                    "body": body,
                    "draft": draft,
                }
            },
        )
        return record_of(data["createPullRequest"]["pullRequest"]).pr

    def set_draft(self, ref: str, draft: bool) -> PullRequest:
        record = self.lookups.find(ref)
        _require_open(record.pr)
        if record.pr.is_draft == draft:
            return record.pr
        if draft:
            data = self.client.execute(docs.CONVERT_TO_DRAFT, {"id": record.node_id})
            node = data["convertPullRequestToDraft"]["pullRequest"]
        else:
            data = self.client.execute(docs.MARK_READY, {"id": record.node_id})
            node = data["markPullRequestReadyForReview"]["pullRequest"]
        return record_of(node).pr

    def add_review(self, ref: str, outcome: str, *, body: str, author: str) -> PullRequest:
        if outcome not in REVIEW_OUTCOMES:
            raise InputError(
                f"unknown review outcome {outcome!r} (known: {', '.join(REVIEW_OUTCOMES)})"
            )
        body = clean_body(body, "the review")
        if outcome != "approved" and not body.strip():
            raise InputError("a review that requests changes or comments needs --body")
        record = self.lookups.find(ref)
        _require_open(record.pr)
        self.review_labels.mark(record, outcome)
        data = self.client.execute(
            docs.ADD_COMMENT,
            {"id": record.node_id, "body": review_comment(outcome, body, author.strip())},
        )
        return record_of(data["addComment"]["subject"]).pr

    def branch_head(self, ref: str) -> str | None:
        # As `_push_reviewed_work` finds it: the local branch when GitHub's lacks some of it
        # (the merge pushes it first), else GitHub's.
        record = self.lookups.find(ref)
        local = self.branches.head(record.pr.branch)
        if local is None or local == record.head_oid:
            return record.head_oid or None
        return record.head_oid if self.branches.contains(record.head_oid, local) else local

    def merge(self, ref: str, *, reviewed: str | None = None) -> PullRequest:
        record = self.lookups.find(ref)
        pr = record.pr
        if pr.state is PrState.MERGED:
            return pr  # idempotent: merging a merged PR is done already
        if pr.state is not PrState.OPEN:
            raise ConflictError(f"PR #{pr.number} is {pr.state.value}")
        if pr.is_draft:
            raise ConflictError(
                f"PR #{pr.number} is a draft: mark it ready with `legion pr ready {pr.number}`"
            )
        record = self._push_reviewed_work(record)
        if record.mergeable == "CONFLICTING":
            raise ConflictError(
                f"PR #{pr.number} cannot be merged: {pr.branch} conflicts with {pr.base}; "
                f"merge {pr.base} into {pr.branch}, resolve the conflicts, and try again"
            )
        if reviewed is not None:
            self._check_reviewed(record, reviewed)
        method = MERGE_METHODS[self.project.settings.section(GitHubSettings).merge_method]
        try:
            # GitHub merges this head or nothing: a push after the check fails the merge.
            data = self.client.execute(
                docs.MERGE_PULL_REQUEST,
                {"id": record.node_id, "method": method, "expectedHeadOid": record.head_oid},
            )
        except BackendError as exc:
            if exc.kind is not BackendErrorKind.INVALID:
                raise
            again = self.lookups.by_number(pr.number)
            if again.pr.state is PrState.MERGED:
                return again.pr  # merged meanwhile, by someone else
            unfinished = checks_line(again.pr)
            if unfinished:
                # Branch protection: a required check failed or has not finished. Say which.
                raise ConflictError(
                    f"PR #{pr.number} cannot be merged until its checks pass: {unfinished} ({exc})"
                ) from None
            raise ConflictError(f"PR #{pr.number} cannot be merged: {exc}") from None
        merged = record_of(data["mergePullRequest"]["pullRequest"]).pr
        self.branches.fetch_base(merged.base)
        return merged

    def _check_reviewed(self, record: GitHubPullRequest, reviewed: str) -> None:
        """Unless merging the head GitHub has (`record.head_oid`, which the merge then
        expects) into the remote's base lands the reviewed head's work but for notes under
        `docs/solutions/` (`legion.core.reviewed_head`), refuse."""
        pr = record.pr
        base = self.branches.fetch_branch(pr.base)
        self.branches.fetch_branch(pr.branch)  # the head's commits, and the reviewed one's
        root = self.project.root
        if not record.head_oid or rev_parse(root, record.head_oid) is None:
            raise ConflictError(
                f"PR #{pr.number}: its head on GitHub is not in {root} after a fetch; "
                "try the merge again"
            )
        landing = merged_tree(root, base, record.head_oid)
        if not landing.clean:
            raise ConflictError(
                f"PR #{pr.number} cannot be merged: {pr.branch} conflicts with {pr.base}; "
                f"merge {pr.base} into {pr.branch}, resolve the conflicts, and try again"
            )
        refusal = reviewed_refusal(root, pr.number, reviewed, base, landing.tree)
        if refusal is not None:
            raise ConflictError(refusal)

    def _push_reviewed_work(self, record: GitHubPullRequest) -> GitHubPullRequest:
        """Push commits made on the local branch since the PR was opened (the fixes a review
        asked for), and wait until GitHub's PR shows them: what is merged is what was
        reviewed. Without a local branch, the PR is merged as GitHub has it."""
        local = self.branches.head(record.pr.branch)
        if local is None or local == record.head_oid:
            return record
        if self.branches.contains(record.head_oid, local):
            return record  # GitHub's branch has everything local has, and more
        self.branches.push(record.pr.branch)
        for wait in (0.0, *PUSH_SYNC_WAITS):
            if wait:
                self.client.sleep(wait)
            fresh = self.lookups.by_number(record.pr.number)
            if fresh.head_oid == local:
                return fresh
        raise ConflictError(
            f"PR #{record.pr.number}: GitHub does not show the pushed commits of "
            f"{record.pr.branch} yet; try the merge again in a minute"
        )


def _warn_on_stderr(line: str) -> None:
    logger.warning("%s", for_display(line))


def _require_open(pr: PullRequest) -> None:
    if pr.state is not PrState.OPEN:
        raise ConflictError(f"PR #{pr.number} is {pr.state.value}")


def open_forge(project: Project, db: object = None, **options: Any) -> GitHubForge:
    """The registry's opener (`legion.backends`). Legion's own records stay in the embedded
    database (`db`); the forge needs none of it."""
    return GitHubForge(project, **options)
