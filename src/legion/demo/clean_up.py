"""The end of a demo: what its sessions left behind, put away (worker records retired, agents'
last statuses set, stray processes stopped, the workspaces of Done issues removed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from legion.core.ids import controller_session_id
from legion.core.model import Status
from legion.errors import LegionError

if TYPE_CHECKING:
    from legion.backends import Backends
    from legion.config import Project
    from legion.sessions.workers import WorkerManager


def clean_up(project: Project, backends: Backends, env: Mapping[str, str]) -> list[str]:
    """After the run: retire the records of workers whose windows went with the tmux server,
    and remove the workspaces of Done issues (never one holding unmerged work). Returns why
    each kept workspace was kept."""
    from legion.backends import open_workers, open_workspaces
    from legion.workspaces.sweep import sweep_done

    workers = open_workers(project, backends, env)
    # A session's process that outlived its tmux server (a hangup that came as a confined
    # session was starting): stopped too, so nothing of the demo runs on.
    sessions = [record.session_id for record in workers.roster.records()]
    for sid in [*sessions, controller_session_id(project.settings.project_id)]:
        workers.supervisor.stop_stray(sid)
    _retire_stopped(project, backends, workers, env)
    try:
        results = sweep_done(backends.tracker, open_workspaces(project), set())
    except LegionError as exc:
        return [f"workspaces: {exc}"]
    return [f"{r.issue}: {r.reason}" for r in results if not r.removed]


def _retire_stopped(
    project: Project, backends: Backends, workers: WorkerManager, env: Mapping[str, str]
) -> None:
    """Retire every worker record, and mark what the end of the demo stopped: the agent of a
    worker whose issue is Done ended its mode (complete); one stopped mid-work, and the
    controller, are not running (stopped, "the demo ended"); none is left busy."""
    from legion.bus import open_bus
    from legion.services.agent_watch import observe

    try:
        done = {i.identifier for i in backends.tracker.list_issues() if i.status is Status.DONE}
    except LegionError:
        done = set()
    current = workers.roster.records()
    for record in current:
        if record.issue in done:  # retired first: a session Legion retired ended its mode
            workers.forget(record)
    try:
        bus = open_bus(env)
        try:
            # What is left of the sessions (a hook still ending) may hold the watch lock for
            # a while on a loaded machine: the last statuses are worth waiting for.
            observe(project, bus, env, detail="the demo ended", timeout=30.0, stopped=True)
        finally:
            bus.close()
    except LegionError:
        pass  # the statuses are a help to whoever looks later, never a reason to fail
    for record in current:
        if record.issue not in done:
            workers.forget(record)
