"""Linear as Legion's tracker: one team's issues, over Linear's GraphQL API.

The team (`linear_team`, its key) is resolved to its id once, and its workflow states and
labels are cached (`team.py`), so a CLI command costs only the requests its own work needs. A
new workflow state is seen by `list_issues` at the next refetch.

Reads: `list_issues` asks for the team's issues in the states that map to a Legion status
(`[statuses]` table first, then Legion's names and aliases: "In Review" is Needs Review), 100
per request, following the cursor to the last page; an issue whose state maps to none
(Canceled, Duplicate) is not Legion's and is skipped, and `get_issue` reports it as not found.
Each issue carries its first 25 labels and 25 sub-issues (Linear caps a query's complexity),
and its first 10 attachments that are pull requests (`Issue.links`: Linear's GitHub
integration attaches the PRs that mention the issue, by a closing keyword or its branch),
and its first 10 relations pointing at it, of which those of type "blocks" are its blockers
(`Issue.blocked_by`: the relation's `issue` blocks its `relatedIssue`). An issue with more
than 10 relations pointing at it (blocks, related, duplicate) may show only some blockers.

Writes: "blocked by" with `issueRelationCreate` (type `blocks`, an id Legion chose) and
`issueRelationDelete`; the status by the state's id; labels with
`addedLabelIds`/`removedLabelIds`, so a label a person set is never clobbered; comments marked
with Legion's marker. A create sends an id Legion chose, so when the answer is lost the issue,
comment or relation is found instead of being written twice (`creates.py`). A comment's author
is the name in Legion's marker for the comments Legion wrote, else the Linear user's
(`nodes.py`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legion.config import Project
from legion.core.model import Status, normalize_identifier
from legion.core.statusmap import StatusMap
from legion.core.text import clean_body, clean_title
from legion.errors import BackendError, BackendErrorKind, ConfigError, InputError, NotFoundError
from legion.graphql_client import GraphQLClient
from legion.trackers.base import Comment, Issue, blocker_change
from legion.trackers.graphql import (
    CACHE_TTL_S,
    GraphQLTracker,
    comment_text,
    edit_legions_comment,
    paged,
    paged_back,
)
from legion.trackers.linear import documents as docs
from legion.trackers.linear.client import pages
from legion.trackers.linear.creates import Creates
from legion.trackers.linear.nodes import (
    blocking_relations,
    identifier_order,
    to_comment,
    to_issue,
)
from legion.trackers.linear.settings import LinearSettings
from legion.trackers.linear.team import Team, TeamCatalog


@dataclass
class LinearTracker(GraphQLTracker):
    """The `Tracker` protocol over one Linear team: the team as known (`catalog`: its states
    and labels) and the creates sent with Legion's ids (`creates`) are parts of their own."""

    client: GraphQLClient
    team_key: str
    statuses: StatusMap = field(default_factory=StatusMap)
    extra_labels: tuple[str, ...] = ()
    cache_path: Path | None = None  # None: the team is cached in memory only
    clock: Callable[[], float] = time.time
    _viewer: dict[str, Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.team_key = self.team_key.strip().upper()
        self._accept_labels(self.extra_labels)
        self.catalog = TeamCatalog(self.client, self.team_key, self.cache_path, self._now)
        self.creates = Creates(self.client, self._fetch)

    def _now(self) -> float:
        # Asked each time: the clock may be replaced after the tracker is made (tests do).
        return self.clock()

    def _api(self) -> GraphQLClient:
        return self.client

    def team(self, *, max_age: float = CACHE_TTL_S) -> Team:
        """The team, its states and labels: from memory, the cache file, or Linear."""
        return self.catalog.team(max_age)

    @property
    def viewer_id(self) -> str:
        """The id of the Linear user whose key Legion uses (asked once)."""
        return str(self.viewer()["id"])

    def viewer(self) -> dict[str, Any]:
        if self._viewer is None:
            self._viewer = dict(self.client.execute(docs.VIEWER)["viewer"])
        return self._viewer

    # -- reading -------------------------------------------------------------------------------

    def list_issues(self, *, status: Status | None = None, label: str | None = None) -> list[Issue]:
        team = self.team()
        state_ids = [
            state.id
            for state in team.states
            if (mapped := self.statuses.to_legion(state.name)) is not None
            and (status is None or mapped is status)
        ]
        if not state_ids:
            return []
        issue_filter: dict[str, Any] = {
            "team": {"id": {"eq": team.id}},
            "state": {"id": {"in": state_ids}},
        }
        if label is not None:
            issue_filter["labels"] = {"some": {"name": {"eqIgnoreCase": self._known_label(label)}}}
        found: list[Issue] = []
        for node in pages(self.client, docs.ISSUES, {"filter": issue_filter}, "issues"):
            issue = self._to_issue(node)
            # The state may have changed between the pages: keep to what was asked.
            if issue is not None and (status is None or issue.status is status):
                found.append(issue)
        found.sort(key=lambda issue: identifier_order(issue.identifier))
        return found

    def get_issue(self, identifier: str) -> Issue:
        node = self._fetch(identifier)
        return self._mapped(node)

    def list_comments(self, identifier: str, *, newest: int | None = None) -> list[Comment]:
        normalized = normalize_identifier(identifier)
        named = normalized  # as Linear names the issue (an identifier from before a move too)

        def fetch(variables: dict[str, Any]) -> Mapping[str, Any]:
            nonlocal named
            data = self._execute_for(normalized, docs.COMMENTS, {"id": normalized, **variables})
            node = data["issue"]
            self._check_team(normalized, node)
            named = node["identifier"]
            connection: Mapping[str, Any] = node["comments"]
            return connection

        size = docs.COMMENT_PAGE_SIZE
        if newest is None:
            nodes = list(paged(lambda after: fetch({"first": size, "after": after}), "linear"))
        else:
            nodes = paged_back(
                lambda before, last: fetch({"last": last, "before": before}),
                newest,
                size,
                "linear",
            )
        comments = [to_comment(found, named) for found in nodes]
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
        parent_node = self._fetch(parent) if parent is not None else None
        # Every blocker is checked before anything is written.
        blockers = [
            self._blocker(name, "the new issue")
            for name in dict.fromkeys(normalize_identifier(n) for n in blocked_by)
        ]
        team = self.team()
        issue_id = str(uuid.uuid4())
        issue_input: dict[str, Any] = {
            "id": issue_id,
            "teamId": team.id,
            "title": title,
            "description": body,
            "stateId": self.catalog.state_for(status, self.statuses).id,
            "labelIds": [self.catalog.label_for(name).id for name in label_names],
        }
        if parent_node is not None:
            issue_input["parentId"] = parent_node["id"]
        node = self.creates.create(
            docs.ISSUE_CREATE,
            {"input": issue_input},
            "issueCreate",
            "issue",
            lookup=docs.ISSUE,
            client_id=issue_id,
        )
        if blockers:
            for blocker in blockers:
                self.creates.relation(blocker, node)
            return self.get_issue(node["identifier"])
        return self._mapped(node)

    def set_status(self, identifier: str, status: Status) -> Issue:
        node = self._fetch(identifier)
        if self.statuses.to_legion(node["state"]["name"]) is status:
            return self._mapped(node)  # already there, under whichever name maps to it
        state = self.catalog.state_for(status, self.statuses)
        return self._update(node, {"stateId": state.id})

    def edit_issue(
        self, identifier: str, *, title: str | None = None, body: str | None = None
    ) -> Issue:
        change: dict[str, str] = {}
        if title is not None:
            change["title"] = clean_title(title)
        if body is not None:
            change["description"] = clean_body(body)
        node = self._fetch(identifier)
        current = {"title": node.get("title") or "", "description": node.get("description") or ""}
        change = {key: value for key, value in change.items() if current[key] != value}
        if not change:
            return self._mapped(node)
        return self._update(node, change)

    def update_labels(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        to_add, to_remove = self._label_change(add, remove)
        # A fresh read: only what changes is sent, and removal uses the issue's own label ids.
        node = self._fetch(identifier)
        current = {label["name"].casefold(): label["id"] for label in node["labels"]["nodes"]}
        added = [
            self.catalog.label_for(name).id
            for name in sorted(to_add)
            if name.casefold() not in current
        ]
        removed = [
            current[name.casefold()] for name in sorted(to_remove) if name.casefold() in current
        ]
        if not added and not removed:
            return self._mapped(node)
        change: dict[str, Any] = {}
        if added:
            change["addedLabelIds"] = added
        if removed:
            change["removedLabelIds"] = removed
        return self._update(node, change)

    def set_blocked_by(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        node = self._fetch(identifier)
        me = node["identifier"]
        wanted_add = list(dict.fromkeys(normalize_identifier(name) for name in add))
        current = blocking_relations(node)
        # The relation as it stands, for the cycle check: the team's issues, one listing.
        graph: dict[str, tuple[str, ...]] = {}
        if any(name not in current for name in wanted_add):
            graph = {issue.identifier: issue.blocked_by for issue in self.list_issues()}
        to_add, to_remove = blocker_change(me, wanted_add, remove, graph)
        added = [self._blocker(name, me) for name in to_add if name not in current]
        changed = False
        for blocker in added:
            self.creates.relation(blocker, node)
            changed = True
        for name in to_remove:
            relation_id = current.get(name)
            if relation_id is not None:
                self._execute_for(me, docs.RELATION_DELETE, {"id": relation_id})
                changed = True
        return self.get_issue(me) if changed else self._mapped(node)

    def add_comment(
        self, identifier: str, body: str, *, author: str, by_legion: bool = False
    ) -> Comment:
        body = comment_text(body, author, by_legion=by_legion)
        node = self._fetch(identifier)
        comment_id = str(uuid.uuid4())
        comment_input = {"id": comment_id, "issueId": node["id"], "body": body}
        created = self.creates.create(
            docs.COMMENT_CREATE,
            {"input": comment_input},
            "commentCreate",
            "comment",
            lookup=docs.COMMENT,
            client_id=comment_id,
        )
        return to_comment(created, node["identifier"])

    def edit_comment(
        self, identifier: str, comment_id: int | str, body: str, *, author: str
    ) -> Comment:
        normalized = normalize_identifier(identifier)
        edited = edit_legions_comment(
            self._api(),
            docs.COMMENT_EDIT,
            str(comment_id),
            comment_text(body, author, by_legion=True),
            issue=normalized,
            expected=normalized,
            by_legion=lambda node: to_comment(node, normalized).by_legion,
        )
        return to_comment(edited, normalized)

    # -- requests and nodes --------------------------------------------------------------------

    def _not_found(self, identifier: str) -> NotFoundError:
        return NotFoundError(f"no issue {identifier} in Linear (see `legion issue list`)")

    def _fetch(self, identifier: str) -> dict[str, Any]:
        """The issue's node, from this project's team."""
        normalized = normalize_identifier(identifier)
        node: dict[str, Any] = self._execute_for(normalized, docs.ISSUE, {"id": normalized})[
            "issue"
        ]
        self._check_team(normalized, node)
        return node

    def _blocker(self, identifier: str, blocked: str) -> dict[str, Any]:
        """The node of a blocker of `blocked`; one that is not there is bad input."""
        try:
            return self._fetch(identifier)
        except NotFoundError:
            raise InputError(
                f"no issue {normalize_identifier(identifier)} in team {self.team_key} to block "
                f"{blocked} (see `legion issue list`)"
            ) from None

    def _check_team(self, identifier: str, node: Mapping[str, Any]) -> None:
        key = str(node["team"]["key"]).upper()
        if key != self.team_key:
            raise NotFoundError(
                f"{identifier} is in the Linear team {key}, not this project's team {self.team_key}"
            )

    def _update(self, node: Mapping[str, Any], change: Mapping[str, Any]) -> Issue:
        data = self._execute_for(
            node["identifier"], docs.ISSUE_UPDATE, {"id": node["id"], "input": dict(change)}
        )
        payload = data["issueUpdate"]
        if not payload.get("success") or payload.get("issue") is None:
            raise BackendError(
                "linear",
                BackendErrorKind.INVALID,
                "the update was not applied",
                operation=docs.ISSUE_UPDATE.name,
            )
        return self._mapped(payload["issue"])

    def _to_issue(self, node: Mapping[str, Any]) -> Issue | None:
        """The issue, or None when its state maps to no Legion status (not Legion's)."""
        status = self.statuses.to_legion(node["state"]["name"])
        return None if status is None else to_issue(node, status, self._canonical_label)

    def _mapped(self, node: Mapping[str, Any]) -> Issue:
        issue = self._to_issue(node)
        if issue is None:
            state = node["state"]["name"]
            raise NotFoundError(
                f"{node['identifier']} is in the Linear status {state!r}, which is not Legion's "
                f'(map it in the [statuses] table of .legion/config.toml, e.g. "{state}" = '
                '"Backlog", to use it)'
            )
        return issue


def open_tracker(
    project: Project, db: object = None, *, client: GraphQLClient | None = None
) -> LinearTracker:
    """The registry's opener (`legion.backends`). `db` is not used: Linear holds the issues."""
    from legion.trackers.linear.client import linear_client

    settings = project.settings
    key = settings.section(LinearSettings).team
    if not key:
        raise ConfigError(
            'tracker = "linear" needs the key of your Linear team: add linear_team = "ENG" '
            "(your team's key) to .legion/config.toml"
        )
    return LinearTracker(
        client if client is not None else linear_client(project.env),
        team_key=key,
        statuses=StatusMap(settings.statuses),
        extra_labels=settings.labels,
        cache_path=project.state_dir / f"linear-team-{key}.json",
    )
