"""The daemon's `task_sync` step: each of this host's workers' task lists mirrored into one
comment on its issue (`legion.core.task_sync` says what the comment holds and when it is
written). Every host runs it for the sessions it runs: their task files are on its disk.

What was written is kept in the store (`task_comments`: the comment's id, the digest of the
list it shows, when), so a restarted daemon edits the same comment rather than adding one. A
comment a person deleted is written again as a new one. A worker retired with a change not yet
written (its last within 30 s of the one before) is written once its time is up."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from legion.core.task_list import TaskList
from legion.core.task_sync import (
    SYNC_EVERY_S,
    TASKS_AUTHOR,
    Synced,
    checklist,
    due,
    list_digest,
)
from legion.errors import LegionError, NotFoundError
from legion.sessions.registry import WorkerRecord
from legion.sessions.workers import WorkerManager
from legion.store import Store
from legion.store.actionlog import ActionLog, OutcomeKind
from legion.trackers.base import Tracker

from .steps import DONE, StepResult


class TaskComments:
    """The store's record of each issue's task list comment."""

    def __init__(self, db: Store) -> None:
        self.db = db

    def all(self) -> dict[str, Synced]:
        """Every issue's, read at once (a tick looks at every live worker's)."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT issue, comment_id, digest, written_at FROM task_comments"
            ).fetchall()
        return {str(r[0]): Synced(str(r[1]), str(r[2]), float(r[3])) for r in rows}

    def put(self, issue: str, synced: Synced) -> None:
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO task_comments (issue, comment_id, digest, written_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (issue) DO UPDATE SET "
                "comment_id = excluded.comment_id, digest = excluded.digest, "
                "written_at = excluded.written_at",
                (issue, synced.comment_id, synced.digest, int(synced.at)),
            )


# How often the step looks at the task lists: a write is at most every 30 s per issue, so a
# closer look buys nothing, and a busy daemon ticks many times a second.
LOOK_EVERY_S = 5.0


class TaskSync:
    def __init__(
        self,
        workers: WorkerManager,
        tracker: Tracker,
        log: ActionLog,
        *,
        clock: Callable[[], float] = time.time,
        look_every: float = LOOK_EVERY_S,
    ) -> None:
        self.workers = workers
        self.tracker = tracker
        self.log = log
        self.comments = TaskComments(log.db)
        self.clock = clock
        self.look_every = look_every
        self._looked = float("-inf")  # time.monotonic() of the last look
        # Workers retired with a change not written yet, by issue: written when it is due.
        self._unwritten: dict[str, WorkerRecord] = {}
        # What this daemon wrote, by issue: remembered even when the store could not keep it,
        # so a tracker write that went is never made again at the next look.
        self._written: dict[str, Synced] = {}
        self._failed_at: dict[str, float] = {}  # when an issue's last write failed (said once)

    def run(self) -> StepResult:
        if time.monotonic() - self._looked < self.look_every:
            return DONE
        self._looked = time.monotonic()
        current = {
            record.issue: record
            for record in self.workers.registry.current()
            # This host's sessions, once started here (a start asked of it has no workspace).
            if record.host in ("", self.workers.host) and record.workspace != Path()
        }
        for issue, record in list(self._unwritten.items()):
            current.setdefault(issue, record)
        if not current:
            return DONE
        written = self.comments.all() | self._written
        for issue, record in current.items():
            try:
                self._sync(issue, record, written.get(issue))
            except Exception as exc:
                self._failed(issue, f"{type(exc).__name__}: {exc}")
        return DONE

    def _sync(self, issue: str, record: WorkerRecord, last: Synced | None) -> None:
        now = self.clock()
        failed = self._failed_at.get(issue)
        if failed is not None and now - failed < SYNC_EVERY_S:
            return  # a write that failed is tried again no sooner than a write may go
        tasks = self._tasks(record)
        if tasks is None or not tasks.tasks:
            self._unwritten.pop(issue, None)
            return  # no list (yet): nothing to show, and a shown one stays as it was
        mode = record.mode.value
        digest = list_digest(mode, tasks.tasks)
        if last is not None and last.digest == digest:
            self._unwritten.pop(issue, None)
            return
        if not due(last, digest, now):
            self._unwritten[issue] = record  # written once its time is up, even if retired
            return
        at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(now))
        body = checklist(mode, tasks.tasks, at)
        try:
            comment_id, added = self._write(issue, last, body)
        except LegionError as exc:
            self._failed(issue, str(exc))
            return
        synced = Synced(comment_id, digest, now)
        self._written[issue] = synced
        self._failed_at.pop(issue, None)
        self._unwritten.pop(issue, None)
        with suppress(LegionError):  # remembered here meanwhile (`_written`)
            self.comments.put(issue, synced)
            if added:
                self.log.append(issue, "task_sync", OutcomeKind.DONE, f"comment {comment_id}")

    def _failed(self, issue: str, why: str) -> None:
        if issue not in self._failed_at:
            with suppress(LegionError):
                self.log.append(issue, "task_sync", OutcomeKind.FAILED, why[:200])
        self._failed_at[issue] = self.clock()

    def _tasks(self, record: WorkerRecord) -> TaskList | None:
        with suppress(LegionError, OSError):
            return self.workers.roster.task_list(record)
        return None

    def _write(self, issue: str, last: Synced | None, body: str) -> tuple[str, bool]:
        """The comment written: the one kept edited, else (none yet, or a person deleted it)
        a new one. Its id, and whether it is new."""
        if last is not None:
            with suppress(NotFoundError):
                edited = self.tracker.edit_comment(
                    issue, last.comment_id, body, author=TASKS_AUTHOR
                )
                return str(edited.id), False
        added = self.tracker.add_comment(issue, body, author=TASKS_AUTHOR, by_legion=True)
        return str(added.id), True


def task_sync_step(workers: WorkerManager, tracker: Tracker, log: ActionLog) -> TaskSync | None:
    """The step, unless the `task_sync` setting turned it off."""
    if not workers.project.settings.task_sync:
        return None
    return TaskSync(workers, tracker, log)
