"""Presentation: JSON shapes and rich tables for issues, pull requests and state."""

from __future__ import annotations

from typing import Any

from legion.forges.base import PullRequest
from legion.state import Snapshot
from legion.trackers.base import Comment, Issue


def issue_json(issue: Issue) -> dict[str, Any]:
    return {
        "identifier": issue.identifier,
        "title": issue.title,
        "body": issue.body,
        "status": issue.status.value,
        "labels": sorted(issue.labels),
        "parent": issue.parent,
        "children": list(issue.children),
        "created_at": issue.created_at,
        "updated_at": issue.updated_at,
    }


def comment_json(comment: Comment) -> dict[str, Any]:
    return {
        "id": comment.id,
        "issue": comment.issue,
        "author": comment.author,
        "body": comment.body,
        "created_at": comment.created_at,
    }


def pr_json(pr: PullRequest) -> dict[str, Any]:
    return {
        "number": pr.number,
        "issue": pr.issue,
        "title": pr.title,
        "body": pr.body,
        "branch": pr.branch,
        "base": pr.base,
        "state": pr.state.value,
        "is_draft": pr.is_draft,
        "review": pr.review.value,
        "reviews": [
            {"outcome": r.outcome, "author": r.author, "body": r.body, "created_at": r.created_at}
            for r in pr.reviews
        ],
        "merge_commit": pr.merge_commit,
        "created_at": pr.created_at,
        "updated_at": pr.updated_at,
    }


def issues_table(issues: list[Issue]) -> Any:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("ID", "Status", "Title", "Labels"):
        table.add_column(column, overflow="fold")
    for issue in issues:
        table.add_row(
            issue.identifier, issue.status.value, issue.title, ", ".join(sorted(issue.labels))
        )
    return table


def issue_detail(issue: Issue, comments: list[Comment], pr: PullRequest | None) -> Any:
    from rich.console import Group
    from rich.markup import escape
    from rich.text import Text

    parts: list[Any] = [
        Text.assemble((issue.identifier, "bold"), "  ", issue.title),
        Text(f"Status: {issue.status.value}"),
    ]
    if issue.labels:
        parts.append(Text(f"Labels: {', '.join(sorted(issue.labels))}"))
    if issue.parent:
        parts.append(Text(f"Parent: {issue.parent}"))
    if issue.children:
        parts.append(Text(f"Children: {', '.join(issue.children)}"))
    if pr is not None:
        draft = ", draft" if pr.is_draft else ""
        parts.append(
            Text(
                f"PR: #{pr.number} {pr.branch} → {pr.base} "
                f"({pr.state.value}{draft}, review {pr.review.value})"
            )
        )
    if issue.body:
        parts += [Text(""), Text(issue.body)]
    for comment in comments:
        parts += [
            Text(""),
            Text.from_markup(f"[bold]{escape(comment.author)}[/] [dim]{comment.created_at}[/]"),
            Text(comment.body),
        ]
    return Group(*parts)


def pr_detail(pr: PullRequest) -> Any:
    from rich.console import Group
    from rich.text import Text

    draft = " (draft)" if pr.is_draft else ""
    parts: list[Any] = [
        Text.assemble((f"PR #{pr.number}", "bold"), "  ", pr.title, draft),
        Text(f"Issue: {pr.issue}   Branch: {pr.branch} → {pr.base}   State: {pr.state.value}"),
        Text(f"Review: {pr.review.value}"),
    ]
    if pr.merge_commit:
        parts.append(Text(f"Merge commit: {pr.merge_commit}"))
    if pr.body:
        parts += [Text(""), Text(pr.body)]
    for review in pr.reviews:
        parts += [
            Text(""),
            Text(f"{review.author} {review.outcome} at {review.created_at}"),
            Text(review.body),
        ]
    return Group(*parts)


def prs_table(prs: list[PullRequest]) -> Any:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("PR", "Issue", "State", "Review", "Branch", "Title"):
        table.add_column(column, overflow="fold")
    for pr in prs:
        state = pr.state.value + (" (draft)" if pr.is_draft else "")
        table.add_row(f"#{pr.number}", pr.issue, state, pr.review.value, pr.branch, pr.title)
    return table


def state_table(snapshot: Snapshot) -> Any:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("ID", no_wrap=True)
    table.add_column("Status", no_wrap=True)
    table.add_column("Labels", overflow="fold", min_width=12)
    table.add_column("PR", overflow="fold", min_width=10)
    table.add_column("Worker", no_wrap=True)
    table.add_column("Next action", no_wrap=True)
    table.add_column("Mode", no_wrap=True)
    for state in snapshot.issues:
        pr = "-"
        if state.pr is not None:
            pr = f"#{state.pr.number} {state.pr_review.value}" + (
                " draft" if state.pr.is_draft else ""
            )
        elif state.pr_review.value == "unknown":
            pr = "unknown"
        table.add_row(
            state.issue.identifier,
            state.issue.status.value,
            ", ".join(sorted(state.issue.labels)),
            pr,
            "live" if state.has_live_worker else "-",
            state.decision.action.value,
            "" if state.decision.mode is None else state.decision.mode.value,
        )
    return table
