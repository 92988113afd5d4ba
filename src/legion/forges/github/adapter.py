"""The GitHub forge: Legion's pull requests as GitHub pull requests, over GraphQL.

An issue's PR is found by its branch (`legion/<issue>`), else among the PRs its tracker links
to it (`Issue.links`: a closing keyword, a Linear attachment), so the state of every issue's PR
is one aliased query per 50 branches and linked PR numbers. Work is pushed to the configured
remote with the user's own git credentials; the API token is only ever an HTTP header.

Review outcome: Legion's workers share one token, and GitHub does not let a PR's author
approve it, so a worker's verdict is a label (`worker-approved`, `worker-changes-requested`)
plus a marked comment that carries the reviewer's words. The label decides; without one, a
person's native review (APPROVED, CHANGES_REQUESTED) does.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from legion.config import Project
from legion.core.ids import BRANCH_PREFIX, branch_for
from legion.core.marks import PULL_REQUEST_PATH, mark, unmark
from legion.core.model import ChecksState, normalize_identifier
from legion.core.text import (
    MAX_TITLE_CHARS,
    clean_body,
    clean_branch,
    clean_title,
    for_display,
)
from legion.errors import (
    BackendError,
    BackendErrorKind,
    ConfigError,
    ConflictError,
    InputError,
    LegionError,
    NotFoundError,
)
from legion.forges.base import Check, PrState, PullRequest, Review
from legion.forges.github import documents as docs
from legion.git import fast_forward, last_line, rev_parse, run_git
from legion.github.client import (
    Token,
    find_token,
    github_client,
)
from legion.github.repository import repository_name, web_host
from legion.github.settings import GitHubSettings
from legion.graphql_client import DEFAULT_TIMEOUT_S, Document, GraphQLClient

APPROVED_LABEL = "worker-approved"
CHANGES_LABEL = "worker-changes-requested"
_LABEL_STYLE = {  # color, description: used when Legion creates the label
    APPROVED_LABEL: ("0e8a16", "A Legion reviewer approved this pull request"),
    CHANGES_LABEL: ("d93f0b", "A Legion reviewer asked for changes"),
}
REVIEW_OUTCOMES = ("approved", "changes_requested", "commented")
MERGE_METHODS = {"squash": "SQUASH", "merge": "MERGE", "rebase": "REBASE"}
OPEN_PAGES = 20  # at most 1,000 open PRs listed: more is not a repository Legion runs
PUSH_SYNC_WAITS = (0.5, 1.0, 2.0, 4.0)  # GitHub sees a push within seconds

# A Legion review comment's first line says what it is; the outcome is the label's.
_HEADINGS = {
    "approved": "Legion review: approved",
    "changes_requested": "Legion review: changes requested",
    "commented": "Legion review: comment",
}
_OUTCOME_BY_HEADING = {heading: outcome for outcome, heading in _HEADINGS.items()}
_HEADING = re.compile(r"^\*\*(Legion review: [a-z ]+)\*\*[ \t]*(?:\n+|$)")
_NATIVE_OUTCOMES = {
    "APPROVED": "approved",
    "CHANGES_REQUESTED": "changes_requested",
    "COMMENTED": "commented",
}
_PR_NUMBER = re.compile(r"^#?([1-9][0-9]{0,8})$")
_RESOLVES = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s+([A-Za-z][A-Za-z0-9]{0,9}-[1-9][0-9]{0,8})\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class GitHubPullRequest:
    """A PR as GitHub shows it: what Legion's model holds, and what only writes need."""

    pr: PullRequest
    node_id: str
    labels: frozenset[str]
    head_oid: str
    mergeable: str  # MERGEABLE, CONFLICTING or UNKNOWN (GitHub computes it lazily)
    checks: str | None  # the head commit's combined check state: SUCCESS, FAILURE, PENDING ...


@dataclass
class RepositoryContext:
    """What one request tells about the token and the repository; read once per forge."""

    viewer_login: str
    id: str | None  # None when the repository is missing or hidden from the token
    name_with_owner: str
    permission: str | None  # ADMIN, MAINTAIN, WRITE, TRIAGE, READ
    default_branch: str | None
    label_ids: dict[str, str]


