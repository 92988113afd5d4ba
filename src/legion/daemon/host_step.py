"""What every daemon of a fleet does for the workers its host runs (`legion.sessions.placement`),
whether it leads or not: it carries out what was asked of it (a start, a prompt to type, an
answer to a question screen), reports the state of each worker it runs, closes each window of
a worker whose record is retired or no longer this host's (the leader retires a worker on
another host by its record alone), and sweeps its workspaces of Done issues.

Cheap at every tick: the commands are one query, a report is written only for what changed
since the last one, the windows are the tick's one look, and a sweep runs only when a worker
of this host was retired (or every `SWEEP_EVERY_S`).
"""

from __future__ import annotations

import time

from legion.core.fleet import hosted_state
from legion.core.liveness import SessionState
from legion.errors import LegionError
from legion.fleet.hosts import Fleet
from legion.sessions.observer import CONTROLLER_WINDOW
from legion.sessions.placement import (
    ANSWER,
    START,
    TYPE,
    HostCommand,
    HostSessions,
    Report,
    Seen,
)
from legion.sessions.workers import WorkerManager
from legion.store.actionlog import ActionLog, OutcomeKind
from legion.workspaces.setup import SetupPendingError
from legion.workspaces.sweep import sweep_done

from .steps import DONE, StepResult

# How often a follower sweeps its Done issues' workspaces besides when a worker of its own is
# retired (a workspace kept for its work is looked at again this often).
SWEEP_EVERY_S = 600.0


