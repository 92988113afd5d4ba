"""GitHub Issues as Legion's tracker: one repository's issues, over GitHub's GraphQL API.

Identifiers: Legion's identifiers are KEY-N. GitHub issue number N is `KEY-N`, KEY being the
project's `issue_key` (`legion init --tracker github` sets it from the repository's name:
WIDGETS-12 is issue #12 of acme/widgets). `Issue.id` is the issue's node id, `Issue.url` its
page. Pull requests share the issues' numbers but are not issues: lists skip them, and asking
for one by number is "not found".

Status, with `github_project = N`: the issue's item in Projects (v2) board N of the
repository's owner, its single-select field `Status`; without a project, a label
`status: <name>`, exactly one (see `statuses.py`, which keeps both). Option names map through
the `[statuses]` table, then Legion's names and aliases ("Todo", "In Progress" and "Done" are
GitHub's defaults; "In Review" is Needs Review). An issue is Done exactly when it is closed. An
open issue whose status maps to no Legion status (an option "Blocked" nobody mapped) is not
Legion's: lists skip it and `get_issue` reports it as not found.

Reads: `list_issues` reads every open issue (100 per request, each with its first 50 labels)
and, in the first request, the 100 most recently updated closed ones (Done: the workspace
sweep needs them), so N open issues cost max(1, ceil(N / 100)) requests (with a project, one
more for the project's options when the cache below is stale). With `status=Done` it reads
closed issues only, most recently updated first, at most `queries.DONE_PAGES` pages. Comments
are read on demand, every page. Each issue comes with the first 5 pull requests whose body closes
it ("Fixes #12"): `Issue.links`, how the forge finds a PR on a branch not named for the issue.

Sub-issues: GitHub's published schema has no sub-issue fields yet, so a sub-issue's body ends
with the line `Parent: KEY-N (#N)` (the `#N` makes GitHub link the two). `Issue.body` comes
without that line and `Issue.parent` from it; `children` are, in a list, the listed issues
naming the issue as parent, and for `get_issue` the issues that mention it (its timeline's
cross-references, first 50) whose line names it.

Blocked by: GitHub's published GraphQL schema Legion is tested against (`@octokit/graphql-schema`
15.26.1) has no issue-dependency API (no `blockedBy` on `Issue`), so an issue's blockers are
lines `Blocked by #N` in its body, one per blocker, anywhere in the body and in any case
(`Blocked by WIDGETS-12` is read too): a person sets one by editing the body on GitHub.
`Issue.blocked_by` comes from them, in order; `Issue.body` comes without the run of them that
ends it (before the `Parent:` line), where Legion writes them. Setting blockers edits the body:
a fresh read, then the whole body sent back, so an edit a person makes in between is lost.

The repository's id, its labels and the project's field and options are cached in
`github-issues-OWNER-NAME.json` in the project's state folder (0600) for ten minutes, and
refetched sooner (at most once a minute) when a label or an option Legion needs is not in it.
Writes send only what changes: labels with `addLabelsToLabelable`/`removeLabelsFromLabelable`,
never clobbering a label a person set; comments carry Legion's marker.

A comment's author is the name in Legion's marker for the comments Legion wrote (every one is
written with the same token), else the GitHub login.

Not handled: GitHub's `createIssue` and `addComment` take no id of the caller's, so when the
answer to one is lost (a timeout) and the shared client retries it, the issue or comment may
be written twice.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legion.config import Project
from legion.core.marks import pull_request_links
from legion.core.model import Status
from legion.core.statusmap import StatusMap
from legion.core.text import clean_body, clean_title
from legion.errors import BackendError, BackendErrorKind, NotFoundError
from legion.github.settings import GitHubSettings
from legion.graphql_client import Document, GraphQLClient
from legion.trackers.base import Comment, Issue, blocker_change
from legion.trackers.github_issues import documents as docs
from legion.trackers.github_issues.body import (
    blocker_numbers,
    inert_relations,
    split_blockers,
    split_parent,
    with_blockers,
    with_parent,
)
from legion.trackers.github_issues.catalog import RepositoryCatalog
from legion.trackers.github_issues.identifiers import IssueKeys
from legion.trackers.github_issues.labels import IssueLabels
from legion.trackers.github_issues.nodes import (
    IssueNode,
    children,
    closing_pr_urls,
    has_label,
    label_nodes,
    to_comment,
)
from legion.trackers.github_issues.queries import IssueQueries
from legion.trackers.github_issues.repository import RepositoryInfo
from legion.trackers.github_issues.statuses import status_store
from legion.trackers.graphql import (
    CACHE_TTL_S,
    GraphQLTracker,
    comment_text,
    edit_legions_comment,
)


@dataclass
class GitHubIssuesTracker(GraphQLTracker):
    """The `Tracker` protocol over one GitHub repository's issues: the repository as known
    (`catalog`), reads (`queries`), labels (`issue_labels`) and the status (`status_store`)
    each have their own part. The client is made at the first request (`connect`), so
    opening the tracker costs nothing."""

    connect: Callable[[], GraphQLClient]
    owner: str
    name: str
    issue_key: str
    statuses: StatusMap = field(default_factory=StatusMap)
    extra_labels: tuple[str, ...] = ()
    project_number: int | None = None
    cache_path: Path | None = None  # None: the repository is cached in memory only
    clock: Callable[[], float] = time.time
    _client: GraphQLClient | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.issue_key = self.issue_key.strip().upper()
        self._accept_labels(self.extra_labels)
        self.catalog = RepositoryCatalog(
            lambda: self.client,
            self.owner,
            self.name,
            self.project_number,
            self.cache_path,
            self._now,
        )
        self.keys = IssueKeys(self.issue_key, self.slug)
        self.queries = IssueQueries(self.catalog, self.keys, self.uses_project)
        self.issue_labels = IssueLabels(self.catalog, self._request, self.uses_project)
        self.status_store = status_store(
            self.project_number, self.statuses, self.catalog, self._request, self.issue_labels
        )

    def _now(self) -> float:
        # Asked each time: the clock may be replaced after the tracker is made (tests do).
        return self.clock()

    @property
    def client(self) -> GraphQLClient:
        if self._client is None:
            self._client = self.connect()
        return self._client

    def _api(self) -> GraphQLClient:
        return self.client

    @property
    def slug(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def uses_project(self) -> bool:
        return self.project_number is not None

    def info(self, *, max_age: float = CACHE_TTL_S) -> RepositoryInfo:
        """The repository, its labels and the project: from memory, the cache file, or GitHub.
        `max_age=0` always asks GitHub, even within the clock's resolution."""
        return self.catalog.info(max_age)

    # -- reading -------------------------------------------------------------------------------

    def list_issues(self, *, status: Status | None = None, label: str | None = None) -> list[Issue]:
        if self.uses_project:
            self.info()  # the project's id and options first: a wrong setting fails here
        labels: list[str] | None = None
        if label is not None:
            found = self.catalog.label(self._known_label(label))
            if found is None:
                return []  # no such label in the repository: no issue carries it
            labels = [found]
        nodes: dict[int, IssueNode] = {}
        for node in self.queries.listing(status, labels):
            number = int(node["number"])
            # An issue closed while the pages were read may come twice: the newer one counts.
            if number not in nodes or node["updatedAt"] >= nodes[number]["updatedAt"]:
                nodes[number] = node
        children_of: dict[int, list[int]] = {}
        for node in nodes.values():
            parent = split_parent(node.get("body") or "")[1]
            if parent is not None:
                children_of.setdefault(parent, []).append(int(node["number"]))
        found_issues: list[Issue] = []
        for number in sorted(nodes):
            issue = self._to_issue(nodes[number], children_of.get(number, ()))
            if issue is None or (status is not None and issue.status is not status):
                continue
            if labels is not None and not has_label(nodes[number], labels[0]):
                continue
            found_issues.append(issue)
        return found_issues

    def get_issue(self, identifier: str) -> Issue:
        node = self.queries.fetch(identifier)
        return self._mapped(node, children(node))

    def list_comments(self, identifier: str, *, newest: int | None = None) -> list[Comment]:
        normalized, _ = self.keys.number(identifier)
        nodes = self.queries.comments(normalized, newest)
        comments = [to_comment(node, normalized) for node in nodes]
        comments.sort(key=lambda comment: comment.created_at)
        return comments

    # -- writing -------------------------------------------------------------------------------

    def create_issue(
        self,
        title: str,
        *,
        body: str = "",
        status: Status = Status.TODO,
        labels: Iterable[str] = (),
        parent: str | None = None,
        blocked_by: Iterable[str] = (),
    ) -> Issue:
        title = clean_title(title)
        body = inert_relations(clean_body(body))
        label_names = sorted({self._known_label(name) for name in labels})
        blockers = [
            int(self.queries.blocker(name, "the new issue")["number"]) for name in blocked_by
        ]
        if parent is not None:
            parent_node = self.queries.fetch(parent)
            body = with_parent(body, self.issue_key, int(parent_node["number"]))
        if blockers:
            body = with_blockers(body, blockers)
        if parent is not None or blockers:
            clean_body(body)  # still within GitHub's limit with the lines
        target = self.status_store.target(status)  # before anything is written: a missing option
        label_ids = [self.catalog.label_id(name) for name in label_names]
        label_ids += [
            self.catalog.label_id(name) for name in self.status_store.labels_at_creation(target)
        ]
        info = self.info()
        data = self.client.execute(
            docs.CREATE_ISSUE,
            {
                "repositoryId": info.id,
                "title": title,
                "body": body,
                "labelIds": label_ids,
                "withProject": self.uses_project,
            },
        )
        node: IssueNode = data["createIssue"]["issue"]
        return self._mapped(self.status_store.after_creation(node, status, target))

    def set_status(self, identifier: str, status: Status) -> Issue:
        node = self.queries.fetch(identifier)
        sub_issues = children(node)
        return self._mapped(self.status_store.set(node, status), sub_issues)

    def edit_issue(
        self, identifier: str, *, title: str | None = None, body: str | None = None
    ) -> Issue:
        new_title = clean_title(title) if title is not None else None
        text = inert_relations(clean_body(body)) if body is not None else None
        node = self.queries.fetch(identifier)
        sub_issues = children(node)
        me = self.keys.of(node)
        if new_title is not None and new_title != node.get("title"):
            data = self._execute_for(
                me,
                docs.UPDATE_ISSUE_TITLE,
                {"id": node["id"], "title": new_title, "withProject": self.uses_project},
            )
            node = data["updateIssue"]["issue"]
        if text is not None:
            # Legion's lines stay: the parent and the blockers are set by their own commands.
            raw = node.get("body") or ""
            parent = split_parent(raw)[1]
            if parent is not None:
                text = with_parent(text, self.issue_key, parent)
            blockers = blocker_numbers(raw)
            if blockers:
                text = with_blockers(text, blockers)
            clean_body(text)  # still within GitHub's limit with the lines
            if text != raw:
                data = self._execute_for(
                    me,
                    docs.UPDATE_ISSUE_BODY,
                    {"id": node["id"], "body": text, "withProject": self.uses_project},
                )
                node = data["updateIssue"]["issue"]
        return self._mapped(node, sub_issues)

    def update_labels(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        to_add, to_remove = self._label_change(add, remove)
        # A fresh read: only what changes is sent, and removal uses the issue's own label ids.
        node = self.queries.fetch(identifier)
        sub_issues = children(node)
        return self._mapped(self.issue_labels.change(node, to_add, to_remove), sub_issues)

    def set_blocked_by(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        node = self.queries.fetch(identifier)
        sub_issues = children(node)
        me = self.keys.of(node)
        raw = node.get("body") or ""
        current = set(blocker_numbers(raw))
        wanted = [self.keys.blocker_number(name, me) for name in add]
        graph: dict[str, tuple[str, ...]] = {}
        if any(number not in current for number in wanted):
            # The relation as it stands, for the cycle check: one listing.
            graph = {issue.identifier: issue.blocked_by for issue in self.list_issues()}
        to_add, to_remove = blocker_change(me, add, remove, graph)
        added = [
            int(self.queries.blocker(name, me)["number"])
            for name in to_add
            if self.keys.blocker_number(name, me) not in current
        ]
        removed = {self.keys.blocker_number(name, me) for name in to_remove} & current
        if not added and not removed:
            return self._mapped(node, sub_issues)
        body = clean_body(with_blockers(raw, added, removed))
        data = self._execute_for(
            me,
            docs.UPDATE_ISSUE_BODY,
            {"id": node["id"], "body": body, "withProject": self.uses_project},
        )
        return self._mapped(data["updateIssue"]["issue"], sub_issues)

    def add_comment(
        self, identifier: str, body: str, *, author: str, by_legion: bool = False
    ) -> Comment:
        body = comment_text(body, author, by_legion=by_legion)
        node = self.queries.fetch(identifier)
        normalized = self.keys.of(node)
        data = self._execute_for(normalized, docs.ADD_COMMENT, {"id": node["id"], "body": body})
        edge = data["addComment"].get("commentEdge") or {}
        created = edge.get("node")
        if not isinstance(created, dict):
            raise BackendError(
                "github",
                BackendErrorKind.INVALID,
                "the comment was not created",
                operation=docs.ADD_COMMENT.name,
            )
        return to_comment(created, normalized)

    def edit_comment(
        self, identifier: str, comment_id: int | str, body: str, *, author: str
    ) -> Comment:
        node = self.queries.fetch(identifier)
        normalized = self.keys.of(node)
        edited = edit_legions_comment(
            self._api(),
            docs.COMMENT_EDIT,
            str(comment_id),
            comment_text(body, author, by_legion=True),
            issue=normalized,
            expected=str(node["number"]),
            by_legion=lambda comment: to_comment(comment, normalized).by_legion,
        )
        return to_comment(edited, normalized)

    # -- requests and nodes --------------------------------------------------------------------

    def _not_found(self, identifier: str) -> NotFoundError:
        return self.keys.not_found(identifier)

    def _request(
        self, node: Mapping[str, Any], doc: Document, variables: Mapping[str, Any]
    ) -> dict[str, Any]:
        """`doc` about the issue `node`: "not found" is that issue's."""
        return self._execute_for(self.keys.of(node), doc, variables)

    def _to_issue(self, node: Mapping[str, Any], sub_issues: Iterable[int] = ()) -> Issue | None:
        """The issue, or None when its status maps to no Legion status (not Legion's)."""
        status, backend_status = self.status_store.status_of(node)
        if status is None:
            return None
        raw = node.get("body") or ""
        body, parent = split_parent(raw)
        body = split_blockers(body)
        labels = frozenset(
            self._canonical_label(label["name"])
            for label in label_nodes(node)
            if self.status_store.shows_label(label["name"])
        )
        identifier = self.keys.identifier
        return Issue(
            identifier=self.keys.of(node),
            title=node["title"],
            body=body,
            status=status,
            labels=labels,
            parent=identifier(parent) if parent is not None else None,
            children=tuple(identifier(n) for n in sorted(set(sub_issues))),
            created_at=node.get("createdAt") or "",
            updated_at=node.get("updatedAt") or "",
            id=node["id"],
            url=node.get("url") or "",
            backend_status=backend_status,
            links=pull_request_links(closing_pr_urls(node)),
            blocked_by=tuple(identifier(number) for number in blocker_numbers(raw)),
        )

    def _mapped(self, node: Mapping[str, Any], sub_issues: Iterable[int] = ()) -> Issue:
        issue = self._to_issue(node, sub_issues)
        if issue is None:
            name = self.status_store.status_of(node)[1]
            raise NotFoundError(
                f"{self.keys.of(node)} has the status {name!r}, which is not Legion's (map it "
                f'in the [statuses] table of .legion/config.toml, e.g. "{name}" = "Backlog", '
                "to use it)"
            )
        return issue


def _cache_name(owner: str, name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", f"github-issues-{owner}-{name}") + ".json"


def open_tracker(
    project: Project, db: object = None, *, client: GraphQLClient | None = None
) -> GitHubIssuesTracker:
    """The registry's opener (`legion.backends`). `db` is not used: GitHub holds the issues.
    The token is looked up at the first request."""
    from legion.github.client import github_client
    from legion.github.repository import repository_name

    settings = project.settings
    owner, name = repository_name(project)

    def connect() -> GraphQLClient:
        return client if client is not None else github_client(project.env)

    return GitHubIssuesTracker(
        connect,
        owner=owner,
        name=name,
        issue_key=settings.issue_key,
        statuses=StatusMap(settings.statuses),
        extra_labels=settings.labels,
        project_number=settings.section(GitHubSettings).project,
        cache_path=project.state_dir / _cache_name(owner, name),
    )