def issue_for_branch(branch: str) -> str | None:
    """The issue a `legion/<issue>` branch is for, or None for any other branch."""
    if not branch.startswith(BRANCH_PREFIX):
        return None
    try:
        return normalize_identifier(branch.removeprefix(BRANCH_PREFIX))
    except InputError:
        return None


def linked_body(identifier: str, body: str) -> str:
    """The caller's body, naming the issue it resolves when the body does not already."""
    if re.search(rf"(?<![A-Za-z0-9]){re.escape(identifier)}(?![0-9])", body, re.I):
        return body
    return f"{body.rstrip()}\n\nResolves {identifier}" if body.strip() else f"Resolves {identifier}"


def review_comment(outcome: str, body: str, author: str) -> str:
    """The marked PR comment that carries a Legion review."""
    heading = f"**{_HEADINGS[outcome]}**"
    return mark(f"{heading}\n\n{body.strip()}" if body.strip() else heading, author)


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
        # What went right but not all the way (the local base not updated): on stderr, which
        # is the user's terminal for `legion pr merge` and the daemon's log for a worker's.
        self.warn = warn or _warn_on_stderr
        self._client = client
        self._timeout = timeout
        self._sleep = sleep
        self._repository: tuple[str, str] | None = None
        self._context: RepositoryContext | None = None

    # -- setup ---------------------------------------------------------------------------------

    @property
    def client(self) -> GraphQLClient:
        if self._client is None:
            self._client = github_client(self.project.env, timeout=self._timeout, sleep=self._sleep)
        return self._client

    @property
    def repository(self) -> tuple[str, str]:
        if self._repository is None:
            self._repository = repository_name(self.project)
        return self._repository

    @property
    def slug(self) -> str:
        return "/".join(self.repository)

    def _names(self) -> dict[str, str]:
        owner, name = self.repository
        return {"owner": owner, "name": name}

    def fetch_context(self) -> RepositoryContext:
        """One request: the viewer, and the repository if the token can see it."""
        data, _ = self.client.execute_partial(
            docs.REPOSITORY_CONTEXT,
            {**self._names(), "approved": APPROVED_LABEL, "changes": CHANGES_LABEL},
        )
        repo = data.get("repository")
        viewer = data.get("viewer") or {}
        if not isinstance(repo, dict):
            return RepositoryContext(viewer.get("login") or "", None, self.slug, None, None, {})
        labels = {
            name: node["id"]
            for name, node in (
                (APPROVED_LABEL, repo.get("approvedLabel")),
                (CHANGES_LABEL, repo.get("changesLabel")),
            )
            if isinstance(node, dict)
        }
        return RepositoryContext(
            viewer_login=viewer.get("login") or "",
            id=repo["id"],
            name_with_owner=repo.get("nameWithOwner") or self.slug,
            permission=repo.get("viewerPermission"),
            default_branch=(repo.get("defaultBranchRef") or {}).get("name"),
            label_ids=labels,
        )

    def context(self) -> RepositoryContext:
        if self._context is None:
            context = self.fetch_context()
            if context.id is None:
                raise self._missing_repository(docs.REPOSITORY_CONTEXT)
            self._context = context
        return self._context

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    @property
    def viewer_login(self) -> str:
        """Who the token is: its reviews and comments are Legion's, anyone else's a person's."""
        return self.context().viewer_login

    def _missing_repository(self, doc: Document) -> BackendError:
        # A repository the token cannot see reads as missing: a setting or credential to fix.
        return BackendError(
            "github",
            BackendErrorKind.AUTH,
            f"repository {self.slug} not found, or the token cannot see it",
            operation=doc.name,
        )

    def _repository_data(self, doc: Document, variables: Mapping[str, Any]) -> dict[str, Any]:
        """The `repository` of a read; items missing in it (NOT_FOUND) come back null."""
        data, _ = self.client.execute_partial(doc, {**self._names(), **variables})
        repo = data.get("repository")
        if not isinstance(repo, dict):
            raise self._missing_repository(doc)
        return repo

    # -- reading -------------------------------------------------------------------------------

    def get_pr(self, ref: str) -> PullRequest:
        return self._find(ref).pr

    def list_prs(self) -> list[PullRequest]:
        found: dict[int, PullRequest] = {}
        # Every open PR, and the most recently updated closed or merged ones.
        for states, pages in ((["OPEN"], OPEN_PAGES), (["MERGED", "CLOSED"], 1)):
            after: str | None = None
            for _ in range(pages):
                repo = self._repository_data(
                    docs.PULL_REQUEST_PAGE,
                    {"states": states, "first": docs.PAGE_SIZE, "after": after},
                )
                connection = repo["pullRequests"]
                for node in connection.get("nodes") or []:
                    if _legions(node) and issue_for_branch(node["headRefName"]):
                        record = self._record(node)
                        found[record.pr.number] = record.pr
                page = connection.get("pageInfo") or {}
                if not page.get("hasNextPage"):
                    break
                after = page.get("endCursor")
        return [found[number] for number in sorted(found)]

    def prs_by_issue(
        self, issues: Collection[str], links: Mapping[str, Collection[str]] | None = None
    ) -> dict[str, PullRequest]:
        return {issue: record.pr for issue, record in self.records_by_issue(issues, links).items()}

    def records_by_issue(
        self, issues: Iterable[str], links: Mapping[str, Collection[str]] | None = None
    ) -> dict[str, GitHubPullRequest]:
        """Each issue's current PR: by its branch, else by the PRs of this repository its
        `links` name (the tracker's: a closing keyword, an attachment). One request per
        `BATCH_SIZE` lookups, a lookup being a branch or a linked PR number."""
        branches: dict[str, str] = {}  # branch: the issue as the caller named it
        linked: dict[str, list[int]] = {}  # issue: the numbers of the PRs its links name
        for issue in issues:
            try:
                branch = branch_for(issue)
            except InputError:
                continue  # not an issue identifier: it has no branch, so no PR
            if branch in branches:
                continue  # the same issue named again
            branches[branch] = issue
            numbers = self._linked_numbers((links or {}).get(issue) or ())
            if numbers:
                linked[issue] = numbers
        by_branch, by_number = self._batched(
            list(branches), list(dict.fromkeys(n for numbers in linked.values() for n in numbers))
        )
        found: dict[str, GitHubPullRequest] = {}
        for branch, issue in branches.items():
            current = _current(by_branch.get(branch, []))
            if current is not None:
                found[issue] = current
        for issue, numbers in linked.items():
            if issue in found:
                continue  # Legion's own branch has a PR: a link only fills in for none
            records = [record for n in numbers if (record := by_number.get(n)) is not None]
            current = _current(sorted(records, key=lambda r: r.pr.number, reverse=True))
            if current is not None:
                found[issue] = _for_issue(current, issue)
        return found

    def _batched(
        self, branches: Sequence[str], numbers: Sequence[int]
    ) -> tuple[dict[str, list[GitHubPullRequest]], dict[int, GitHubPullRequest]]:
        """The PRs of each branch (newest first) and the PR of each number, `BATCH_SIZE`
        lookups per request: branches first, then numbers."""
        lookups: list[str | int] = [*branches, *numbers]
        by_branch: dict[str, list[GitHubPullRequest]] = {}
        by_number: dict[int, GitHubPullRequest] = {}
        for start in range(0, len(lookups), docs.BATCH_SIZE):
            chunk = lookups[start : start + docs.BATCH_SIZE]
            chunk_branches = [item for item in chunk if isinstance(item, str)]
            chunk_numbers = [item for item in chunk if isinstance(item, int)]
            variables: dict[str, Any] = {f"h{k}": b for k, b in enumerate(chunk_branches)}
            variables |= {f"n{k}": n for k, n in enumerate(chunk_numbers)}
            repo = self._repository_data(
                docs.pr_batch_document(len(chunk_branches), len(chunk_numbers)), variables
            )
            for k, branch in enumerate(chunk_branches):
                nodes = (repo.get(f"i{k}") or {}).get("nodes") or []
                # A PR that vanished mid-answer is a null node: that issue has no PR.
                by_branch[branch] = [self._record(node) for node in nodes if _legions(node)]
            for k, number in enumerate(chunk_numbers):
                node = repo.get(f"p{k}")  # null: no such PR (NOT_FOUND), or an issue's number
                if _legions(node):
                    by_number[number] = self._record(node)
        return by_branch, by_number

    def _linked_numbers(self, urls: Collection[str]) -> list[int]:
        """The numbers of the PRs of this repository among `urls` (on GitHub's web host, or
        github.com), each once."""
        if not urls:
            return []
        owner, name = (part.casefold() for part in self.repository)
        hosts = {web_host(self.project.env), "github.com"}
        numbers: dict[int, None] = {}
        for url in urls:
            try:
                parts = urlsplit(url.strip())
            except ValueError:
                continue
            match = PULL_REQUEST_PATH.search(parts.path)
            if (
                match is not None
                and (parts.hostname or "") in hosts
                and (match.group(1).casefold(), match.group(2).casefold()) == (owner, name)
            ):
                numbers.setdefault(int(match.group(3)))
        return list(numbers)

    def _find(self, ref: str) -> GitHubPullRequest:
        match = _PR_NUMBER.fullmatch(ref.strip())
        if match is not None:
            return self._by_number(int(match.group(1)))
        identifier = normalize_identifier(ref)
        record = self.records_by_issue([identifier]).get(identifier)
        if record is None:
            raise NotFoundError(f"{identifier} has no pull request")
        return record

    def _by_number(self, number: int) -> GitHubPullRequest:
        try:
            repo = self._repository_data(docs.PULL_REQUEST_BY_NUMBER, {"number": number})
        except BackendError as exc:
            if exc.kind is not BackendErrorKind.NOT_FOUND:
                raise
            repo = {}
        node = repo.get("pullRequest")
        if not isinstance(node, dict):
            raise NotFoundError(f"no pull request #{number} in {self.slug}")
        return self._record(node)

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
        root = self.project.root
        if rev_parse(root, f"refs/heads/{branch}") is None:
            raise NotFoundError(f"no branch {branch!r} in {root} (commit and create it first)")
        pr_title = clean_title(title) if title else self._default_title(identifier, branch)
        context = self.context()
        base = self.project.settings.base_branch or context.default_branch
        if not base:
            raise ConfigError(f"{self.slug} has no default branch: set `base_branch`")
        if branch == base:
            raise InputError(f"the PR branch must differ from the base branch {base!r}")
        existing = self.records_by_issue([identifier]).get(identifier)
        if existing is not None and existing.pr.state is PrState.OPEN:
            raise ConflictError(f"{identifier} already has open PR #{existing.pr.number}")
        self._push(branch)
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
        return self._record(data["createPullRequest"]["pullRequest"]).pr

    def set_draft(self, ref: str, draft: bool) -> PullRequest:
        record = self._find(ref)
        _require_open(record.pr)
        if record.pr.is_draft == draft:
            return record.pr
        if draft:
            data = self.client.execute(docs.CONVERT_TO_DRAFT, {"id": record.node_id})
            node = data["convertPullRequestToDraft"]["pullRequest"]
        else:
            data = self.client.execute(docs.MARK_READY, {"id": record.node_id})
            node = data["markPullRequestReadyForReview"]["pullRequest"]
        return self._record(node).pr

    def add_review(self, ref: str, outcome: str, *, body: str, author: str) -> PullRequest:
        if outcome not in REVIEW_OUTCOMES:
            raise InputError(
                f"unknown review outcome {outcome!r} (known: {', '.join(REVIEW_OUTCOMES)})"
            )
        body = clean_body(body, "the review")
        if outcome != "approved" and not body.strip():
            raise InputError("a review that requests changes or comments needs --body")
        record = self._find(ref)
        _require_open(record.pr)
        if outcome != "commented":
            wanted, other = (
                (APPROVED_LABEL, CHANGES_LABEL)
                if outcome == "approved"
                else (CHANGES_LABEL, APPROVED_LABEL)
            )
            if wanted not in record.labels:
                self._label(record.node_id, wanted)
            if other in record.labels:
                self._unlabel(record.node_id, other)
        data = self.client.execute(
            docs.ADD_COMMENT,
            {"id": record.node_id, "body": review_comment(outcome, body, author.strip())},
        )
        return self._record(data["addComment"]["subject"]).pr

    def merge(self, ref: str) -> PullRequest:
        record = self._find(ref)
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
        method = MERGE_METHODS[self.project.settings.section(GitHubSettings).merge_method]
        try:
            data = self.client.execute(
                docs.MERGE_PULL_REQUEST,
                {"id": record.node_id, "method": method, "expectedHeadOid": record.head_oid},
            )
        except BackendError as exc:
            if exc.kind is not BackendErrorKind.INVALID:
                raise
            again = self._by_number(pr.number)
            if again.pr.state is PrState.MERGED:
                return again.pr  # merged meanwhile, by someone else
            unfinished = checks_line(again.pr)
            if unfinished:
                # Branch protection: a required check failed or has not finished. Say which.
                raise ConflictError(
                    f"PR #{pr.number} cannot be merged until its checks pass: {unfinished} ({exc})"
                ) from None
            raise ConflictError(f"PR #{pr.number} cannot be merged: {exc}") from None
        merged = self._record(data["mergePullRequest"]["pullRequest"]).pr
        self._fetch_base(merged.base)
        return merged

    # -- labels --------------------------------------------------------------------------------

    def _label_id(self, name: str) -> str:
        context = self.context()
        if name not in context.label_ids:
            color, description = _LABEL_STYLE[name]
            try:
                data = self.client.execute(
                    docs.CREATE_LABEL,
                    {
                        "repositoryId": context.id,
                        "name": name,
                        "color": color,
                        "description": description,
                    },
                )
                context.label_ids[name] = data["createLabel"]["label"]["id"]
            except BackendError as exc:
                if exc.kind is not BackendErrorKind.INVALID:
                    raise
                # Created meanwhile by another process ("already taken"): read it back.
                self._context = None
                fresh = self.context()
                if name not in fresh.label_ids:
                    raise
        return self.context().label_ids[name]

    def _label(self, node_id: str, name: str) -> None:
        try:
            self.client.execute(
                docs.ADD_LABELS, {"id": node_id, "labelIds": [self._label_id(name)]}
            )
        except BackendError as exc:
            if exc.kind is not BackendErrorKind.NOT_FOUND:
                raise
            # The label was deleted since it was read: look it up (or create it) once more.
            self._context = None
            self.client.execute(
                docs.ADD_LABELS, {"id": node_id, "labelIds": [self._label_id(name)]}
            )

    def _unlabel(self, node_id: str, name: str) -> None:
        label_id = self.context().label_ids.get(name)
        if label_id is None:
            self._context = None  # on the PR, so in the repository: read the ids again
            label_id = self.context().label_ids.get(name)
        if label_id is not None:
            self.client.execute(docs.REMOVE_LABELS, {"id": node_id, "labelIds": [label_id]})

    # -- git -----------------------------------------------------------------------------------

    def _push(self, branch: str) -> None:
        """Push the branch to the remote with the user's git credentials (never the token)."""
        remote = self.project.settings.remote
        refspec = f"refs/heads/{branch}:refs/heads/{branch}"
        result = run_git(self.project.root, "push", "--quiet", remote, refspec, check=False)
        if result.returncode != 0:
            raise ConflictError(
                f"cannot push {branch} to {remote}: {last_line(result.stderr or result.stdout)}; "
                f"if {remote} has commits the local branch lacks, merge them into it first"
            )

    def _push_reviewed_work(self, record: GitHubPullRequest) -> GitHubPullRequest:
        """Push commits made on the local branch since the PR was opened (the fixes a review
        asked for), and wait until GitHub's PR shows them: what is merged is what was
        reviewed. Without a local branch, the PR is merged as GitHub has it."""
        local = rev_parse(self.project.root, f"refs/heads/{record.pr.branch}")
        if local is None or local == record.head_oid:
            return record
        behind = run_git(
            self.project.root, "merge-base", "--is-ancestor", local, record.head_oid, check=False
        )
        if behind.returncode == 0:
            return record  # GitHub's branch has everything local has, and more
        self._push(record.pr.branch)
        for wait in (0.0, *PUSH_SYNC_WAITS):
            if wait:
                self.client.sleep(wait)
            fresh = self._by_number(record.pr.number)
            if fresh.head_oid == local:
                return fresh
        raise ConflictError(
            f"PR #{record.pr.number}: GitHub does not show the pushed commits of "
            f"{record.pr.branch} yet; try the merge again in a minute"
        )

    def _fetch_base(self, base: str) -> None:
        """Bring the merge home: fetch the base (new workspaces start from `<remote>/<base>`),
        then fast-forward the local base where that is safe. Where it is not (offline, local
        commits, a checkout with local changes) nothing is touched, and a warning says so."""
        remote = self.project.settings.remote
        tracking = f"refs/remotes/{remote}/{base}"
        fetched = run_git(
            self.project.root,
            "fetch",
            "--quiet",
            "--no-tags",
            remote,
            f"+refs/heads/{base}:{tracking}",
            check=False,
        )
        if fetched.returncode != 0:
            self.warn(
                f"merged, but cannot fetch {base} from {remote} "
                f"({last_line(fetched.stderr or fetched.stdout)}): local {base} not updated"
            )
            return
        merged = rev_parse(self.project.root, tracking)
        why = fast_forward(self.project.root, base, merged) if merged else "nothing fetched"
        if why is not None:
            self.warn(
                f"merged on {remote}, but local {base} was left as it is: {why}; "
                f"update it with `git merge --ff-only {remote}/{base}`"
            )

    def _default_title(self, identifier: str, branch: str) -> str:
        """The branch's last commit subject, after the issue unless it names the issue."""
        subject = run_git(
            self.project.root, "log", "-1", "--format=%s", f"refs/heads/{branch}", "--", check=False
        ).stdout.strip()
        if not subject:
            return identifier
        if not subject.upper().startswith(identifier):
            subject = f"{identifier}: {subject}"
        return clean_title(subject[:MAX_TITLE_CHARS])

    # -- reading a PR node ---------------------------------------------------------------------

    def _record(self, node: Mapping[str, Any]) -> GitHubPullRequest:
        branch = node["headRefName"]
        labels = frozenset(
            label["name"] for label in (node.get("labels") or {}).get("nodes") or [] if label
        )
        issue = issue_for_branch(branch) or _issue_in_body(node.get("body") or "") or ""
        commits = (node.get("commits") or {}).get("nodes") or []
        last = commits[-1] if commits and isinstance(commits[-1], dict) else {}
        rollup = (last.get("commit") or {}).get("statusCheckRollup")
        pr = PullRequest(
            number=node["number"],
            issue=issue,
            title=node["title"],
            body=node.get("body") or "",
            branch=branch,
            base=node["baseRefName"],
            state=PrState(str(node["state"]).lower()),
            is_draft=bool(node.get("isDraft")),
            reviews=_reviews(node, labels),
            merge_commit=(node.get("mergeCommit") or {}).get("oid"),
            created_at=node.get("createdAt") or "",
            updated_at=node.get("updatedAt") or "",
            url=node.get("url") or "",
            check_runs=checks_of(rollup, node.get("url") or ""),
        )
        return GitHubPullRequest(
            pr=pr,
            node_id=node["id"],
            labels=labels,
            head_oid=node.get("headRefOid") or "",
            mergeable=node.get("mergeable") or "UNKNOWN",
            checks=rollup.get("state") if isinstance(rollup, dict) else None,
        )