class HostWork:
    def __init__(self, workers: WorkerManager, log: ActionLog) -> None:
        self.workers = workers
        self.log = log
        self.placement: HostSessions = workers.placement
        self._reported: dict[int, Report] | None = None  # what this host last reported
        self._running: set[str] = set()  # the issues its workers were on at the last sweep
        self._swept_at = -SWEEP_EVERY_S  # when it last swept (monotonic)
        self._kept: dict[str, str] = {}  # a workspace kept, and why (said once)
        # The workers whose asked start waits for their workspace's setup, at the last pass
        # over the commands: worker id -> what its gate decided (logged when it changes).
        self._setup_waits: dict[int, str] = {}

    @property
    def host(self) -> str:
        return self.workers.host

    def commands(self) -> StepResult:
        """Carry out what was asked of this host under the fleet's current epoch (a start or a
        prompt by the leader, an answer from any host), oldest first. One asked under an older
        epoch is dropped: its leader was deposed, and the new one decides again from what it
        sees."""
        pending = self.placement.pending(self.host)
        waits: dict[int, str] = {}
        try:
            self._carry_out(pending, waits)
        except BaseException:
            # Those not looked at again wait as they did: unknown is not dead.
            self._setup_waits |= waits
            raise
        self._setup_waits = waits
        return DONE

    def _carry_out(self, pending: list[HostCommand], waits: dict[int, str]) -> None:
        """`commands`' work; `waits` gets each worker whose start waits for its setup."""
        if not pending:
            return
        lease = Fleet(self.workers.registry.db).leader()
        if any(command.kind == START for command in pending):
            # Retired windows close before new ones open. The leader counts a host's room by
            # its records and retires a worker just before it asks for the next start, so the
            # window a start replaces may still be open here: running both would exceed this
            # host's `max_sessions`. Read now, the records show that retirement.
            self.close_retired()
        for command in pending:
            if lease is None or command.epoch != lease.epoch:
                self.placement.finish(command.id, f"dropped: asked under epoch {command.epoch}")
                if command.kind == START:  # not started here: the new leader decides again
                    self._report_dead(command.worker_id)
                continue
            carry_out = {
                START: self.workers.start_asked,
                TYPE: self.workers.type_asked,
                ANSWER: self.workers.answer_asked,
            }.get(command.kind)
            if carry_out is None:
                self.placement.finish(command.id, f"dropped: unknown command {command.kind!r}")
                continue
            try:
                outcome = carry_out(command)
            except SetupPendingError as exc:
                # Pending still: tried again at the next pass (its runner pokes the wake-up
                # pipe when it ends); reported running meanwhile (`report`).
                waits[command.worker_id] = exc.action
                if self._setup_waits.get(command.worker_id) != exc.action:
                    detail = f"worker {command.worker_id}: {exc}"
                    self.log.append("-", "host_start", OutcomeKind.DEFERRED, detail)
                continue
            except LegionError as exc:
                outcome = f"failed: {exc}"
                if command.kind == START:
                    self._report_dead(command.worker_id)
            self.placement.finish(command.id, outcome)
            detail = f"worker {command.worker_id}: {outcome}"
            self.log.append("-", f"host_{command.kind}", OutcomeKind.DONE, detail)

    def _report_dead(self, worker_id: int) -> None:
        """A start that failed (or was dropped) here: the leader sees the worker dead now (and
        restarts it, as it does any that died), not after the start's allowance."""
        before = self._reports()
        states = {
            wid: (seen.state, seen.last_activity, seen.question)
            for wid, seen in before.items()
            if seen.host == self.host
        }
        states[worker_id] = (SessionState.DEAD, None, None)
        self.placement.report(self.host, states, before)
        self._reported = None  # read again at the next report

    def _reports(self) -> dict[int, Report]:
        if self._reported is None:
            self._reported = {
                wid: report
                for wid, report in self.placement.reports().items()
                if report.host == self.host
            }
        return self._reported

    def report(self) -> StepResult:
        """Report the state of each worker this host runs (only what changed)."""
        views = self.workers.roster.views(here_only=True)
        views = [view for view in views if view.record.host == self.host]
        before = self._reports()
        states: dict[int, Seen] = {}
        for view in views:
            waits = view.record.id in self._setup_waits and view.window is None
            started_here = view.window is not None or view.record.id in before
            state = hosted_state(view.state, waits, started_here=started_here)
            if state is None:
                continue  # its start is not carried out yet (`hosted_state`)
            activity = (
                self.workers.setup.activity(view.record.issue) if waits else view.last_activity
            )
            states[view.record.id] = (state, activity, view.question)
        self.placement.report(self.host, states, before)
        self._reported = {
            wid: Report(self.host, state, activity, 0.0, question)
            for wid, (state, activity, question) in states.items()
        }
        return DONE

    def sweep(self) -> StepResult:
        """Remove this host's workspaces of Done issues that no worker of its own is in,
        never losing work (`legion.workspaces.sweep`): when one of its workers was retired
        since the last look (an issue's last worker is retired once it is Done), and every
        `SWEEP_EVERY_S` besides. The leader sweeps its own in its pass."""
        here = {r.issue for r in self.workers.registry.current() if r.host == self.host}
        gone = self._running - here
        self._running = here
        now = time.monotonic()
        if not gone and now - self._swept_at < SWEEP_EVERY_S:
            return DONE
        self._swept_at = now
        for result in sweep_done(self.workers.tracker, self.workers.workspaces, here):
            if result.removed:
                self.log.append(result.issue, "sweep_workspace", OutcomeKind.DONE, result.reason)
            elif self._kept.get(result.issue) != result.reason:
                self.log.append(
                    result.issue, "sweep_workspace", OutcomeKind.DEFERRED, result.reason
                )
            self._kept[result.issue] = result.reason
        return DONE

    def close_retired(self) -> StepResult:
        """Close each worker window here whose session has no current record on this host: the
        leader retired it, or placed its issue's next session elsewhere."""
        ours = {
            record.session_id
            for record in self.workers.registry.current()
            if record.host == self.host
        }
        for window in self.workers.windows.list():
            if window.tag and window.tag not in ours and window.name != CONTROLLER_WINDOW:
                self.workers.windows.close_retired(window)
                self.log.append(
                    "-", "host_close", OutcomeKind.DONE, f"{window.name}: retired by the leader"
                )
        return DONE
