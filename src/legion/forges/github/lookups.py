"""Finding pull requests: an issue's PR by its branch (`legion/<issue>`), else among the PRs
its tracker links to it (`Issue.links`: a closing keyword, a Linear attachment), in one
aliased query per `BATCH_SIZE` branches and linked PR numbers; a PR by its number; every PR
of Legion's (the open ones and the most recently closed)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from legion.core.ids import branch_for, issue_for_branch
from legion.core.marks import PULL_REQUEST_PATH
from legion.core.model import normalize_identifier
from legion.errors import BackendError, BackendErrorKind, InputError, NotFoundError
from legion.forges.github import documents as docs
from legion.forges.github.connection import RepositoryConnection
from legion.forges.github.records import (
    GitHubPullRequest,
    as_issues,
    current,
    is_legions,
    record_of,
)
from legion.github.repository import web_host

OPEN_PAGES = 20  # at most 1,000 open PRs listed: more is not a repository Legion runs
_PR_NUMBER = re.compile(r"^#?([1-9][0-9]{0,8})$")


class PullRequestLookups:
    """The reads of one repository's pull requests, each returning records."""

    def __init__(self, connection: RepositoryConnection) -> None:
        self.connection = connection

    def listed(self) -> list[GitHubPullRequest]:
        """Every open PR on a Legion branch, and the most recently updated closed or merged
        ones, by number."""
        found: dict[int, GitHubPullRequest] = {}
        for states, pages in ((["OPEN"], OPEN_PAGES), (["MERGED", "CLOSED"], 1)):
            after: str | None = None
            for _ in range(pages):
                repo = self.connection.data(
                    docs.PULL_REQUEST_PAGE,
                    {"states": states, "first": docs.PAGE_SIZE, "after": after},
                )
                connection = repo["pullRequests"]
                for node in connection.get("nodes") or []:
                    if is_legions(node) and issue_for_branch(node["headRefName"]):
                        record = record_of(node)
                        found[record.pr.number] = record
                page = connection.get("pageInfo") or {}
                if not page.get("hasNextPage"):
                    break
                after = page.get("endCursor")
        return [found[number] for number in sorted(found)]

    def by_issue(
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
            record = current(by_branch.get(branch, []))
            if record is not None:
                found[issue] = record
        for issue, numbers in linked.items():
            if issue in found:
                continue  # Legion's own branch has a PR: a link only fills in for none
            records = [record for n in numbers if (record := by_number.get(n)) is not None]
            record = current(sorted(records, key=lambda r: r.pr.number, reverse=True))
            if record is not None:
                found[issue] = as_issues(record, issue)
        return found

    def find(self, ref: str) -> GitHubPullRequest:
        """The PR `ref` names: a number (`12`, `#12`), else an issue (its current PR)."""
        match = _PR_NUMBER.fullmatch(ref.strip())
        if match is not None:
            return self.by_number(int(match.group(1)))
        identifier = normalize_identifier(ref)
        record = self.by_issue([identifier]).get(identifier)
        if record is None:
            raise NotFoundError(f"{identifier} has no pull request")
        return record

    def by_number(self, number: int) -> GitHubPullRequest:
        try:
            repo = self.connection.data(docs.PULL_REQUEST_BY_NUMBER, {"number": number})
        except BackendError as exc:
            if exc.kind is not BackendErrorKind.NOT_FOUND:
                raise
            repo = {}
        node = repo.get("pullRequest")
        if not isinstance(node, dict):
            raise NotFoundError(f"no pull request #{number} in {self.connection.slug}")
        return record_of(node)

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
            repo = self.connection.data(
                docs.pr_batch_document(len(chunk_branches), len(chunk_numbers)), variables
            )
            for k, branch in enumerate(chunk_branches):
                nodes = (repo.get(f"i{k}") or {}).get("nodes") or []
                # A PR that vanished mid-answer is a null node: that issue has no PR.
                by_branch[branch] = [record_of(node) for node in nodes if is_legions(node)]
            for k, number in enumerate(chunk_numbers):
                node = repo.get(f"p{k}")  # null: no such PR (NOT_FOUND), or an issue's number
                if is_legions(node):
                    by_number[number] = record_of(node)
        return by_branch, by_number

    def _linked_numbers(self, urls: Collection[str]) -> list[int]:
        """The numbers of the PRs of this repository among `urls` (on GitHub's web host, or
        github.com), each once."""
        if not urls:
            return []
        owner, name = (part.casefold() for part in self.connection.repository)
        hosts = {web_host(self.connection.project.env), "github.com"}
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