# How GitHub's check runs and commit statuses read as Legion's checks (`ChecksState`).
FAILED_CONCLUSIONS = frozenset(
    {"FAILURE", "TIMED_OUT", "CANCELLED", "ACTION_REQUIRED", "STARTUP_FAILURE"}
)
_STATUS_STATES = {
    "SUCCESS": ChecksState.PASSING,
    "FAILURE": ChecksState.FAILING,
    "ERROR": ChecksState.FAILING,
    "PENDING": ChecksState.PENDING,
    "EXPECTED": ChecksState.PENDING,  # a required status nothing has reported yet
}


def check_of(node: Any) -> Check | None:
    """One node of a `statusCheckRollup`'s contexts as a `Check`; None for a null node (one
    GitHub could not resolve) or a kind Legion does not know.

    A check run that has not completed (queued, in progress, waiting, ...) is pending; a
    completed one failed if its conclusion is one of `FAILED_CONCLUSIONS`, else it passed
    (success, neutral, skipped, stale). A commit status is failing on FAILURE or ERROR,
    pending on PENDING or EXPECTED, else passing."""
    if not isinstance(node, dict):
        return None
    kind = node.get("__typename")
    if kind == "CheckRun":
        if node.get("status") != "COMPLETED" or node.get("conclusion") is None:
            state = ChecksState.PENDING
        elif node.get("conclusion") in FAILED_CONCLUSIONS:
            state = ChecksState.FAILING
        else:
            state = ChecksState.PASSING
        return Check(str(node.get("name") or "check"), state, str(node.get("detailsUrl") or ""))
    if kind == "StatusContext":
        state = _STATUS_STATES.get(str(node.get("state")), ChecksState.PASSING)
        return Check(str(node.get("context") or "status"), state, str(node.get("targetUrl") or ""))
    return None


