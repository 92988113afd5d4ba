"""An issue's workspace on this host (`IssueWorkspaces`): the one there is, else a new one; in
a fleet, an issue whose last worker ran on another host is taken over: its last checkpoint, from
the shared remote, is laid into a new workspace (files and sessions), and the issue is told what
was restored and what is lost. And where each of an issue's sessions keeps its transcript here
(what a checkpoint keeps, and a takeover restores).
"""

from __future__ import annotations

from pathlib import Path

from legion.config import Project
from legion.core.decide import session_mode
from legion.core.ids import branch_for, session_id
from legion.core.marks import LEGION_AUTHOR
from legion.core.model import Mode
from legion.core.stamps import stamp_at
from legion.diagnostics.tracing import span
from legion.sessions.runtimes import RuntimeChoice
from legion.trackers.base import Tracker
from legion.workspaces import checkpoint
from legion.workspaces.base import Workspaces


class IssueWorkspaces:
    """The issues' workspaces on this host (`host`), and their takeover from another."""

    def __init__(
        self,
        project: Project,
        tracker: Tracker,
        workspaces: Workspaces,
        runtimes: RuntimeChoice,
        host: str,
        shared_remote: str | None,
    ) -> None:
        """`shared_remote`: in a fleet, the remote its hosts' checkpoints go to; None on one
        machine (no issue is ever taken over)."""
        self.project = project
        self.tracker = tracker
        self._workspaces = workspaces
        self.runtimes = runtimes
        self.host = host
        self.shared_remote = shared_remote

    def workspace(self, identifier: str, from_host: str) -> Path:
        """The issue's workspace on this host: the one there is, else a new one. In a fleet,
        when the issue's last worker ran on another host (`from_host`), this host takes the
        issue over: the issue's last checkpoint, from the shared remote, is laid into a new
        workspace (files and session); one left here from earlier is out of date, and goes
        first (unless it holds work: then the start is refused, in a line)."""
        remote = self.shared_remote
        moved = remote is not None and from_host not in ("", self.host)
        if moved and self._workspaces.get(identifier) is not None:
            self._workspaces.remove(identifier)
        if moved and remote is not None and self._workspaces.get(identifier) is None:
            # The branch as the last host sent it (with its checkpoints and its pull
            # request), which the new workspace starts from.
            checkpoint.take_branch(self.project.root, remote, branch_for(identifier))
        # The one there is, or a new one; either way, as a session starts (the base it sees).
        workspace = self._workspaces.ensure(identifier).path
        if moved and remote is not None:
            with span("start: take over", identifier):
                self._take_over(identifier, workspace, from_host, remote)
        return workspace

    def _take_over(self, issue: str, workspace: Path, from_host: str, remote: str) -> None:
        """Restore on this host what issue's last worker, on host `from_host`, left in its
        last checkpoint; say so on the issue, with what is lost."""
        where = f"host {from_host} to {self.host}"
        if not checkpoint.fetch(self.project.root, remote, issue):
            note = (
                f"Legion moved {issue} from {where}: no checkpoint of its workspace on the "
                f"`{remote}` remote, so its work goes on from its branch as pushed; what its "
                "worker had not pushed is lost."
            )
        else:
            transcripts = self.transcripts(issue, workspace)
            place = self._workspaces.place_at(workspace)
            restored = checkpoint.restore(place, issue, transcripts, home=self.project.root)
            taken = checkpoint.taken_at(self.project.root, issue) if restored else None
            when = stamp_at(taken) if taken is not None else "unknown"
            held = restored.checkpoint.sessions if restored is not None else ()
            modes = [mode.value for mode, sid in self.sessions(issue) if sid in held]
            sessions = f"its sessions ({', '.join(modes)})" if modes else "no session"
            if restored is not None and restored.newer_branch is not None:
                note = (
                    f"Legion moved {issue} from {where}: its workspace goes on from its branch "
                    f"as last sent (`{restored.newer_branch[:12]}`), which is newer than the "
                    f"checkpoint of {when}; {sessions} were restored from that checkpoint, and "
                    "each session goes on in the same conversation. Files its worker had not "
                    "committed are lost."
                )
            else:
                note = (
                    f"Legion moved {issue} from {where}: its workspace and {sessions} were "
                    f"restored from the checkpoint of {when}, and each session goes on in the "
                    "same conversation. What its worker did after that checkpoint is lost."
                )
        self.tracker.add_comment(issue, note, author=LEGION_AUTHOR, by_legion=True)

    def sessions(self, issue: str) -> list[tuple[Mode, str]]:
        """Each session an issue's workers run in, with the first mode that runs in it (retro
        resumes the implementer's)."""
        project_id = self.project.settings.project_id
        found: dict[str, Mode] = {}
        for mode in Mode:
            found.setdefault(session_id(project_id, issue, session_mode(mode)), mode)
        return [(mode, sid) for sid, mode in found.items()]

    def transcripts(self, issue: str, workspace: Path) -> dict[str, Path]:
        """Where this host's CLIs keep (or resume from) each session of the issue's workers in
        `workspace`, by session id: what a checkpoint keeps, and where a takeover restores."""
        return {
            sid: self.runtimes.for_worker(issue, mode).transcript(workspace, sid)
            for mode, sid in self.sessions(issue)
        }
