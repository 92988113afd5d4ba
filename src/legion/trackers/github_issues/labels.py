"""Changing an issue's labels: only what changes is sent (`addLabelsToLabelable`,
`removeLabelsFromLabelable`), so a label a person set is never clobbered; a label is removed
by the id the issue itself carries, and one added is created in the repository when missing."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from legion.errors import BackendError, BackendErrorKind, NotFoundError
from legion.graphql_client import Document
from legion.trackers.github_issues import documents as docs
from legion.trackers.github_issues.catalog import RepositoryCatalog
from legion.trackers.github_issues.nodes import IssueNode, label_nodes

# A request about one issue (its node), where "not found" means that issue: the tracker's.
IssueRequest = Callable[[Mapping[str, Any], Document, Mapping[str, Any]], dict[str, Any]]


@dataclass
class IssueLabels:
    """Adding and removing an issue's labels; each write returns the issue's node after it."""

    catalog: RepositoryCatalog
    request: IssueRequest
    with_project: bool  # the node written back carries its project item

    def change(self, node: IssueNode, add: Collection[str], remove: Collection[str]) -> IssueNode:
        """Add the labels `add` the issue lacks and remove those of `remove` it carries (names
        Legion knows); `node` is a fresh read of the issue."""
        current = {label["name"].casefold(): label["id"] for label in label_nodes(node)}
        added = [name for name in sorted(add) if name.casefold() not in current]
        removed = [current[n.casefold()] for n in sorted(remove) if n.casefold() in current]
        if added:
            node = self.add(node, added)
        if removed:
            node = self.remove(node, removed)
        return node

    def add(self, node: IssueNode, names: Sequence[str]) -> IssueNode:
        ids = [self.catalog.label_id(name) for name in names]
        try:
            return self._mutation(docs.ADD_LABELS, "addLabelsToLabelable", node, ids)
        except NotFoundError:
            # A label deleted since it was cached: look the ids up (or create them) once more.
            self.catalog.info(max_age=0)
            ids = [self.catalog.label_id(name) for name in names]
            return self._mutation(docs.ADD_LABELS, "addLabelsToLabelable", node, ids)

    def remove(self, node: IssueNode, label_ids: list[str]) -> IssueNode:
        """Remove labels by the ids the issue itself carries (never stale)."""
        return self._mutation(docs.REMOVE_LABELS, "removeLabelsFromLabelable", node, label_ids)

    def _mutation(
        self, doc: Document, mutation: str, node: Mapping[str, Any], label_ids: list[str]
    ) -> IssueNode:
        data = self.request(
            node, doc, {"id": node["id"], "labelIds": label_ids, "withProject": self.with_project}
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