def checks_of(rollup: Any, pr_url: str = "") -> tuple[Check, ...]:
    """The checks of a head commit's `statusCheckRollup` (null: no checks). When there are more
    than one page of them and the rollup's own state says failing or pending while the page
    shows no such check, one more check stands for the rest (linking to the PR's checks tab),
    so the state Legion reads agrees with GitHub's."""
    if not isinstance(rollup, dict):
        return ()
    contexts = rollup.get("contexts") or {}
    found = [c for node in contexts.get("nodes") or [] if (c := check_of(node)) is not None]
    unseen = int(contexts.get("totalCount") or 0) - len(contexts.get("nodes") or [])
    overall = _STATUS_STATES.get(str(rollup.get("state")))
    if (
        unseen > 0
        and overall in (ChecksState.FAILING, ChecksState.PENDING)
        and all(check.state is not overall for check in found)
    ):
        rest = f"{unseen} more check{'s' if unseen != 1 else ''}"
        found.append(Check(rest, overall, f"{pr_url}/checks" if pr_url else ""))
    return tuple(found)


def checks_line(pr: PullRequest) -> str:
    """The PR's failing and pending checks in one line, each failing one with its log link
    ("failing: lint <url>, test <url>; pending: build"); "" when none is either."""
    parts = []
    if pr.failing_checks:
        named = (f"{c.name} <{c.url}>" if c.url else c.name for c in pr.failing_checks)
        parts.append(f"failing: {', '.join(named)}")
    if pr.pending_checks:
        parts.append(f"pending: {', '.join(c.name for c in pr.pending_checks)}")
    return "; ".join(parts)


