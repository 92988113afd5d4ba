"""Reading Linear's JSON for an issue and a comment: an issue as Legion's `Issue` (its status
decided by the caller), its blockers, a comment and its author's name. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from legion.core.marks import pull_request_links, unmark
from legion.core.model import Status, parse_identifier
from legion.errors import InputError
from legion.trackers.base import Comment, Issue


def to_issue(node: Mapping[str, Any], status: Status, label: Callable[[str], str]) -> Issue:
    """The issue, in `status` (its state's, mapped), each label named as `label` says."""
    parent = node.get("parent")
    children = sorted(
        (child["identifier"] for child in node["children"]["nodes"]), key=identifier_order
    )
    return Issue(
        identifier=node["identifier"],
        title=node["title"],
        body=node.get("description") or "",
        status=status,
        labels=frozenset(label(found["name"]) for found in node["labels"]["nodes"]),
        parent=parent["identifier"] if parent else None,
        children=tuple(children),
        created_at=node["createdAt"],
        updated_at=node["updatedAt"],
        id=node["id"],
        url=node["url"],
        backend_status=node["state"]["name"],
        links=pull_request_links(attachment["url"] for attachment in node["attachments"]["nodes"]),
        blocked_by=tuple(sorted(blocking_relations(node), key=identifier_order)),
    )


def blocking_relations(node: Mapping[str, Any]) -> dict[str, str]:
    """The issue's blockers read with it: blocker identifier -> the relation's id."""
    found: dict[str, str] = {}
    for relation in (node.get("inverseRelations") or {}).get("nodes") or []:
        if relation and relation.get("type") == "blocks" and relation.get("issue"):
            found.setdefault(relation["issue"]["identifier"], relation["id"])
    return found


def to_comment(node: Mapping[str, Any], identifier: str) -> Comment:
    """A comment of issue `identifier`. It is Legion's when it carries Legion's marker and the
    key's own user wrote it (Linear's `isMe`: every one Legion writes is written with that
    key): its author is then the name in the marker; any other comment is its writer's (the
    Linear user's display name), marker and all."""
    raw = node["body"]
    body, marker, asked = unmark(raw)
    user = node.get("user")
    mine = bool(user and user.get("isMe"))
    ours = marker is not None and mine
    return Comment(
        id=node["id"],
        issue=identifier,
        author=marker if ours and marker is not None else _display_name(node),
        body=body if ours else raw,
        created_at=node["createdAt"],
        by_legion=ours,
        asked=asked if ours else None,
        by_bot=user is None and node.get("botActor") is not None,
        # A member of the workspace (no guest, no one outside it), or the key's own user.
        by_member=mine
        or (user is not None and not user.get("guest") and node.get("externalUser") is None),
    )


def identifier_order(identifier: str) -> tuple[str, int]:
    """Issues in their team's order: by key, then number (ENG-2 before ENG-10)."""
    try:
        return parse_identifier(identifier)
    except InputError:
        return identifier, 0


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
