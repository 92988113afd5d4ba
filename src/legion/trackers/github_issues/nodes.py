"""Reading GitHub's JSON for an issue: its labels, the pull requests that close it, the
sub-issues among the issues that mention it, and a comment as Legion's `Comment`. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from legion.core.marks import unmark
from legion.github.repository import MEMBER_ASSOCIATIONS
from legion.trackers.base import Comment
from legion.trackers.github_issues.body import split_parent

# An issue's node as GitHub returns it (the fields the documents ask for).
IssueNode = dict[str, Any]


def label_nodes(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The labels an issue carries (name, id)."""
    return [label for label in (node.get("labels") or {}).get("nodes") or [] if label]


def has_label(node: Mapping[str, Any], name: str) -> bool:
    return any(label["name"].casefold() == name.casefold() for label in label_nodes(node))


def closing_pr_urls(node: Mapping[str, Any]) -> list[str]:
    """The URLs of the pull requests whose body closes the issue ("Fixes #12")."""
    closing = (node.get("closedByPullRequestsReferences") or {}).get("nodes") or []
    return [pr["url"] for pr in closing if pr and pr.get("url")]


def children(node: Mapping[str, Any]) -> list[int]:
    """The sub-issues of an issue read with its cross-references: the issues of the same
    repository whose "Parent:" line names it."""
    number = int(node["number"])
    found: list[int] = []
    for event in (node.get("timelineItems") or {}).get("nodes") or []:
        if not event or event.get("isCrossRepository"):
            continue
        source = event.get("source") or {}
        if "number" in source and split_parent(source.get("body") or "")[1] == number:
            found.append(int(source["number"]))
    return found


def to_comment(node: Mapping[str, Any], identifier: str) -> Comment:
    """A comment of issue `identifier`. It is Legion's when it carries Legion's marker and the
    token's own account wrote it (every one Legion writes is written with that token): its
    author is then the name in the marker; any other comment is its login's, marker and all."""
    raw = node.get("body") or ""
    body, marker, asked = unmark(raw)
    author = node.get("author") or {}
    login = author.get("login") or "ghost"  # GitHub's deleted account
    mine = node.get("viewerDidAuthor") is True
    ours = marker is not None and mine
    return Comment(
        id=node["id"],
        issue=identifier,
        author=marker if ours and marker is not None else login,
        body=body if ours else raw,
        created_at=node.get("createdAt") or "",
        by_legion=ours,
        asked=asked if ours else None,
        by_bot=author.get("__typename") == "Bot",
        by_member=mine or node.get("authorAssociation") in MEMBER_ASSOCIATIONS,
    )
