"""What the Linear tracker knows of its team: its id, its workflow states and its labels (the
team's own and the workspace's). Read once and cached in `linear-team-KEY.json` in the
project's state folder (0600), refetched when older than ten minutes, and sooner (at most once
a minute) when a state or a label Legion needs is not in it; a Legion label missing on Linear
is created on the team, once."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legion.core.model import Status
from legion.core.statusmap import StatusMap
from legion.errors import ConfigError
from legion.graphql_client import GraphQLClient
from legion.trackers.graphql import (
    CACHE_TTL_S,
    RECHECK_S,
    WorkspaceCache,
    created_once,
    found_or_refetched,
)
from legion.trackers.linear import documents as docs
from legion.trackers.linear.client import pages

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


def find_label(team: Team, name: str) -> TeamLabel | None:
    """The label named `name` (any case), the team's own before the workspace's."""
    folded = name.casefold()
    matching = [label for label in team.labels if label.name.casefold() == folded]
    matching.sort(key=lambda label: (label.team_id is None, label.name != name))
    return matching[0] if matching else None


@dataclass
class TeamCatalog:
    """The team as the tracker knows it (one job: knowing it, and adding labels to it)."""

    client: GraphQLClient
    team_key: str  # upper case
    cache_path: Path | None  # None: cached in memory only
    clock: Callable[[], float]

    def __post_init__(self) -> None:
        self._cache = WorkspaceCache(
            self._fetch, self._of, self.cache_path, self.clock, inclusive=True
        )

    def team(self, max_age: float = CACHE_TTL_S) -> Team:
        """The team, its states and labels: from memory, the cache file, or Linear."""
        return self._cache.get(max_age)

    def state_for(self, status: Status, statuses: StatusMap) -> WorkflowState:
        """The team's state for `status`; a state added since the cache was read is found."""
        team = self.team()
        try:
            name = statuses.to_backend(status, team.state_names())
        except ConfigError:
            refreshed = self.team(max_age=RECHECK_S)  # a state added since the cache
            name = statuses.to_backend(status, refreshed.state_names())
            team = refreshed
        return next(state for state in team.states if state.name == name)

    def label_for(self, name: str) -> TeamLabel:
        """The label `name` on Linear, created on the team when it has none yet."""
        label = found_or_refetched(self._cache, lambda team: find_label(team, name))
        if label is not None:
            return label
        return created_once(
            lambda: self._create_label(name), self._cache, lambda team: find_label(team, name)
        )

    def _create_label(self, name: str) -> TeamLabel:
        team = self.team()
        data = self.client.execute(docs.LABEL_CREATE, {"input": {"name": name, "teamId": team.id}})
        node = data["issueLabelCreate"]["issueLabel"]
        label = TeamLabel(node["id"], node["name"], team.id)
        team.labels.append(label)
        self._cache.save(team)
        return label

    def _fetch(self, now: float) -> Team:
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
            for label in pages(self.client, docs.LABELS, {"teamId": node["id"]}, "issueLabels")
            if not label.get("isGroup")  # a group only holds labels; an issue cannot carry it
        ]
        return Team(node["id"], node["key"], node["name"], states, labels, fetched_at=now)

    def _of(self, data: Mapping[str, Any]) -> Team | None:
        team = Team.from_json(data)
        return team if team.key == self.team_key else None
