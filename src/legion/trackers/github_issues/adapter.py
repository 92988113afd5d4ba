"""GitHub Issues as Legion's tracker: one repository's issues, over GitHub's GraphQL API.

Identifiers: Legion's identifiers are KEY-N. GitHub issue number N is `KEY-N`, KEY being the
project's `issue_key` (`legion init --tracker github` sets it from the repository's name:
WIDGETS-12 is issue #12 of acme/widgets). `Issue.id` is the issue's node id, `Issue.url` its
page. Pull requests share the issues' numbers but are not issues: lists skip them, and asking
for one by number is "not found".

Status, with `github_project = N`: the issue's item in Projects (v2) board N of the
repository's owner, its single-select field `Status`. Option names map through the
`[statuses]` table, then Legion's names and aliases ("Todo", "In Progress" and "Done" are
GitHub's defaults; "In Review" is Needs Review). Setting a status sets the item's field,
adding the issue to the project first when it is not in it. Without a project: a label
`status: <name>` (`status: In Progress`), exactly one; setting a status removes the other
`status:` labels and adds the new one, creating it in the repository once if missing. Those
labels are the status, so `Issue.labels` leaves them out.

Open and closed: an issue is Done exactly when it is closed. Moving to Done closes it (then
sets the field or label), moving out of Done sets the field or label, then reopens it: an
interruption between the two leaves a closed issue, Done, that the next `set_status` repairs.
An open issue without a status, or whose status says Done (a person reopened it), is Triage,
so the controller triages it; one with several `status:` labels of different statuses is
Triage too. An open issue whose status maps to no Legion status (an option "Blocked" nobody
mapped) is not Legion's: lists skip it and `get_issue` reports it as not found. Setting
Triage when no status maps to it clears the status.

Reads: `list_issues` reads every open issue (100 per request, each with its first 50 labels)
and, in the first request, the 100 most recently updated closed ones (Done: the workspace
sweep needs them), so N open issues cost max(1, ceil(N / 100)) requests (with a project, one
more for the project's options when the cache below is stale). With `status=Done` it reads
closed issues only, most recently updated first, at most `DONE_PAGES` pages. Comments are
read on demand, every page. Each issue comes with the first 5 pull requests whose body closes
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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legion.config import Project
from legion.core.marks import pull_request_links, unmark
from legion.core.model import Status, fold_name, parse_identifier
from legion.core.statusmap import StatusMap
from legion.core.text import clean_body, clean_title
from legion.errors import (
    BackendError,
    BackendErrorKind,
    ConfigError,
    InputError,
    NotFoundError,
)
from legion.github.settings import GitHubSettings
from legion.graphql_client import Document, GraphQLClient, next_cursor
from legion.trackers.base import (
    Comment,
    Issue,
    blocker_change,
)
from legion.trackers.github_issues import documents as docs
from legion.trackers.github_issues.body import (
    blocker_numbers,
    split_blockers,
    split_parent,
    with_blockers,
    with_parent,
)
from legion.trackers.github_issues.catalog import RepositoryCatalog
from legion.trackers.github_issues.repository import (
    RepositoryInfo,
    status_label,
    status_of_label,
)
from legion.trackers.graphql import (
    CACHE_TTL_S,
    RECHECK_S,
    GraphQLTracker,
    comment_text,
    paged,
)

DONE_PAGES = 5  # `list_issues(status=Done)`: the 500 most recently updated closed issues


@dataclass
class GitHubIssuesTracker(GraphQLTracker):
    """The `Tracker` protocol over one GitHub repository's issues. The client is made at the
    first request (`connect`), so opening the tracker costs nothing."""

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
        nodes: dict[int, dict[str, Any]] = {}
        for node in self._issue_nodes(status, labels):
            number = int(node["number"])
            # An issue closed while the pages were read may come twice: the newer one counts.
            if number not in nodes or node["updatedAt"] >= nodes[number]["updatedAt"]:
                nodes[number] = node
        children: dict[int, list[int]] = {}
        for node in nodes.values():
            parent = split_parent(node.get("body") or "")[1]
            if parent is not None:
                children.setdefault(parent, []).append(int(node["number"]))
        found_issues: list[Issue] = []
        for number in sorted(nodes):
            issue = self._to_issue(nodes[number], children.get(number, ()))
            if issue is None or (status is not None and issue.status is not status):
                continue
            if labels is not None and not _has_label(nodes[number], labels[0]):
                continue
            found_issues.append(issue)
        return found_issues

    def get_issue(self, identifier: str) -> Issue:
        node = self._fetch(identifier)
        return self._mapped(node, _children(node))

    def list_comments(self, identifier: str) -> list[Comment]:
        normalized, number = self._number(identifier)

        def page(after: str | None) -> Mapping[str, Any]:
            repo = self._repository_data(docs.COMMENTS, {"number": number, "after": after})
            issue = repo.get("issue")
            if not isinstance(issue, dict):
                raise self._not_found(normalized)
            connection: Mapping[str, Any] = issue["comments"]
            return connection

        comments = [self._to_comment(node, normalized) for node in paged(page)]
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
        body = clean_body(body)
        label_names = sorted({self._known_label(name) for name in labels})
        blockers = [int(self._blocker(name, "the new issue")["number"]) for name in blocked_by]
        if parent is not None:
            parent_node = self._fetch(parent)
            body = with_parent(body, self.issue_key, int(parent_node["number"]))
        if blockers:
            body = with_blockers(body, blockers)
        if parent is not None or blockers:
            clean_body(body)  # still within GitHub's limit with the lines
        target = self._status_target(status)  # before anything is written: a missing option
        label_ids = [self.catalog.label_id(name) for name in label_names]
        if target is not None and not self.uses_project:
            label_ids.append(self.catalog.label_id(status_label(target)))
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
        node: dict[str, Any] = data["createIssue"]["issue"]
        if target is not None and self.uses_project:
            node = self._write_project_status(node, status, target)
        if status is Status.DONE:
            node = self._set_open(node, open_=False)
        return self._mapped(node)

    def set_status(self, identifier: str, status: Status) -> Issue:
        node = self._fetch(identifier)
        children = _children(node)
        target = self._status_target(status)  # a status with no option fails before any write
        if status is Status.DONE and node["state"] == "OPEN":
            node = self._set_open(node, open_=False)
        if self.uses_project:
            node = self._write_project_status(node, status, target)
        else:
            node = self._write_status_label(node, status, target)
        if status is not Status.DONE and node["state"] == "CLOSED":
            node = self._set_open(node, open_=True)
        return self._mapped(node, children)

    def update_labels(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        to_add = {self._known_label(name) for name in add}
        to_remove = {self._known_label(name) for name in remove}
        both = to_add & to_remove
        if both:
            raise InputError(f"label {sorted(both)[0]!r} is both added and removed")
        # A fresh read: only what changes is sent, and removal uses the issue's own label ids.
        node = self._fetch(identifier)
        children = _children(node)
        current = {label["name"].casefold(): label["id"] for label in _label_nodes(node)}
        added = [name for name in sorted(to_add) if name.casefold() not in current]
        removed = [current[n.casefold()] for n in sorted(to_remove) if n.casefold() in current]
        if added:
            node = self._add_labels(node, added)
        if removed:
            node = self._remove_labels(node, removed)
        return self._mapped(node, children)

    def set_blocked_by(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        node = self._fetch(identifier)
        children = _children(node)
        me = self._identifier(int(node["number"]))
        raw = node.get("body") or ""
        current = set(blocker_numbers(raw))
        wanted = [self._blocker_number(name, me) for name in add]
        graph: dict[str, tuple[str, ...]] = {}
        if any(number not in current for number in wanted):
            # The relation as it stands, for the cycle check: one listing.
            graph = {issue.identifier: issue.blocked_by for issue in self.list_issues()}
        to_add, to_remove = blocker_change(me, add, remove, graph)
        added = [
            int(self._blocker(name, me)["number"])
            for name in to_add
            if self._blocker_number(name, me) not in current
        ]
        removed = {self._blocker_number(name, me) for name in to_remove} & current
        if not added and not removed:
            return self._mapped(node, children)
        body = clean_body(with_blockers(raw, added, removed))
        data = self._execute_for(
            me,
            docs.UPDATE_ISSUE_BODY,
            {"id": node["id"], "body": body, "withProject": self.uses_project},
        )
        return self._mapped(data["updateIssue"]["issue"], children)

    def add_comment(
        self, identifier: str, body: str, *, author: str, by_legion: bool = False
    ) -> Comment:
        body = comment_text(body, author, by_legion=by_legion)
        node = self._fetch(identifier)
        normalized = self._identifier(int(node["number"]))
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
        return self._to_comment(created, normalized)

    # -- the repository, its labels and the project ----------------------------------------------

    def info(self, *, max_age: float = CACHE_TTL_S) -> RepositoryInfo:
        """The repository, its labels and the project: from memory, the cache file, or GitHub.
        `max_age=0` always asks GitHub, even within the clock's resolution."""
        return self.catalog.info(max_age)

    # -- status --------------------------------------------------------------------------------

    def backend_status_names(self, info: RepositoryInfo) -> list[str]:
        """The status names the backend has (or, with labels, Legion may create) for `status`,
        the existing ones first. Triage is left out: no status is Triage."""
        if info.project is not None:
            return info.project.option_names()
        names = [*info.status_label_names(), *self.statuses.table]
        for status in Status:
            if status is not Status.TRIAGE:
                names.append(status.value)
        unique: dict[str, str] = {}
        for name in names:
            unique.setdefault(fold_name(name), name)
        return list(unique.values())

    def _status_target(self, status: Status) -> str | None:
        """The backend's name for `status`; None for Triage when no name maps to it (the
        status is cleared). A status with no option is a ConfigError that says what to do."""
        try:
            return self.statuses.to_backend(status, self.backend_status_names(self.info()))
        except ConfigError:
            if status is Status.TRIAGE:
                return None  # no status is Triage: nothing to look for
            try:
                # An option added since the cache was read.
                fresh = self.info(max_age=RECHECK_S)
                return self.statuses.to_backend(status, self.backend_status_names(fresh))
            except ConfigError as exc:
                if self.uses_project:
                    raise self._missing_option(status) from None
                raise exc from None

    def _missing_option(self, status: Status) -> ConfigError:
        project = self.info().project
        assert project is not None
        options = ", ".join(project.option_names())
        return ConfigError(
            f"the {docs.STATUS_FIELD} field of GitHub project {project.number} has no option "
            f"for {status.value!r} (it has: {options}): add an option {status.value!r} to the "
            f"field, or map one in the [statuses] table of .legion/config.toml, e.g. "
            f'"{project.option_names()[0]}" = "{status.value}"'
        )

    def _status_of(self, node: Mapping[str, Any]) -> tuple[Status | None, str]:
        """(the issue's Legion status or None when it is not Legion's, the backend's name)."""
        names = self._status_names(node)
        closed = node["state"] == "CLOSED"
        mapped = [(name, self.statuses.to_legion(name)) for name in names]
        statuses = {status for _, status in mapped if status is not None}
        if closed:
            done = next((name for name, status in mapped if status is Status.DONE), "Closed")
            return Status.DONE, done
        if not names:
            return Status.TRIAGE, ""
        if not statuses:
            return None, names[0]
        if len(statuses) > 1:
            return Status.TRIAGE, ", ".join(names)  # contradicting labels: someone decides
        status = statuses.pop()
        name = next(name for name, mapped_status in mapped if mapped_status is status)
        return (Status.TRIAGE if status is Status.DONE else status), name

    def _status_names(self, node: Mapping[str, Any]) -> list[str]:
        """The status names the issue carries: its option in the project, or its labels'."""
        if not self.uses_project:
            return [s for label in _label_nodes(node) if (s := status_of_label(label["name"]))]
        item = self._project_item(node)
        if item is None:
            return []
        value = item.get("fieldValueByName") or {}
        name = value.get("name")
        return [name] if name else []

    def _project_item(self, node: Mapping[str, Any]) -> dict[str, Any] | None:
        project = self.info().project
        assert project is not None
        for item in (node.get("projectItems") or {}).get("nodes") or []:
            if item and (item.get("project") or {}).get("id") == project.id:
                found: dict[str, Any] = item
                return found
        return None

    def _write_status_label(
        self, node: dict[str, Any], status: Status, target: str | None
    ) -> dict[str, Any]:
        current = [
            (label["name"], label["id"])
            for label in _label_nodes(node)
            if status_of_label(label["name"]) is not None
        ]
        if len(current) == 1:
            carried = status_of_label(current[0][0]) or ""
            if self.statuses.to_legion(carried) is status:
                return node  # already there, under whichever name maps to it
        wanted = status_label(target) if target is not None else None
        keep = wanted is not None and any(n.casefold() == wanted.casefold() for n, _ in current)
        if wanted is not None and not keep:
            node = self._add_labels(node, [wanted])
        stale = [i for n, i in current if wanted is None or n.casefold() != wanted.casefold()]
        if stale:
            node = self._remove_labels(node, stale)
        return node

    def _write_project_status(
        self, node: dict[str, Any], status: Status, target: str | None
    ) -> dict[str, Any]:
        project = self.info().project
        assert project is not None
        item = self._project_item(node)
        carried = self._status_names(node)
        if carried and self.statuses.to_legion(carried[0]) is status:
            return node  # already there
        identifier = self._identifier(int(node["number"]))
        if target is None:
            if item is None or not carried:
                return node  # no status already
            data = self._execute_for(
                identifier,
                docs.CLEAR_PROJECT_STATUS,
                {
                    "projectId": project.id,
                    "itemId": item["id"],
                    "fieldId": project.field_id,
                    "withProject": True,
                },
            )
            return _item_issue(data["clearProjectV2ItemFieldValue"], docs.CLEAR_PROJECT_STATUS)
        if item is None:
            added = self._execute_for(
                identifier,
                docs.ADD_PROJECT_ITEM,
                {"projectId": project.id, "contentId": node["id"]},
            )
            item_id = added["addProjectV2ItemById"]["item"]["id"]
        else:
            item_id = item["id"]
        data = self._execute_for(
            identifier,
            docs.SET_PROJECT_STATUS,
            {
                "projectId": project.id,
                "itemId": item_id,
                "fieldId": project.field_id,
                "optionId": project.option_id(target),
                "withProject": True,
            },
        )
        return _item_issue(data["updateProjectV2ItemFieldValue"], docs.SET_PROJECT_STATUS)

    def _set_open(self, node: Mapping[str, Any], *, open_: bool) -> dict[str, Any]:
        doc, mutation = (
            (docs.REOPEN_ISSUE, "reopenIssue") if open_ else (docs.CLOSE_ISSUE, "closeIssue")
        )
        data = self._execute_for(
            self._identifier(int(node["number"])),
            doc,
            {"id": node["id"], "withProject": self.uses_project},
        )
        issue: dict[str, Any] = data[mutation]["issue"]
        return issue

    # -- labels --------------------------------------------------------------------------------

    def _add_labels(self, node: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
        ids = [self.catalog.label_id(name) for name in names]
        try:
            return self._labels_mutation(docs.ADD_LABELS, "addLabelsToLabelable", node, ids)
        except NotFoundError:
            # A label deleted since it was cached: look the ids up (or create them) once more.
            self.info(max_age=0)
            ids = [self.catalog.label_id(name) for name in names]
            return self._labels_mutation(docs.ADD_LABELS, "addLabelsToLabelable", node, ids)

    def _remove_labels(self, node: dict[str, Any], label_ids: list[str]) -> dict[str, Any]:
        """Remove labels by the ids the issue itself carries (never stale)."""
        return self._labels_mutation(
            docs.REMOVE_LABELS, "removeLabelsFromLabelable", node, label_ids
        )

    def _labels_mutation(
        self, doc: Document, mutation: str, node: Mapping[str, Any], label_ids: list[str]
    ) -> dict[str, Any]:
        data = self._execute_for(
            self._identifier(int(node["number"])),
            doc,
            {"id": node["id"], "labelIds": label_ids, "withProject": self.uses_project},
        )
        issue = (data.get(mutation) or {}).get("labelable")
        if not isinstance(issue, dict) or "number" not in issue:
            raise BackendError(
                "github",
                BackendErrorKind.INVALID,
                "the labels were not changed",
                operation=doc.name,
            )
        return issue

    # -- requests ------------------------------------------------------------------------------

    def _not_found(self, identifier: str) -> NotFoundError:
        return NotFoundError(f"no issue {identifier} in {self.slug} (see `legion issue list`)")

    def _repository_data(self, doc: Document, variables: Mapping[str, Any]) -> dict[str, Any]:
        return self.catalog.repository_data(doc, variables)

    def _issue_nodes(
        self, status: Status | None, labels: list[str] | None
    ) -> Iterator[dict[str, Any]]:
        pages: int | None = None  # open issues: every page
        states, order = ["OPEN"], {"field": "CREATED_AT", "direction": "ASC"}
        if status is Status.DONE:
            states, order = ["CLOSED"], {"field": "UPDATED_AT", "direction": "DESC"}
            pages = DONE_PAGES
        recently_closed = status is None  # Done issues come along, for the workspace sweep
        after: str | None = None
        read = 0
        while True:
            repo = self._repository_data(
                docs.ISSUE_PAGE,
                {
                    "states": states,
                    "order": order,
                    "labels": labels,
                    "after": after,
                    "withProject": self.uses_project,
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

    def _number(self, identifier: str) -> tuple[str, int]:
        """(KEY-N, N) for an identifier of this project."""
        key, number = parse_identifier(identifier)
        if key != self.issue_key:
            raise NotFoundError(
                f"{key}-{number} is not an issue of this project: its issues are "
                f"{self.issue_key}-N, for issue #N of {self.slug}"
            )
        return f"{key}-{number}", number

    def _identifier(self, number: int) -> str:
        return f"{self.issue_key}-{number}"

    def _blocker_number(self, identifier: str, blocked: str) -> int:
        try:
            return self._number(identifier)[1]
        except NotFoundError as exc:
            raise InputError(f"{exc} (a blocker of {blocked})") from None

    def _blocker(self, identifier: str, blocked: str) -> dict[str, Any]:
        """The node of a blocker of `blocked`; one that is not an issue here is bad input."""
        try:
            return self._fetch(identifier)
        except NotFoundError:
            raise InputError(
                f"no issue {identifier.strip().upper()} in {self.slug} to block {blocked} "
                "(see `legion issue list`)"
            ) from None

    def _fetch(self, identifier: str) -> dict[str, Any]:
        """The issue's node, with the issues that mention it."""
        normalized, number = self._number(identifier)
        repo = self._repository_data(
            docs.ISSUE, {"number": number, "withProject": self.uses_project}
        )
        node = repo.get("issueOrPullRequest")
        if not isinstance(node, dict):
            raise self._not_found(normalized)
        if node.get("__typename") != "Issue":
            raise NotFoundError(
                f"{normalized} is pull request #{number} of {self.slug}, not an issue"
            )
        return node

    # -- reading a node ------------------------------------------------------------------------

    def _to_issue(self, node: Mapping[str, Any], children: Iterable[int] = ()) -> Issue | None:
        """The issue, or None when its status maps to no Legion status (not Legion's)."""
        status, backend_status = self._status_of(node)
        if status is None:
            return None
        raw = node.get("body") or ""
        body, parent = split_parent(raw)
        body = split_blockers(body)
        labels = frozenset(
            self._canonical_label(label["name"])
            for label in _label_nodes(node)
            if self.uses_project or status_of_label(label["name"]) is None
        )
        return Issue(
            identifier=self._identifier(int(node["number"])),
            title=node["title"],
            body=body,
            status=status,
            labels=labels,
            parent=self._identifier(parent) if parent is not None else None,
            children=tuple(self._identifier(n) for n in sorted(set(children))),
            created_at=node.get("createdAt") or "",
            updated_at=node.get("updatedAt") or "",
            id=node["id"],
            url=node.get("url") or "",
            backend_status=backend_status,
            links=pull_request_links(_closing_pr_urls(node)),
            blocked_by=tuple(self._identifier(number) for number in blocker_numbers(raw)),
        )

    def _mapped(self, node: Mapping[str, Any], children: Iterable[int] = ()) -> Issue:
        issue = self._to_issue(node, children)
        if issue is None:
            name = self._status_of(node)[1]
            raise NotFoundError(
                f"{self._identifier(int(node['number']))} has the status {name!r}, which is not "
                f'Legion\'s (map it in the [statuses] table of .legion/config.toml, e.g. "{name}" '
                '= "Backlog", to use it)'
            )
        return issue

    def _to_comment(self, node: Mapping[str, Any], identifier: str) -> Comment:
        body, marker, asked = unmark(node.get("body") or "")
        author = node.get("author") or {}
        login = author.get("login") or "ghost"  # GitHub's deleted account
        return Comment(
            id=node["id"],
            issue=identifier,
            author=marker if marker is not None else login,
            body=body,
            created_at=node.get("createdAt") or "",
            by_legion=marker is not None,
            asked=asked,
            by_bot=author.get("__typename") == "Bot",
        )


def _label_nodes(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [label for label in (node.get("labels") or {}).get("nodes") or [] if label]


def _closing_pr_urls(node: Mapping[str, Any]) -> list[str]:
    """The URLs of the pull requests whose body closes the issue ("Fixes #12")."""
    closing = (node.get("closedByPullRequestsReferences") or {}).get("nodes") or []
    return [pr["url"] for pr in closing if pr and pr.get("url")]


def _has_label(node: Mapping[str, Any], name: str) -> bool:
    return any(label["name"].casefold() == name.casefold() for label in _label_nodes(node))


def _children(node: Mapping[str, Any]) -> list[int]:
    """The sub-issues of an issue read with its cross-references: the issues of the same
    repository whose "Parent:" line names it."""
    number = int(node["number"])
    found: list[int] = []
    for event in (node.get("timelineItems") or {}).get("nodes") or []:
        if not event or event.get("isCrossRepository"):
            continue
        source = event.get("source") or {}
        if "number" in source and split_parent(source.get("body") or "")[1] == number:
            found.append(int(source["number"]))
    return found


def _item_issue(payload: Mapping[str, Any], doc: Document) -> dict[str, Any]:
    content = (payload.get("projectV2Item") or {}).get("content")
    if not isinstance(content, dict) or "number" not in content:
        raise BackendError(
            "github", BackendErrorKind.INVALID, "the status was not changed", operation=doc.name
        )
    return content


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
