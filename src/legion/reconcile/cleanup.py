"""What a pass closes and removes once work is over: the windows of workers that finished (or
died) and whose issue no longer expects one, before the table runs; the workspaces of Done
issues, last."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from legion.core.liveness import SessionState
from legion.core.model import Label, Status
from legion.sessions.roster import WorkerView
from legion.store.actionlog import OutcomeKind
from legion.trackers.base import Issue
from legion.workspaces.sweep import sweep_done

from .context import PassContext
from .outcomes import Step, done


def retire_finished(
    ctx: PassContext, views: Sequence[WorkerView], issues: dict[str, Issue]
) -> None:
    """Close the windows of workers that are done: idle with `worker-active` gone, or whose
    issue is closed; forget dead workers whose issue no longer expects one. A Done issue's
    `worker-active` goes with its last worker: a finisher that died between closing the issue
    and clearing the flag would leave it on for good (a Done issue is never looked at again)."""
    for view in views:
        issue = issues.get(view.record.issue)
        active = issue is not None and Label.WORKER_ACTIVE.value in issue.labels
        closed = issue is None or issue.status is Status.DONE
        finished = view.state is SessionState.IDLE and (not active or closed)
        forgotten = view.state is SessionState.DEAD and (not active or closed)
        if finished or forgotten:
            others = [v for v in views if v.record.issue == view.record.issue and v is not view]
            stale = active and closed and not any(other.state.is_live for other in others)
            what = f"{'finished' if finished else 'dead'}: {view.record.window}"
            ctx.guard.guarded(
                view.record.issue,
                "retire_worker",
                partial(_retire, ctx, view, what, clear_active=stale),
                detail=what,
            )


def _retire(ctx: PassContext, view: WorkerView, what: str, *, clear_active: bool) -> Step:
    ctx.workers.retire(view)
    if clear_active:
        ctx.tracker.update_labels(view.record.issue, remove=[Label.WORKER_ACTIVE.value])
        return done(f"{what}; worker-active cleared (the issue is Done)")
    return done(what)


def sweep_workspaces(ctx: PassContext, views: Sequence[WorkerView], done_issues: set[str]) -> None:
    """Remove the workspaces of Done issues no live worker is in, without losing work
    (`workspaces.sweep`); each workspace's outcome recorded on its own."""
    live = {view.record.issue for view in views if view.state.is_live}
    results = sweep_done(ctx.tracker, ctx.workspaces, live, dry_run=ctx.dry_run, done=done_issues)
    for result in results:
        if result.removed:
            kind = OutcomeKind.DONE
        else:
            kind = OutcomeKind.PLANNED if ctx.dry_run else OutcomeKind.DEFERRED
        ctx.guard.record(result.issue, "sweep_workspace", kind, result.reason)
