"""The daemon's checkpoints of its workers' workspaces (`legion.workspaces.checkpoint`): at the
end of each worker turn, and every `checkpoint_every` seconds while a turn runs, its workspace
(uncommitted and untracked files included) and the transcripts of the issue's sessions go on
the issue's checkpoint ref, so that what a worker did survives its workspace (issue 22).

Cheap at every tick: a worker whose transcript has not moved since its last checkpoint costs
one `stat`; only one that moved has its transcript's tail read (has its turn ended?) and, when
one is due, its workspace written with git. A checkpoint that fails is said once in the action
log (and again only after one succeeded); one that succeeds says nothing.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from legion.core.ids import branch_for
from legion.errors import ConflictError, LegionError
from legion.files.worker_written import transcript_stat
from legion.runtime.transcript import Turn
from legion.sessions.registry import WorkerRecord
from legion.sessions.workers import WorkerManager
from legion.store.actionlog import ActionLog, OutcomeKind
from legion.workspaces import checkpoint, issue_repo

from .steps import DONE, StepResult


@dataclass(frozen=True)
class _Taken:
    at: float  # when (time.time())
    transcript_at: float  # the transcript's mtime then


class BranchSender:
    """Sends an issue's branch (its worker's commits, brought home from its issue's
    repository) to the fleet's shared remote: after each checkpoint, and before a worker's
    `worker-done` is written (`before_done`, run by the relay). One at a time: the two run in
    different threads, on the same refs of the project's repository."""

    def __init__(self, project_root: Path, remote: str) -> None:
        self.project_root = project_root
        self.remote = remote
        self._lock = threading.Lock()

    def send(self, issue: str) -> str | None:
        """None when sent (or nothing new to send); else why not, in a line. A ConflictError
        when the worker's branch cannot be brought home."""
        branch = branch_for(issue)
        with self._lock:
            issue_repo.bring_home(self.project_root, branch)
            return checkpoint.send_branch(self.project_root, self.remote, branch)

    def before_done(self, issue: str) -> None:
        """Refuse (ConflictError, the label not written) a `worker-done` whose commits did not
        reach the shared remote: once written, the next step may run on another host, and a
        host lost with commits not sent would take them with it. A project whose repository
        has no such remote (one host on a PostgreSQL store) has nowhere to send them, and no
        other host could take them from there either: nothing is held."""
        if not checkpoint.remote_named(self.project_root, self.remote):
            return
        try:
            why = self.send(issue)
        except LegionError as exc:
            why = str(exc)
        if why is not None:
            raise ConflictError(
                f"{issue} is not marked done: its branch must reach the fleet's shared remote "
                f"first, and did not ({why}); run the same command again"
            )


class WorkspaceCheckpoints:
    def __init__(
        self, workers: WorkerManager, log: ActionLog, every: float, remote: str | None = None
    ) -> None:
        """`remote`: where each checkpoint is sent once taken (a fleet's shared remote, from
        which another host restores it), or None to keep it here."""
        self.workers = workers
        self.log = log
        self.every = every
        self.remote = remote
        # Its branch beside each checkpoint sent; the relay sends it before `worker-done` too.
        self.sender = None if remote is None else BranchSender(workers.project.root, remote)
        self._taken: dict[int, _Taken] = {}  # by worker record
        self._failing: set[int] = set()  # records whose last checkpoint failed (said once)
        self._unsent: dict[int, str] = {}  # why each record's branch was last not sent (said once)

    def run(self) -> StepResult:
        current = self.workers.registry.current()
        known = {record.id for record in current}
        self._taken = {k: v for k, v in self._taken.items() if k in known}
        self._failing &= known
        self._unsent = {k: v for k, v in self._unsent.items() if k in known}
        for record in current:
            # This host's sessions only, once started here: a start the leader asked of this
            # host has no workspace (`Path()`) until it starts.
            if record.host in ("", self.workers.host) and record.workspace != Path():
                self._look(record)
        return DONE

    def _look(self, record: WorkerRecord) -> None:
        runtime = self.workers.runtimes.of(record)
        transcript = runtime.transcript(record.workspace, record.session_id)
        try:
            moved = transcript_stat(transcript).st_mtime  # the session's own file, no link
        except OSError:
            return  # no session yet: nothing to keep
        now = time.time()
        # A worker first seen is counted from then: its first checkpoint comes at its turn's
        # end, or `every` seconds on (not at once, in the middle of a turn: git's work would
        # come on top of the CLI's own while it works).
        taken = self._taken.setdefault(record.id, _Taken(now, float("-inf")))
        if moved <= taken.transcript_at:
            return  # nothing new in the session since
        if now - taken.at < self.every:
            summary = runtime.summarize(transcript)
            if summary is None or summary.turn in (Turn.OPEN, Turn.NONE):
                return  # mid-turn (or not begun), and one was taken lately: at the turn's end
        if self.workers.workspaces.kind != "git" or not record.workspace.is_dir():
            return  # a jj workspace (not checkpointed yet), or gone
        try:
            # Git runs on the folders Legion made, once the workspace's `.git` is found still
            # pointing there: a tampered one is said (once) and left, never checkpointed.
            workspaces = self.workers.workspaces
            place = workspaces.place_at(record.workspace)
            transcripts = self.workers.issue_transcripts(record.issue, record.workspace)
            # Kept in the project's repository, never the issue's (which its worker writes).
            home = workspaces.home_place(place)
            saved = checkpoint.save(place, record.issue, transcripts, home=home)
            for why in saved.refused:  # a session planted something where a transcript goes
                self.log.append(
                    record.issue, "checkpoint", OutcomeKind.FAILED, f"transcript refused: {why}"
                )
            if self.remote is not None:
                checkpoint.push(home, self.remote, record.issue)
                self._send_branch(record)
        except LegionError as exc:
            if record.id not in self._failing:
                self._failing.add(record.id)
                self.log.append(
                    record.issue, "checkpoint", OutcomeKind.FAILED, f"{record.window}: {exc}"
                )
            return
        self._failing.discard(record.id)
        self._taken[record.id] = _Taken(now, moved)

    def _send_branch(self, record: WorkerRecord) -> None:
        """Send the issue's branch (its worker's commits brought home) beside its checkpoint,
        so the host that takes the issue over goes on from the newer of the two. A branch the
        remote refuses (someone else's commits there) leaves the checkpoint sent; it is said
        once, until it changes."""
        assert self.sender is not None
        why = self.sender.send(record.issue)
        if why is None:
            self._unsent.pop(record.id, None)
        elif self._unsent.get(record.id) != why:
            self._unsent[record.id] = why
            self.log.append(record.issue, "checkpoint", OutcomeKind.FAILED, why)