def _warn_on_stderr(line: str) -> None:
    print(f"legion: warning: {for_display(line)}", file=sys.stderr, flush=True)


def _current(records: Sequence[GitHubPullRequest]) -> GitHubPullRequest | None:
    """The open PR, else the newest (the list is newest first)."""
    for record in records:
        if record.pr.state is PrState.OPEN:
            return record
    return records[0] if records else None


def _for_issue(record: GitHubPullRequest, issue: str) -> GitHubPullRequest:
    """A linked PR as `issue`'s: its branch and body may name no issue, or another."""
    return replace(record, pr=replace(record.pr, issue=issue))


def _legions(node: Any) -> TypeGuard[dict[str, Any]]:
    """A PR node that is there (not vanished) and from the repository itself: a fork's PR
    from a branch of the same name is someone else's."""
    return isinstance(node, dict) and not node.get("isCrossRepository")


def _require_open(pr: PullRequest) -> None:
    if pr.state is not PrState.OPEN:
        raise ConflictError(f"PR #{pr.number} is {pr.state.value}")


def _issue_in_body(body: str) -> str | None:
    match = _RESOLVES.search(body)
    return normalize_identifier(match.group(1)) if match else None


def _login(actor: Any) -> str:
    return (actor or {}).get("login") or "ghost"  # GitHub's name for a deleted account


