"""Putting a Legion verdict's label on a pull request and taking the other off: each review
label's id is read with the repository's context, and the label is created in the repository
once, when missing (another process creating it meanwhile is read back)."""

from __future__ import annotations

from legion.errors import BackendError, BackendErrorKind
from legion.forges.github import documents as docs
from legion.forges.github.connection import RepositoryConnection
from legion.forges.github.records import GitHubPullRequest
from legion.forges.github.reviews import LABEL_STYLE, verdict_labels


class ReviewLabels:
    """The review labels of one repository's pull requests."""

    def __init__(self, connection: RepositoryConnection) -> None:
        self.connection = connection

    def mark(self, record: GitHubPullRequest, outcome: str) -> None:
        """Put the label of `outcome` on the PR and take the other verdict's off; a comment
        (no verdict) changes neither."""
        labels = verdict_labels(outcome)
        if labels is None:
            return
        wanted, other = labels
        if wanted not in record.labels:
            self._add(record.node_id, wanted)
        if other in record.labels:
            self._remove(record.node_id, other)

    def _label_id(self, name: str) -> str:
        connection = self.connection
        context = connection.context()
        if name not in context.label_ids:
            color, description = LABEL_STYLE[name]
            try:
                data = connection.client.execute(
                    docs.CREATE_LABEL,
                    {
                        "repositoryId": context.id,
                        "name": name,
                        "color": color,
                        "description": description,
                    },
                )
                context.label_ids[name] = data["createLabel"]["label"]["id"]
            except BackendError as exc:
                if exc.kind is not BackendErrorKind.INVALID:
                    raise
                # Created meanwhile by another process ("already taken"): read it back.
                connection.forget_context()
                fresh = connection.context()
                if name not in fresh.label_ids:
                    raise
        return connection.context().label_ids[name]

    def _add(self, node_id: str, name: str) -> None:
        client = self.connection.client
        try:
            client.execute(docs.ADD_LABELS, {"id": node_id, "labelIds": [self._label_id(name)]})
        except BackendError as exc:
            if exc.kind is not BackendErrorKind.NOT_FOUND:
                raise
            # The label was deleted since it was read: look it up (or create it) once more.
            self.connection.forget_context()
            client.execute(docs.ADD_LABELS, {"id": node_id, "labelIds": [self._label_id(name)]})

    def _remove(self, node_id: str, name: str) -> None:
        label_id = self.connection.context().label_ids.get(name)
        if label_id is None:
            self.connection.forget_context()  # on the PR, so in the repository: read again
            label_id = self.connection.context().label_ids.get(name)
        if label_id is not None:
            self.connection.client.execute(
                docs.REMOVE_LABELS, {"id": node_id, "labelIds": [label_id]}
            )
