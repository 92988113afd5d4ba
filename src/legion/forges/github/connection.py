"""The forge's way to its repository: the client (made at the first request, so opening the
forge costs nothing), the repository's name (the setting, else the project's remote), its
reads, and what one request tells of the token and the repository (`RepositoryContext`),
read once and again only when asked to."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from legion.config import Project
from legion.errors import BackendError, BackendErrorKind
from legion.forges.github import documents as docs
from legion.forges.github.reviews import APPROVED_LABEL, CHANGES_LABEL
from legion.github.client import api_base, github_client
from legion.github.repository import repository_name
from legion.graphql_client import DEFAULT_TIMEOUT_S, Document, GraphQLClient


@dataclass
class RepositoryContext:
    """What one request tells about the token and the repository; read once per forge."""

    viewer_login: str
    id: str | None  # None when the repository is missing or hidden from the token
    name_with_owner: str
    permission: str | None  # ADMIN, MAINTAIN, WRITE, TRIAGE, READ
    default_branch: str | None
    label_ids: dict[str, str]  # the review labels the repository has


class RepositoryConnection:
    """The repository the forge works on, reached through one client."""

    def __init__(
        self,
        project: Project,
        *,
        client: GraphQLClient | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.project = project
        self._client = client
        self._timeout = timeout
        self._sleep = sleep
        self._repository: tuple[str, str] | None = None
        self._context: RepositoryContext | None = None

    @property
    def client(self) -> GraphQLClient:
        if self._client is None:
            self._client = github_client(self.project.env, timeout=self._timeout, sleep=self._sleep)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    @property
    def repository(self) -> tuple[str, str]:
        """(owner, name)."""
        if self._repository is None:
            self._repository = repository_name(self.project)
        return self._repository

    @property
    def api_base(self) -> str:
        """The REST API's base URL (`legion.github.client.api_base`)."""
        return api_base(self.project.env)

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
        """The context, read at the first ask; a repository the token cannot see fails."""
        if self._context is None:
            context = self.fetch_context()
            if context.id is None:
                raise self._missing_repository(docs.REPOSITORY_CONTEXT)
            self._context = context
        return self._context

    def forget_context(self) -> None:
        """Read the context again at the next ask (a label made or deleted meanwhile)."""
        self._context = None

    def data(self, doc: Document, variables: Mapping[str, Any]) -> dict[str, Any]:
        """The `repository` of a read; items missing in it (NOT_FOUND) come back null."""
        data, _ = self.client.execute_partial(doc, {**self._names(), **variables})
        repo = data.get("repository")
        if not isinstance(repo, dict):
            raise self._missing_repository(doc)
        return repo

    def _missing_repository(self, doc: Document) -> BackendError:
        # A repository the token cannot see reads as missing: a setting or credential to fix.
        return BackendError(
            "github",
            BackendErrorKind.AUTH,
            f"repository {self.slug} not found, or the token cannot see it",
            operation=doc.name,
        )
