"""A pull request as GitHub's JSON shows it, read into Legion's `PullRequest` plus what only
writes need (`GitHubPullRequest`), and which of several is an issue's. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeGuard

from legion.core.ids import issue_for_branch
from legion.core.model import normalize_identifier
from legion.forges.base import PrState, PullRequest
from legion.forges.github.checks import checks_of
from legion.forges.github.reviews import reviews_of

_RESOLVES = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s+([A-Za-z][A-Za-z0-9]{0,9}-[1-9][0-9]{0,8})\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class GitHubPullRequest:
    """A PR as GitHub shows it: what Legion's model holds, and what only writes need."""

    pr: PullRequest
    node_id: str
    labels: frozenset[str]
    head_oid: str
    mergeable: str  # MERGEABLE, CONFLICTING or UNKNOWN (GitHub computes it lazily)
    checks: str | None  # the head commit's combined check state: SUCCESS, FAILURE, PENDING ...


def record_of(node: Mapping[str, Any]) -> GitHubPullRequest:
    """A PR node (the documents' `LegionPullRequest` fields) as a record. Its issue is its
    branch's, else the one its body resolves ("Fixes ENG-12"), else none ("")."""
    branch = node["headRefName"]
    labels = frozenset(
        label["name"] for label in (node.get("labels") or {}).get("nodes") or [] if label
    )
    issue = issue_for_branch(branch) or _issue_in_body(node.get("body") or "") or ""
    commits = (node.get("commits") or {}).get("nodes") or []
    last = commits[-1] if commits and isinstance(commits[-1], dict) else {}
    rollup = (last.get("commit") or {}).get("statusCheckRollup")
    pr = PullRequest(
        number=node["number"],
        issue=issue,
        title=node["title"],
        body=node.get("body") or "",
        branch=branch,
        base=node["baseRefName"],
        state=PrState(str(node["state"]).lower()),
        is_draft=bool(node.get("isDraft")),
        reviews=reviews_of(node, labels),
        merge_commit=(node.get("mergeCommit") or {}).get("oid"),
        created_at=node.get("createdAt") or "",
        updated_at=node.get("updatedAt") or "",
        url=node.get("url") or "",
        check_runs=checks_of(rollup, node.get("url") or ""),
        from_fork=bool(node.get("isCrossRepository")),
    )
    return GitHubPullRequest(
        pr=pr,
        node_id=node["id"],
        labels=labels,
        head_oid=node.get("headRefOid") or "",
        mergeable=node.get("mergeable") or "UNKNOWN",
        checks=rollup.get("state") if isinstance(rollup, dict) else None,
    )


def is_legions(node: Any) -> TypeGuard[dict[str, Any]]:
    """A PR node that is there (not vanished) and from the repository itself: a fork's PR
    from a branch of the same name is someone else's."""
    return isinstance(node, dict) and not node.get("isCrossRepository")


def current(records: Sequence[GitHubPullRequest]) -> GitHubPullRequest | None:
    """The open PR, else the newest (the list is newest first)."""
    for record in records:
        if record.pr.state is PrState.OPEN:
            return record
    return records[0] if records else None


def as_issues(record: GitHubPullRequest, issue: str) -> GitHubPullRequest:
    """A linked PR as `issue`'s: its branch and body may name no issue, or another."""
    return replace(record, pr=replace(record.pr, issue=issue))


def _issue_in_body(body: str) -> str | None:
    match = _RESOLVES.search(body)
    return normalize_identifier(match.group(1)) if match else None
