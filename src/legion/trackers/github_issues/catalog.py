"""What the GitHub Issues tracker knows of its repository: its id, its labels, the project
board whose Status field holds the status. Read in one request, cached between runs for ten
minutes (`github-issues-OWNER-NAME.json`, 0600), read again sooner when a label or option
Legion needs is not in it; a label Legion needs is created in the repository once."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legion.errors import BackendError, BackendErrorKind, ConfigError
from legion.graphql_client import Document, GraphQLClient
from legion.plugins import GITHUB
from legion.trackers.base import WORKFLOW_LABELS
from legion.trackers.github_issues import documents as docs
from legion.trackers.github_issues.repository import (
    ProjectBoard,
    RepositoryInfo,
    status_of_label,
)
from legion.trackers.graphql import (
    CACHE_TTL_S,
    WorkspaceCache,
    created_once,
    found_or_refetched,
    paged,
)

# Colours and descriptions of the labels Legion creates.
_STATUS_LABEL_STYLE: tuple[str, str | None] = ("c5def5", "The issue's status in Legion's workflow")
_WORKFLOW_LABEL_STYLE: tuple[str, str | None] = ("fbca04", "A label of Legion's workflow")
_OTHER_LABEL_STYLE: tuple[str, str | None] = ("ededed", None)


@dataclass
class RepositoryCatalog:
    """The repository as the tracker knows it (one job: knowing it, and adding labels to it)."""

    client: Callable[[], GraphQLClient]  # made at the first request
    owner: str
    name: str
    project_number: int | None
    cache_path: Path | None  # None: cached in memory only
    clock: Callable[[], float]

    def __post_init__(self) -> None:
        self._cache = WorkspaceCache(self._fetch, self._of, self.cache_path, self.clock)

    @property
    def slug(self) -> str:
        return f"{self.owner}/{self.name}"

    def names(self) -> dict[str, str]:
        return {"owner": self.owner, "name": self.name}

    def repository_data(self, doc: Document, variables: Mapping[str, Any]) -> dict[str, Any]:
        """The `repository` of a read; an item missing in it (NOT_FOUND) comes back null."""
        data, _ = self.client().execute_partial(doc, {**self.names(), **variables})
        repo = data.get("repository")
        if not isinstance(repo, dict):
            raise self.missing_repository(doc)
        return repo

    def missing_repository(self, doc: Document) -> BackendError:
        # A repository the token cannot see reads as missing: a setting or credential to fix.
        return BackendError(
            GITHUB,
            BackendErrorKind.AUTH,
            f"repository {self.slug} not found, or the token cannot see it",
            operation=doc.name,
        )

    def info(self, max_age: float = CACHE_TTL_S) -> RepositoryInfo:
        """The repository, its labels and the project: from memory, the cache file, or GitHub.
        `max_age=0` always asks GitHub, even within the clock's resolution."""
        return self._cache.get(max_age)

    def _fetch(self, now: float) -> RepositoryInfo:
        data, _ = self.client().execute_partial(
            docs.REPOSITORY,
            {
                **self.names(),
                "project": self.project_number or 0,
                "withProject": self.project_number is not None,
            },
        )
        repo = data.get("repository")
        if not isinstance(repo, dict):
            raise self.missing_repository(docs.REPOSITORY)
        first: Mapping[str, Any] = repo["labels"]

        def label_page(after: str | None) -> Mapping[str, Any]:
            if after is None:
                return first  # came with the repository
            page: Mapping[str, Any] = self.repository_data(docs.LABEL_PAGE, {"after": after})
            return page["labels"]  # type: ignore[no-any-return]

        labels = {node["name"]: node["id"] for node in paged(label_page, "github")}
        project = None
        if self.project_number is not None:
            project = self._project_board(repo.get("owner") or {})
        return RepositoryInfo(
            slug=self.slug,
            id=repo["id"],
            name_with_owner=repo.get("nameWithOwner") or self.slug,
            viewer=(data.get("viewer") or {}).get("login") or "",
            has_issues=bool(repo.get("hasIssuesEnabled", True)),
            permission=repo.get("viewerPermission"),
            labels=labels,
            project_number=self.project_number,
            project=project,
            fetched_at=now,
        )

    def _project_board(self, owner: Mapping[str, Any]) -> ProjectBoard:
        number = self.project_number
        node = owner.get("projectV2")
        if not isinstance(node, dict):
            raise ConfigError(
                f"no GitHub project {number} of {self.owner} is visible to this token: check "
                "github_project in .legion/config.toml (the number in the project's URL) and "
                "that the token has the `project` scope (`gh auth refresh -s project`)"
            )
        status_field = node.get("field")
        if not isinstance(status_field, dict) or not status_field.get("options"):
            raise ConfigError(
                f"GitHub project {number} ({node.get('title')}) has no single-select field "
                f"named {docs.STATUS_FIELD!r}: add one, with an option per status Legion uses"
            )
        return ProjectBoard(
            id=node["id"],
            number=int(node["number"]),
            title=node.get("title") or "",
            closed=bool(node.get("closed")),
            field_id=status_field["id"],
            options=tuple((o["id"], o["name"]) for o in status_field["options"]),
        )

    def _of(self, data: Mapping[str, Any]) -> RepositoryInfo | None:
        info = RepositoryInfo.from_json(data)
        if info.slug != self.slug or info.project_number != self.project_number:
            return None  # the settings changed since
        return info

    def label(self, name: str) -> str | None:
        """The repository's spelling of label `name`, or None when it has no such label."""
        found = found_or_refetched(self._cache, lambda info: info.find_label(name))
        return found[0] if found is not None else None

    def label_id(self, name: str) -> str:
        """The id of label `name`, created in the repository when it has none yet."""
        found = found_or_refetched(self._cache, lambda info: info.find_label(name))
        if found is None:
            found = created_once(
                lambda: self._create_label(name), self._cache, lambda info: info.find_label(name)
            )
        return found[1]

    def _create_label(self, name: str) -> tuple[str, str]:
        info = self.info()
        if status_of_label(name) is not None:
            color, description = _STATUS_LABEL_STYLE
        elif name in WORKFLOW_LABELS:
            color, description = _WORKFLOW_LABEL_STYLE
        else:
            color, description = _OTHER_LABEL_STYLE
        data = self.client().execute(
            docs.CREATE_LABEL,
            {"repositoryId": info.id, "name": name, "color": color, "description": description},
        )
        label = data["createLabel"]["label"]
        info.labels[label["name"]] = label["id"]
        self._cache.save(info)
        return label["name"], str(label["id"])
