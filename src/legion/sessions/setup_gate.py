"""Whether a worker may start in its workspace now (`SetupGate`): the workspace's setup (or
refresh) commands run first, or waited for, or backed off after a failure
(`legion.workspaces.setup`), a failure said on the issue once; and, without running anything,
whether a start would wait and when the setup last did something. `WorkerManager.setup`.
"""

from __future__ import annotations

from pathlib import Path

from legion.config import Project
from legion.core.marks import LEGION_AUTHOR
from legion.core.workspace_setup import Commands
from legion.daemon_link import wake_fifo
from legion.relay.capabilities import setup_session
from legion.sessions.supervisor import SessionSupervisor
from legion.trackers.base import Tracker
from legion.workspaces import setup
from legion.workspaces.setup import SetupFiles


class SetupGate:
    """The workspace setup a worker's start passes, for one project."""

    def __init__(self, project: Project, tracker: Tracker, supervisor: SessionSupervisor) -> None:
        self.project = project
        self.tracker = tracker
        self.supervisor = supervisor

    def commands(self) -> Commands:
        settings = self.project.settings
        return Commands(
            settings.workspace_setup, settings.workspace_refresh, settings.workspace_setup_timeout
        )

    def files(self, issue: str) -> SetupFiles:
        return SetupFiles(self.project.state_dir, issue)

    def gate(self, issue: str, workspace: Path, *, asked: bool = False) -> None:
        """Return when a session may start in `workspace` now; else run its setup (or refresh)
        or wait for it, raising SetupPendingError (`legion.workspaces.setup.gate`). A failure
        is said on the issue once."""

        def comment(text: str) -> None:
            self.tracker.add_comment(issue, text, author=LEGION_AUTHOR, by_legion=True)

        files = self.files(issue)
        capabilities = self.supervisor.capabilities
        if capabilities is not None and setup.current(files).running is None:
            # No run goes on: the capability the last one showed the egress proxy is worth
            # nothing now (a command may have left it in the workspace).
            capabilities.revoke_session(setup_session(issue))
        setup.gate(
            files,
            issue,
            self.commands(),
            lambda: self.supervisor.setup_plan(issue, workspace),
            comment,
            asked=asked,
            wake=wake_fifo(self.project),
        )

    def activity(self, issue: str) -> float | None:
        """When `issue`'s workspace setup here last did something (`setup.activity`)."""
        return setup.activity(self.files(issue))

    def waits(self, issue: str) -> str | None:
        """Why a start of `issue`'s worker would wait for its workspace's setup now (a dry
        run's plan), or None; changes nothing."""
        found = setup.look(self.files(issue), self.commands())
        return None if found is None else found.detail
