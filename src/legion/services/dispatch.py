"""Starting a worker by hand (`legion dispatch`, the TUI's `d`): who may, which issues wait
for another, then the session layer's start. The CLI and the TUI both call `dispatch_worker`, so
the rules are written once; the reconciler starts workers through the same session layer
after the decision table has already checked them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from legion.core.admission import Load, Reason, StartFacts, counts_toward_wip, refusal
from legion.core.model import Mode, Status
from legion.errors import InputError, NotFoundError, NotPermittedError
from legion.sessions.identity import require_spawner, role

if TYPE_CHECKING:
    from legion.backends import Backends
    from legion.config import Project
    from legion.sessions.roster import WorkerView
    from legion.sessions.workers import WorkerManager
    from legion.trackers.base import Tracker


def waiting_for(tracker: Tracker, identifier: str) -> tuple[str, ...]:
    """The issues `identifier` waits for that are not Done, each with its status (a blocker
    that no longer exists holds nothing up, as in `legion state`)."""
    waiting = []
    for name in tracker.get_issue(identifier).blocked_by:
        try:
            blocker = tracker.get_issue(name)
        except NotFoundError:
            continue
        if blocker.status is not Status.DONE:
            waiting.append(f"{name} ({blocker.status.value})")
    return tuple(waiting)


def dispatch_worker(
    project: Project,
    backends: Backends,
    issue: str,
    mode: Mode,
    *,
    force: bool = False,
    env: Mapping[str, str] | None = None,
) -> WorkerView:
    """Start `mode`'s worker for `issue` in its workspace: refused for a worker's session, and
    as admission says (`legion.core.admission`): for the controller, but for its issue's
    phase; (unless `force`) for an issue blocked by one not Done, and past the WIP limit; for
    one with a live worker."""
    from legion.backends import open_workers

    require_spawner("start workers")
    found = backends.tracker.get_issue(issue)
    workers = open_workers(project, backends, env)
    facts = StartFacts(
        issue=found.identifier,
        mode=mode,
        asked_by=role(),
        status=found.status,
        force=force,
        waiting_for=() if force else waiting_for(backends.tracker, issue),
        load=None if force else _load(workers, project.settings.wip_limit),
    )
    refused = refusal(facts)
    if refused is not None:
        error = NotPermittedError if refused.reason is Reason.ROLE else InputError
        forced = " (--force starts it anyway)" if refused.reason is Reason.WIP else ""
        raise error(refused.detail + forced)
    from legion.reconcile import start_worker as start_marked  # `worker-active`'s one writer
    from legion.workspaces.setup import SetupPendingError

    try:
        return start_marked(workers, backends.tracker, issue, mode, asked=True)
    except SetupPendingError as exc:
        raise SetupPendingError(
            f"{exc}; the worker starts after it: the daemon's next pass starts it when due, "
            f"or run `legion dispatch {issue} {mode.value}` again"
        ) from None


def _load(workers: WorkerManager, wip_limit: int | None) -> Load | None:
    """The live workers against the WIP limit (None: no limit, nothing to count)."""
    if wip_limit is None:
        return None
    live = [view for view in workers.roster.views() if view.state.is_live]
    coding = sum(1 for view in live if counts_toward_wip(view.record.mode))
    return Load(code_workers=coding, sessions=len(live), wip_limit=wip_limit)
