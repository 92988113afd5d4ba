"""Where an issue's status is kept on GitHub, and how it is read and written: a single-select
field `Status` of a Projects (v2) board (`github_project = N`), else `status: <name>` labels.
One store per kind, chosen once from the settings (`status_store`); the tracker asks it and
never looks at the kind itself.

Both kinds share the rules around them. An issue is Done exactly when it is closed: moving to
Done closes it, then writes the status; moving out of Done writes the status, then reopens it,
so an interruption between the two leaves a closed issue, Done, that the next write repairs.
An open issue with no status, or whose status says Done (a person reopened it), is Triage;
one whose labels name several statuses is Triage too; one whose status maps to no Legion
status is not Legion's. Setting Triage when no name maps to it clears the status."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from legion.core.model import Status, fold_name
from legion.core.statusmap import StatusMap
from legion.errors import BackendError, BackendErrorKind, ConfigError
from legion.graphql_client import Document
from legion.trackers.github_issues import documents as docs
from legion.trackers.github_issues.catalog import RepositoryCatalog
from legion.trackers.github_issues.labels import IssueLabels, IssueRequest
from legion.trackers.github_issues.nodes import IssueNode, label_nodes
from legion.trackers.github_issues.repository import (
    RepositoryInfo,
    status_label,
    status_of_label,
)
from legion.trackers.graphql import RECHECK_S


@dataclass
class StatusStore(ABC):
    """What both kinds of store do alike: map a status to the backend's name and back, and
    open or close the issue with Done. A kind says where the name is (`carried`, `_write`)."""

    statuses: StatusMap
    catalog: RepositoryCatalog
    request: IssueRequest

    # The nodes written back carry the issue's project item (the project's kind only).
    with_project = False

    @abstractmethod
    def names(self, info: RepositoryInfo) -> list[str]:
        """The status names the backend has (or, with labels, Legion may create), the existing
        ones first. Triage is left out: no status is Triage."""
        ...

    @abstractmethod
    def carried(self, node: Mapping[str, Any]) -> list[str]:
        """The status names the issue carries."""
        ...

    @abstractmethod
    def shows_label(self, name: str) -> bool:
        """Whether a label of the issue is one of `Issue.labels` (not the status itself)."""
        ...

    def labels_at_creation(self, target: str | None) -> list[str]:
        """The labels a new issue is created with to have the status named `target`."""
        return []

    @abstractmethod
    def _write(self, node: IssueNode, status: Status, target: str | None) -> IssueNode:
        """Write the status `target` names (None: clear it) on an issue; its node after."""
        ...

    def _written_after_creation(
        self, node: IssueNode, status: Status, target: str | None
    ) -> IssueNode:
        return node

    def _missing(self, status: Status, exc: ConfigError) -> ConfigError:
        """The error for a status no name maps to, saying what to do."""
        return exc

    # -- reading ---------------------------------------------------------------------------------

    def status_of(self, node: Mapping[str, Any]) -> tuple[Status | None, str]:
        """(the issue's Legion status or None when it is not Legion's, the backend's name)."""
        names = self.carried(node)
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

    def target(self, status: Status) -> str | None:
        """The backend's name for `status`; None for Triage when no name maps to it (the
        status is cleared). A status with no name is a ConfigError that says what to do; it
        is found before anything is written."""
        try:
            return self.statuses.to_backend(status, self.names(self.catalog.info()))
        except ConfigError:
            if status is Status.TRIAGE:
                return None  # no status is Triage: nothing to look for
            try:
                # An option added since the cache was read.
                fresh = self.catalog.info(max_age=RECHECK_S)
                return self.statuses.to_backend(status, self.names(fresh))
            except ConfigError as exc:
                raise self._missing(status, exc) from None

    # -- writing ---------------------------------------------------------------------------------

    def set(self, node: IssueNode, status: Status) -> IssueNode:
        """Move an issue (a fresh read) to `status`. A status with no name fails before any
        write."""
        target = self.target(status)
        if status is Status.DONE and node["state"] == "OPEN":
            node = self._set_open(node, open_=False)
        node = self._write(node, status, target)
        if status is not Status.DONE and node["state"] == "CLOSED":
            node = self._set_open(node, open_=True)
        return node

    def after_creation(self, node: IssueNode, status: Status, target: str | None) -> IssueNode:
        """Give a new issue, created with `labels_at_creation`, the rest of its status."""
        if target is not None:
            node = self._written_after_creation(node, status, target)
        if status is Status.DONE:
            node = self._set_open(node, open_=False)
        return node

    def _set_open(self, node: Mapping[str, Any], *, open_: bool) -> IssueNode:
        doc, mutation = (
            (docs.REOPEN_ISSUE, "reopenIssue") if open_ else (docs.CLOSE_ISSUE, "closeIssue")
        )
        data = self.request(node, doc, {"id": node["id"], "withProject": self.with_project})
        issue: IssueNode = data[mutation]["issue"]
        return issue


@dataclass
class StatusLabels(StatusStore):
    """The status as exactly one label `status: <name>`, created in the repository once when
    missing; those labels are the status, so `Issue.labels` leaves them out."""

    labels: IssueLabels

    def names(self, info: RepositoryInfo) -> list[str]:
        names = [*info.status_label_names(), *self.statuses.table]
        for status in Status:
            if status is not Status.TRIAGE:
                names.append(status.value)
        unique: dict[str, str] = {}
        for name in names:
            unique.setdefault(fold_name(name), name)
        return list(unique.values())

    def carried(self, node: Mapping[str, Any]) -> list[str]:
        return [s for label in label_nodes(node) if (s := status_of_label(label["name"]))]

    def shows_label(self, name: str) -> bool:
        return status_of_label(name) is None

    def labels_at_creation(self, target: str | None) -> list[str]:
        return [status_label(target)] if target is not None else []

    def _write(self, node: IssueNode, status: Status, target: str | None) -> IssueNode:
        """Add the new label, then remove the other `status:` ones."""
        current = [
            (label["name"], label["id"])
            for label in label_nodes(node)
            if status_of_label(label["name"]) is not None
        ]
        if len(current) == 1:
            carried = status_of_label(current[0][0]) or ""
            if self.statuses.to_legion(carried) is status:
                return node  # already there, under whichever name maps to it
        wanted = status_label(target) if target is not None else None
        keep = wanted is not None and any(n.casefold() == wanted.casefold() for n, _ in current)
        if wanted is not None and not keep:
            node = self.labels.add(node, [wanted])
        stale = [i for n, i in current if wanted is None or n.casefold() != wanted.casefold()]
        if stale:
            node = self.labels.remove(node, stale)
        return node


@dataclass
class ProjectStatusField(StatusStore):
    """The status as the option of the issue's item in the project's `Status` field; writing
    it adds the issue to the project first when it is not in it."""

    with_project = True

    def names(self, info: RepositoryInfo) -> list[str]:
        assert info.project is not None  # the catalog refuses a project it cannot read
        return info.project.option_names()

    def carried(self, node: Mapping[str, Any]) -> list[str]:
        item = self._item(node)
        if item is None:
            return []
        value = item.get("fieldValueByName") or {}
        name = value.get("name")
        return [name] if name else []

    def shows_label(self, name: str) -> bool:
        return True

    def _missing(self, status: Status, exc: ConfigError) -> ConfigError:
        project = self.catalog.info().project
        assert project is not None
        options = ", ".join(project.option_names())
        return ConfigError(
            f"the {docs.STATUS_FIELD} field of GitHub project {project.number} has no option "
            f"for {status.value!r} (it has: {options}): add an option {status.value!r} to the "
            f"field, or map one in the [statuses] table of .legion/config.toml, e.g. "
            f'"{project.option_names()[0]}" = "{status.value}"'
        )

    def _item(self, node: Mapping[str, Any]) -> dict[str, Any] | None:
        """The issue's item in the project, or None when it is not in it."""
        project = self.catalog.info().project
        assert project is not None
        for item in (node.get("projectItems") or {}).get("nodes") or []:
            if item and (item.get("project") or {}).get("id") == project.id:
                found: dict[str, Any] = item
                return found
        return None

    def _written_after_creation(
        self, node: IssueNode, status: Status, target: str | None
    ) -> IssueNode:
        return self._write(node, status, target)

    def _write(self, node: IssueNode, status: Status, target: str | None) -> IssueNode:
        project = self.catalog.info().project
        assert project is not None
        item = self._item(node)
        carried = self.carried(node)
        if carried and self.statuses.to_legion(carried[0]) is status:
            return node  # already there
        if target is None:
            if item is None or not carried:
                return node  # no status already
            data = self.request(
                node,
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
            added = self.request(
                node, docs.ADD_PROJECT_ITEM, {"projectId": project.id, "contentId": node["id"]}
            )
            item_id = added["addProjectV2ItemById"]["item"]["id"]
        else:
            item_id = item["id"]
        data = self.request(
            node,
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


def status_store(
    project_number: int | None,
    statuses: StatusMap,
    catalog: RepositoryCatalog,
    request: IssueRequest,
    labels: IssueLabels,
) -> StatusStore:
    """The store of the kind the settings choose: the project's field when there is one."""
    if project_number is not None:
        return ProjectStatusField(statuses, catalog, request)
    return StatusLabels(statuses, catalog, request, labels)


def _item_issue(payload: Mapping[str, Any], doc: Document) -> IssueNode:
    content = (payload.get("projectV2Item") or {}).get("content")
    if not isinstance(content, dict) or "number" not in content:
        raise BackendError(
            "github", BackendErrorKind.INVALID, "the status was not changed", operation=doc.name
        )
    return content
