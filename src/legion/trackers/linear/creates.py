"""Linear's creates (an issue, a comment, a "blocks" relation), each sent with an id Legion
chose: when the answer is lost (a timeout, then a retry the server refuses as a duplicate),
what was created is found by that id, or on the issue, instead of being written twice."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from legion.errors import BackendError, BackendErrorKind
from legion.graphql_client import Document, GraphQLClient
from legion.trackers.linear import documents as docs
from legion.trackers.linear.nodes import blocking_relations


@dataclass
class Creates:
    """The creates of one Linear client."""

    client: GraphQLClient
    fetch: Callable[[str], Mapping[str, Any]]  # an issue's node, by its identifier

    def create(
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

    def relation(self, blocker: Mapping[str, Any], blocked: Mapping[str, Any]) -> None:
        """`blocker` blocks `blocked`. A retry after a lost answer is refused as a duplicate,
        and the relation is then looked for on the issue."""
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
            if blocker["identifier"] in blocking_relations(self.fetch(blocked["identifier"])):
                return
            raise
        if not data["issueRelationCreate"].get("success"):
            raise BackendError(
                "linear",
                BackendErrorKind.INVALID,
                "the relation was not created",
                operation=docs.RELATION_CREATE.name,
            )
