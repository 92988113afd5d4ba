"""Starting a worker by hand (`legion dispatch`, the TUI's `d`): who may, which issues wait
for another, then the session layer's start. The CLI and the TUI both call `start_worker`, so
the rules are written once; the reconciler starts workers through the same session layer
after the decision table has already checked them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from legion.core import roles
from legion.core.model import Mode, Status
from legion.errors import InputError, NotFoundError, NotPermittedError
from legion.sessions.identity import require_spawner, role

if TYPE_CHECKING:
    from legion.backends import Backends
    from legion.config import Project
    from legion.sessions.roster import WorkerView
    from legion.trackers.base import Tracker


def refuse_blocked(tracker: Tracker, identifier: str) -> None:
    """One line (exit 2) when the issue waits for an issue that is not Done (a blocker that
    no longer exists holds nothing up, as in `legion state`)."""
    issue = tracker.get_issue(identifier)
    waiting = []
    for name in issue.blocked_by:
        try:
            blocker = tracker.get_issue(name)
        except NotFoundError:
            continue
        if blocker.status is not Status.DONE:
            waiting.append(f"{name} ({blocker.status.value})")
    if waiting:
        raise InputError(
            f"{issue.identifier} is blocked by {', '.join(waiting)}: Legion starts no worker on "
            "it until they are Done (`legion issue block "
            f"{issue.identifier} --remove ISSUE`, or --force to start one anyway)"
        )


def start_worker(
    project: Project,
    backends: Backends,
    issue: str,
    mode: Mode,
    *,
    force: bool = False,
    env: Mapping[str, str] | None = None,
) -> WorkerView:
    """Start `mode`'s worker for `issue` in its workspace: refused for a worker's session, for
    an issue with a live worker, (unless `force`) for one blocked by an issue not Done, and for
    the controller, but for its issue's phase (`legion.core.roles.dispatch_refusal`)."""
    from legion.backends import open_workers

    require_spawner("start workers")
    status = backends.tracker.get_issue(issue).status
    refusal = roles.dispatch_refusal(role(), status, mode, force=force)
    if refusal is not None:
        raise NotPermittedError(refusal)
    if not force:
        refuse_blocked(backends.tracker, issue)
    from legion.reconcile import start_worker as start_marked  # `worker-active`'s one writer
    from legion.workspaces.setup import SetupPendingError

    workers = open_workers(project, backends, env)
    try:
        return start_marked(workers, backends.tracker, issue, mode, asked=True)
    except SetupPendingError as exc:
        raise SetupPendingError(
            f"{exc}; the worker starts after it: the daemon's next pass starts it when due, "
            f"or run `legion dispatch {issue} {mode.value}` again"
        ) from None
