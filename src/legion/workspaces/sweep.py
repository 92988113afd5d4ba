"""Removing the workspaces of finished issues, never losing work."""

from __future__ import annotations

from dataclasses import dataclass

from legion.core.model import Status
from legion.errors import LegionError
from legion.trackers.base import Tracker
from legion.workspaces.base import Workspaces


@dataclass(frozen=True, slots=True)
class SweepResult:
    issue: str
    removed: bool
    reason: str


def sweep_done(
    tracker: Tracker, workspaces: Workspaces, live_issues: set[str], *, dry_run: bool = False
) -> list[SweepResult]:
    """Remove each workspace whose issue is Done, has no live worker, and holds nothing that
    is neither committed nor merged or pushed. Everything else is kept, with the reason."""
    done = {issue.identifier for issue in tracker.list_issues(status=Status.DONE)}
    results = []
    for workspace in workspaces.list():
        issue = workspace.issue
        if issue not in done:
            continue
        if issue in live_issues:
            results.append(SweepResult(issue, False, "a worker is still running in it"))
            continue
        check = workspaces.check(issue)
        if not check.safe_to_remove:
            results.append(SweepResult(issue, False, check.detail or "not safe to remove"))
            continue
        if dry_run:
            results.append(SweepResult(issue, False, "would be removed (dry run)"))
            continue
        try:
            workspaces.remove(issue)
        except LegionError as exc:
            results.append(SweepResult(issue, False, str(exc)))
            continue
        results.append(SweepResult(issue, True, f"removed {workspace.path}"))
    return results
