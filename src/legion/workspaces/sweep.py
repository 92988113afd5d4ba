"""Removing the workspaces of finished issues, never losing work."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from legion.core.model import Status
from legion.diagnostics.faults import fault_point
from legion.errors import LegionError
from legion.trackers.base import Tracker
from legion.workspaces.base import Workspaces


@dataclass(frozen=True, slots=True)
class SweepResult:
    issue: str
    removed: bool
    reason: str
    would_remove: bool = False  # a dry run's "yes"


def rescue(folder: Path, paths: Sequence[str], destination: Path) -> None:
    """Move `paths` (relative to `folder`) into `destination`, keeping their relative paths."""
    for relative in paths:
        source = folder / relative.rstrip("/")
        target = destination / relative.rstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(source, target)


def sweep_done(
    tracker: Tracker,
    workspaces: Workspaces,
    live_issues: set[str],
    *,
    dry_run: bool = False,
    rescue_to: Path | None = None,
    done: set[str] | None = None,
) -> list[SweepResult]:
    """Remove each workspace whose issue is Done, has no live worker, and holds nothing that
    is neither committed nor merged or pushed, nor an ignored file that is not build output.
    Everything else is kept, with the reason. With `rescue_to`, a workspace kept only for its
    ignored files has them moved to `rescue_to/<issue>/` first, and is removed. `done`: the
    Done issues when the caller has just read them (the tracker is asked only when there is a
    workspace to decide on, and then once)."""
    if done is not None and not any(workspaces.path_for(issue).is_dir() for issue in done):
        # Every pass sweeps: when no Done issue has a folder, there is nothing to ask the VCS.
        return []
    existing = workspaces.list()
    if not existing:
        return []
    if done is None:
        done = {issue.identifier for issue in tracker.list_issues(status=Status.DONE)}
    results = []
    for workspace in existing:
        issue = workspace.issue
        if issue not in done:
            continue
        if issue in live_issues:
            results.append(SweepResult(issue, False, "a worker is still running in it"))
            continue
        check = workspaces.check(issue)
        only_ignored = check.ignored and not (check.dirty or check.unmerged)
        moved = ""
        if only_ignored and rescue_to is not None:
            if dry_run:
                results.append(
                    SweepResult(issue, False, f"would move {check.detail} and remove", True)
                )
                continue
            destination = rescue_to / issue
            try:
                rescue(workspace.path, check.ignored, destination)
            except OSError as exc:
                results.append(SweepResult(issue, False, f"could not rescue its files: {exc}"))
                continue
            moved = f"moved {len(check.ignored)} ignored file(s) to {destination}; "
            check = workspaces.check(issue)
        if not check.safe_to_remove:
            results.append(SweepResult(issue, False, check.detail or "not safe to remove"))
            continue
        if dry_run:
            results.append(SweepResult(issue, False, "would be removed (dry run)", True))
            continue
        fault_point("sweep_before_remove")
        try:
            workspaces.remove(issue)
        except LegionError as exc:
            results.append(SweepResult(issue, False, moved + str(exc)))
            continue
        fault_point("sweep_after_remove")
        results.append(SweepResult(issue, True, f"{moved}removed {workspace.path}"))
    return results
