"""Linear as Legion's tracker: one team's issues, over Linear's GraphQL API.

The team (`linear_team`, its key) is resolved to its id once, and its workflow states and
labels are cached in `linear-team-KEY.json` in the project's state folder (0600), so a CLI
command costs only the requests its own work needs. The cache is refetched when it is older
than ten minutes, and sooner (at most once a minute) when a state or a label Legion needs is
not in it; a Legion label missing on Linear is created on the team, once. A new workflow state
is seen by `list_issues` at the next refetch.

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
with Legion's marker. A create sends an id Legion chose, so when the answer is lost (a timeout,
then a retry the server refuses as a duplicate) the issue or comment is found by that id
instead of being written twice.

A comment's author is the name in Legion's marker for the comments Legion wrote (every one is
written with the same key, so Linear shows the key's owner), else the Linear user's display
name.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legion.config import Project
from legion.core.marks import pull_request_links, unmark
from legion.core.model import Status, normalize_identifier, parse_identifier
from legion.core.statusmap import StatusMap
from legion.core.text import clean_body, clean_title
from legion.errors import BackendError, BackendErrorKind, ConfigError, InputError, NotFoundError
from legion.graphql_client import Document, GraphQLClient
from legion.trackers.base import (
    Comment,
    Issue,
    blocker_change,
)
from legion.trackers.graphql import (
    CACHE_TTL_S,
    RECHECK_S,
    GraphQLTracker,
    WorkspaceCache,
    comment_text,
    created_once,
    found_or_refetched,
    paged,
)
from legion.trackers.linear import documents as docs
from legion.trackers.linear.settings import LinearSettings

_CACHE_VERSION = 1


@dataclass(frozen=True)
class WorkflowState:
    id: str
    name: str
    type: str  # Linear's category: triage, backlog, unstarted, started, completed, canceled
    position: float


@dataclass(frozen=True)
class TeamLabel:
    id: str
    name: str
    team_id: str | None  # None: a workspace label, usable by every team


@dataclass
class Team:
    id: str
    key: str
    name: str
    states: list[WorkflowState]
    labels: list[TeamLabel]
    fetched_at: float

    def state_names(self) -> list[str]:
        return [state.name for state in self.states]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": _CACHE_VERSION,
            "id": self.id,
            "key": self.key,
            "name": self.name,
            "fetched_at": self.fetched_at,
            "states": [vars(state) for state in self.states],
            "labels": [vars(label) for label in self.labels],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Team:
        if data.get("version") != _CACHE_VERSION:
            raise ValueError("another version")
        return cls(
            id=str(data["id"]),
            key=str(data["key"]),
            name=str(data["name"]),
            states=[WorkflowState(**state) for state in data["states"]],
            labels=[TeamLabel(**label) for label in data["labels"]],
            fetched_at=float(data["fetched_at"]),
        )


@dataclass
class LinearTracker(GraphQLTracker):
    """The `Tracker` protocol over one Linear team."""

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
        self._team = WorkspaceCache(
            self._fetch_team, self._team_of, self.cache_path, self._now, inclusive=True
        )

    def _now(self) -> float:
        # Asked each time: the clock may be replaced after the tracker is made (tests do).
        return self.clock()

    def _api(self) -> GraphQLClient:
        return self.client

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
        for node in self._pages(docs.ISSUES, {"filter": issue_filter}, "issues"):
            issue = self._to_issue(node)
            # The state may have changed between the pages: keep to what was asked.
            if issue is not None and (status is None or issue.status is status):
                found.append(issue)
        found.sort(key=lambda issue: _identifier_order(issue.identifier))
        return found

    def get_issue(self, identifier: str) -> Issue:
        node = self._fetch(identifier)
        return self._mapped(node)

    def list_comments(self, identifier: str) -> list[Comment]:
        normalized = normalize_identifier(identifier)
        named = normalized  # as Linear names the issue (an identifier from before a move too)

        def page(after: str | None) -> Mapping[str, Any]:
            nonlocal named
            data = self._execute_for(normalized, docs.COMMENTS, {"id": normalized, "after": after})
            node = data["issue"]
            self._check_team(normalized, node)
            named = node["identifier"]
            connection: Mapping[str, Any] = node["comments"]
            return connection

        comments = [self._to_comment(found, named) for found in paged(page)]
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
            "stateId": self._state_for(status).id,
            "labelIds": [self._label_for(name).id for name in label_names],
        }
        if parent_node is not None:
            issue_input["parentId"] = parent_node["id"]
        node = self._create(
            docs.ISSUE_CREATE,
            {"input": issue_input},
            "issueCreate",
            "issue",
            lookup=docs.ISSUE,
            client_id=issue_id,
        )
        if blockers:
            for blocker in blockers:
                self._add_relation(blocker, node)
            return self.get_issue(node["identifier"])
        return self._mapped(node)

    def set_status(self, identifier: str, status: Status) -> Issue:
        node = self._fetch(identifier)
        if self.statuses.to_legion(node["state"]["name"]) is status:
            return self._mapped(node)  # already there, under whichever name maps to it
        state = self._state_for(status)
        return self._update(node, {"stateId": state.id})

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
        current = {label["name"].casefold(): label["id"] for label in node["labels"]["nodes"]}
        added = [
            self._label_for(name).id for name in sorted(to_add) if name.casefold() not in current
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
        current = _blocking_relations(node)
        # The relation as it stands, for the cycle check: the team's issues, one listing.
        graph: dict[str, tuple[str, ...]] = {}
        if any(name not in current for name in wanted_add):
            graph = {issue.identifier: issue.blocked_by for issue in self.list_issues()}
        to_add, to_remove = blocker_change(me, wanted_add, remove, graph)
        added = [self._blocker(name, me) for name in to_add if name not in current]
        changed = False
        for blocker in added:
            self._add_relation(blocker, node)
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
        created = self._create(
            docs.COMMENT_CREATE,
            {"input": comment_input},
            "commentCreate",
            "comment",
            lookup=docs.COMMENT,
            client_id=comment_id,
        )
        return self._to_comment(created, node["identifier"])

    # -- the team, its states and labels -------------------------------------------------------

    def team(self, *, max_age: float = CACHE_TTL_S) -> Team:
        """The team, its states and labels: from memory, the cache file, or Linear."""
        return self._team.get(max_age)

    @property
    def viewer_id(self) -> str:
        """The id of the Linear user whose key Legion uses (asked once)."""
        return str(self.viewer()["id"])

    def viewer(self) -> dict[str, Any]:
        if self._viewer is None:
            self._viewer = dict(self.client.execute(docs.VIEWER)["viewer"])
        return self._viewer

    def _fetch_team(self, now: float) -> Team:
        data = self.client.execute(docs.TEAM, {"key": self.team_key})
        nodes = [n for n in data["teams"]["nodes"] if str(n["key"]).upper() == self.team_key]
        if not nodes:
            raise ConfigError(
                f"no Linear team with the key {self.team_key!r} is visible to this API key: "
                "check linear_team in .legion/config.toml (a team's key is in its Linear "
                "settings) and that the key's owner is a member"
            )
        node = nodes[0]
        states = sorted(
            (
                WorkflowState(s["id"], s["name"], s["type"], float(s["position"]))
                for s in node["states"]["nodes"]
            ),
            key=lambda state: state.position,
        )
        labels = [
            TeamLabel(
                label["id"], label["name"], label["team"]["id"] if label.get("team") else None
            )
            for label in self._pages(docs.LABELS, {"teamId": node["id"]}, "issueLabels")
            if not label.get("isGroup")  # a group only holds labels; an issue cannot carry it
        ]
        return Team(node["id"], node["key"], node["name"], states, labels, fetched_at=now)

    def _team_of(self, data: Mapping[str, Any]) -> Team | None:
        team = Team.from_json(data)
        return team if team.key == self.team_key else None

    def _state_for(self, status: Status) -> WorkflowState:
        team = self.team()
        try:
            name = self.statuses.to_backend(status, team.state_names())
        except ConfigError:
            refreshed = self.team(max_age=RECHECK_S)  # a state added since the cache
            name = self.statuses.to_backend(status, refreshed.state_names())
            team = refreshed
        return next(state for state in team.states if state.name == name)

    def _label_for(self, name: str) -> TeamLabel:
        """The label `name` on Linear, created on the team when it has none yet."""
        label = found_or_refetched(self._team, lambda team: find_label(team, name))
        if label is not None:
            return label
        return created_once(
            lambda: self._create_label(name), self._team, lambda team: find_label(team, name)
        )

    def _create_label(self, name: str) -> TeamLabel:
        team = self.team()
        data = self.client.execute(docs.LABEL_CREATE, {"input": {"name": name, "teamId": team.id}})
        node = data["issueLabelCreate"]["issueLabel"]
        label = TeamLabel(node["id"], node["name"], team.id)
        team.labels.append(label)
        self._team.save(team)
        return label

    # -- helpers -------------------------------------------------------------------------------

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

    def _add_relation(self, blocker: Mapping[str, Any], blocked: Mapping[str, Any]) -> None:
        """`blocker` blocks `blocked`. Sent with an id of Legion's: a retry after a lost
        answer is refused as a duplicate, and the relation is then looked for on the issue."""
        relation = {
            "id": str(uuid.uuid4()),
            "issueId": blocker["id"],
            "relatedIssueId": blocked["id"],
            "type": "blocks",
        }
        try:
            data = self.client.execute(docs.RELATION_CREATE, {"input": relation}, idempotent=True)
        except BackendError as exc:
            if exc.kind not in (BackendErrorKind.TRANSIENT, BackendErrorKind.INVALID):
                raise
            if blocker["identifier"] in _blocking_relations(self._fetch(blocked["identifier"])):
                return
            raise
        if not data["issueRelationCreate"].get("success"):
            raise BackendError(
                "linear",
                BackendErrorKind.INVALID,
                "the relation was not created",
                operation=docs.RELATION_CREATE.name,
            )

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

    def _create(
        self,
        doc: Document,
        variables: Mapping[str, Any],
        mutation: str,
        entity: str,
        *,
        lookup: Document,
        client_id: str,
    ) -> dict[str, Any]:
        """Run a create mutation; when it fails in a way that may hide a success (the answer
        lost, then the retry refused as a duplicate), look the entity up by our id."""
        try:
            # Safe to send twice: the id is ours, and a duplicate is refused, then found below.
            data = self.client.execute(doc, variables, idempotent=True)
        except BackendError as exc:
            if exc.kind not in (BackendErrorKind.TRANSIENT, BackendErrorKind.INVALID):
                raise
            try:
                found: dict[str, Any] = self.client.execute(lookup, {"id": client_id})[entity]
            except BackendError:
                raise exc from None
            return found
        payload = data[mutation]
        if not payload.get("success") or payload.get(entity) is None:
            raise BackendError(
                "linear", BackendErrorKind.INVALID, "nothing was created", operation=doc.name
            )
        created: dict[str, Any] = payload[entity]
        return created

    def _pages(
        self, doc: Document, variables: Mapping[str, Any], connection: str
    ) -> Iterator[dict[str, Any]]:
        return paged(
            lambda after: self.client.execute(doc, {**variables, "after": after})[connection]
        )

    def _to_issue(self, node: Mapping[str, Any]) -> Issue | None:
        """The issue, or None when its state maps to no Legion status (not Legion's)."""
        state = node["state"]
        status = self.statuses.to_legion(state["name"])
        if status is None:
            return None
        parent = node.get("parent")
        children = sorted(
            (child["identifier"] for child in node["children"]["nodes"]), key=_identifier_order
        )
        return Issue(
            identifier=node["identifier"],
            title=node["title"],
            body=node.get("description") or "",
            status=status,
            labels=frozenset(
                self._canonical_label(label["name"]) for label in node["labels"]["nodes"]
            ),
            parent=parent["identifier"] if parent else None,
            children=tuple(children),
            created_at=node["createdAt"],
            updated_at=node["updatedAt"],
            id=node["id"],
            url=node["url"],
            backend_status=state["name"],
            links=pull_request_links(
                attachment["url"] for attachment in node["attachments"]["nodes"]
            ),
            blocked_by=tuple(sorted(_blocking_relations(node), key=_identifier_order)),
        )

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

    def _to_comment(self, node: Mapping[str, Any], identifier: str) -> Comment:
        body, marker, asked = unmark(node["body"])
        return Comment(
            id=node["id"],
            issue=identifier,
            author=marker if marker is not None else _display_name(node),
            body=body,
            created_at=node["createdAt"],
            by_legion=marker is not None,
            asked=asked,
            by_bot=node.get("user") is None and node.get("botActor") is not None,
        )


def _blocking_relations(node: Mapping[str, Any]) -> dict[str, str]:
    """The issue's blockers read with it: blocker identifier -> the relation's id."""
    found: dict[str, str] = {}
    for relation in (node.get("inverseRelations") or {}).get("nodes") or []:
        if relation and relation.get("type") == "blocks" and relation.get("issue"):
            found.setdefault(relation["issue"]["identifier"], relation["id"])
    return found


def find_label(team: Team, name: str) -> TeamLabel | None:
    """The label named `name` (any case), the team's own before the workspace's."""
    folded = name.casefold()
    matching = [label for label in team.labels if label.name.casefold() == folded]
    matching.sort(key=lambda label: (label.team_id is None, label.name != name))
    return matching[0] if matching else None


def _display_name(comment: Mapping[str, Any]) -> str:
    for actor, keys in (
        ("user", ("displayName", "name")),
        ("botActor", ("name",)),
        ("externalUser", ("name",)),
    ):
        found = comment.get(actor)
        if isinstance(found, Mapping):
            for key in keys:
                if found.get(key):
                    return str(found[key])
    return "unknown"


def _identifier_order(identifier: str) -> tuple[str, int]:
    try:
        return parse_identifier(identifier)
    except InputError:
        return identifier, 0


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
