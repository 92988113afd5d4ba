"""What Legion needs from an issue tracker. Embedded, Linear and GitHub adapters implement it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from legion.core.model import Label, Status


@dataclass(frozen=True, slots=True)
class Issue:
    identifier: str
    title: str
    body: str
    status: Status
    labels: frozenset[str]
    parent: str | None = None
    children: tuple[str, ...] = ()
    created_at: str = ""
    updated_at: str = ""

    @property
    def workflow_labels(self) -> frozenset[Label]:
        return frozenset(label for label in map(Label.from_name, self.labels) if label is not None)


@dataclass(frozen=True, slots=True)
class Comment:
    id: int
    issue: str
    author: str
    body: str
    created_at: str


class Tracker(Protocol):
    """The single path through which Legion reads and writes issues."""

    def list_issues(
        self, *, status: Status | None = None, label: str | None = None
    ) -> list[Issue]: ...

    def get_issue(self, identifier: str) -> Issue: ...

    def create_issue(
        self,
        title: str,
        *,
        body: str = "",
        status: Status = Status.TODO,
        labels: Iterable[str] = (),
        parent: str | None = None,
    ) -> Issue: ...

    def set_status(self, identifier: str, status: Status) -> Issue: ...

    def update_labels(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue: ...

    def add_comment(self, identifier: str, body: str, *, author: str) -> Comment: ...

    def list_comments(self, identifier: str) -> list[Comment]: ...