def _verdict(reviews: Iterable[Review]) -> str | None:
    """What `PullRequest.review` makes of `reviews`: the latest verdict, comments aside."""
    for review in reversed(list(reviews)):
        if review.outcome in ("approved", "changes_requested"):
            return review.outcome
    return None


def _reviews(node: Mapping[str, Any], labels: frozenset[str]) -> tuple[Review, ...]:
    """The PR's reviews, ordered so that `PullRequest.review` gives the outcome that decides:
    Legion's label first, else the native reviews (GitHub's `reviewDecision`, else the latest
    verdict). Legion's review comments are listed for their words; their verdict counts only
    while its label is on the PR."""
    if CHANGES_LABEL in labels:
        label_outcome: str | None = "changes_requested"
    elif APPROVED_LABEL in labels:
        label_outcome = "approved"
    else:
        label_outcome = None
    entries: list[Review] = []
    for review in (node.get("latestReviews") or {}).get("nodes") or []:
        outcome = _NATIVE_OUTCOMES.get(review.get("state") if review else "")
        if review and outcome is not None:
            when = review.get("submittedAt") or ""
            entries.append(Review(outcome, _login(review.get("author")), review["body"], when))
    legion: list[Review] = []
    for comment in (node.get("comments") or {}).get("nodes") or []:
        if not comment:
            continue
        text, author, _ = unmark(comment.get("body") or "")
        match = _HEADING.match(text)
        if author is None or match is None or match.group(1) not in _OUTCOME_BY_HEADING:
            continue
        said = _OUTCOME_BY_HEADING[match.group(1)]
        outcome = said if said == label_outcome else "commented"
        legion.append(Review(outcome, author, text[match.end() :], comment.get("createdAt") or ""))
    entries = sorted([*entries, *legion], key=lambda review: review.created_at)
    decision = node.get("reviewDecision")
    wanted = label_outcome or _NATIVE_OUTCOMES.get(decision or "") or _verdict(entries)
    if wanted in ("approved", "changes_requested") and _verdict(entries) != wanted:
        # The decisive outcome must read last: the label's (with its comment's words), or
        # GitHub's decision over several reviewers.
        source = next((r for r in reversed(legion) if r.outcome == wanted), None)
        if source is not None:
            entries.remove(source)
            entries.append(source)
        elif label_outcome is not None:
            label = CHANGES_LABEL if wanted == "changes_requested" else APPROVED_LABEL
            entries.append(Review(wanted, label, "", node.get("updatedAt") or ""))
        else:
            entries.append(Review(wanted, "github", "", node.get("updatedAt") or ""))
    return tuple(entries)


