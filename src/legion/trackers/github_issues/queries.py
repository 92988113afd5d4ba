"""Reading one repository's issues as GitHub's nodes: one issue by its identifier (with the
issues that mention it), every page of a listing, every page of an issue's comments. Pull
requests share the issues' numbers but are not issues: asking for one is "not found"."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from legion.core.model import Status
from legion.errors import InputError, NotFoundError
from legion.graphql_client import next_cursor
from legion.trackers.github_issues import documents as docs
from legion.trackers.github_issues.catalog import RepositoryCatalog
from legion.trackers.github_issues.identifiers import IssueKeys
from legion.trackers.github_issues.nodes import IssueNode
from legion.trackers.graphql import paged, paged_back

DONE_PAGES = 5  # `list_issues(status=Done)`: the 500 most recently updated closed issues


@dataclass
class IssueQueries:
    """The reads of the repository's issues; each returns GitHub's nodes, as asked for."""

    catalog: RepositoryCatalog
    keys: IssueKeys
    with_project: bool  # the nodes carry their project items

    def fetch(self, identifier: str) -> IssueNode:
        """The issue's node, with the issues that mention it."""
        normalized, number = self.keys.number(identifier)
        repo = self.catalog.repository_data(
            docs.ISSUE, {"number": number, "withProject": self.with_project}
        )
        node = repo.get("issueOrPullRequest")
        if not isinstance(node, dict):
            raise self.keys.not_found(normalized)
        if node.get("__typename") != "Issue":
            raise NotFoundError(
                f"{normalized} is pull request #{number} of {self.keys.slug}, not an issue"
            )
        return node

    def blocker(self, identifier: str, blocked: str) -> IssueNode:
        """The node of a blocker of `blocked`; one that is not an issue here is bad input."""
        try:
            return self.fetch(identifier)
        except NotFoundError:
            raise InputError(
                f"no issue {identifier.strip().upper()} in {self.keys.slug} to block {blocked} "
                "(see `legion issue list`)"
            ) from None

    def listing(self, status: Status | None, labels: list[str] | None) -> Iterator[IssueNode]:
        """The nodes of a listing: every open issue and, in the first request, the most
        recently closed ones (the workspace sweep needs them); with Done, closed issues only,
        most recently updated first, at most `DONE_PAGES` pages. An issue closed while the
        pages were read may come twice."""
        pages: int | None = None  # open issues: every page
        states, order = ["OPEN"], {"field": "CREATED_AT", "direction": "ASC"}
        if status is Status.DONE:
            states, order = ["CLOSED"], {"field": "UPDATED_AT", "direction": "DESC"}
            pages = DONE_PAGES
        recently_closed = status is None  # Done issues come along, for the workspace sweep
        after: str | None = None
        read = 0
        while True:
            repo = self.catalog.repository_data(
                docs.ISSUE_PAGE,
                {
                    "states": states,
                    "order": order,
                    "labels": labels,
                    "after": after,
                    "withProject": self.with_project,
                    "withRecentlyClosed": recently_closed,
                },
            )
            read += 1
            connection = repo["issues"]
            yield from (node for node in connection["nodes"] if node)
            if recently_closed:
                yield from (node for node in repo["recentlyClosed"]["nodes"] if node)
                recently_closed = False
            after = next_cursor(connection)
            if after is None or (pages is not None and read >= pages):
                return

    def comments(self, identifier: str, newest: int | None = None) -> list[dict[str, Any]]:
        """The comment nodes of issue `identifier` (KEY-N, normalized), oldest first: every
        one, or (`newest`) only that many of the latest, read from the end."""
        _, number = self.keys.number(identifier)

        def fetch(variables: dict[str, Any]) -> Mapping[str, Any]:
            repo = self.catalog.repository_data(docs.COMMENTS, {"number": number, **variables})
            issue = repo.get("issue")
            if not isinstance(issue, dict):
                raise self.keys.not_found(identifier)
            connection: Mapping[str, Any] = issue["comments"]
            return connection

        size = docs.COMMENT_PAGE_SIZE
        if newest is None:
            return list(paged(lambda after: fetch({"first": size, "after": after}), "github"))
        return paged_back(
            lambda before, last: fetch({"last": last, "before": before}), newest, size, "github"
        )