def open_forge(project: Project, db: object = None, **options: Any) -> GitHubForge:
    """The registry's opener (`legion.backends`). Legion's own records stay in the embedded
    database (`db`); the forge needs none of it."""
    return GitHubForge(project, **options)


def doctor_checks(
    project: Project, *, client: GraphQLClient | None = None
) -> list[tuple[str, bool, str]]:
    """(name, ok, detail) for `legion doctor`: the token (where from, never its value), who it
    is, the repository and whether the token can push, and the review labels."""
    checks: list[tuple[str, bool, str]] = []
    token: Token | None = None
    if client is None:
        token = find_token(project.env)
        if token is None:
            return [
                (
                    "GitHub token",
                    False,
                    "not found: set GITHUB_TOKEN or GH_TOKEN, or log in with `gh auth login`",
                )
            ]
        checks.append(("GitHub token", True, f"from {token.source}"))
        client = github_client(project.env, token=token, timeout=10.0)
    forge = GitHubForge(project, client=client)
    try:
        slug = forge.slug
    except LegionError as exc:
        return [*checks, ("GitHub repository", False, str(exc))]
    try:
        context = forge.fetch_context()
    except LegionError as exc:
        return [*checks, ("GitHub authentication", False, str(exc))]
    checks.append(("GitHub authentication", True, f"authenticated as {context.viewer_login}"))
    if context.id is None:
        checks.append(("GitHub repository", False, f"{slug} not found, or the token cannot see it"))
        return checks
    can_push = context.permission in ("ADMIN", "MAINTAIN", "WRITE")
    checks.append(
        (
            "GitHub repository",
            can_push,
            f"{context.name_with_owner}: the token can push"
            if can_push
            else f"{context.name_with_owner}: the token cannot push (permission "
            f"{context.permission or 'none'}); it needs write access",
        )
    )
    missing = [name for name in (APPROVED_LABEL, CHANGES_LABEL) if name not in context.label_ids]
    if not missing:
        checks.append(("GitHub review labels", True, f"{APPROVED_LABEL}, {CHANGES_LABEL}"))
    else:
        checks.append(
            (
                "GitHub review labels",
                can_push,
                f"{', '.join(missing)} missing: created at the first review"
                if can_push
                else f"{', '.join(missing)} missing, and the token cannot create labels",
            )
        )
    return checks
