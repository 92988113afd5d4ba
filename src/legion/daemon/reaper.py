"""The stuck-worker step: a worker is killed only when two signals agree it is stuck
(`legion.core.liveness.worker_stuck`); the reconciler then restarts it in its session."""

from __future__ import annotations

import time
from datetime import datetime

from legion.bus.model import AgentStatus
from legion.core.liveness import SessionState, worker_stuck
from legion.reconcile.starts import CREDENTIAL_HINT, hold_unreachable, log_record
from legion.sessions.pause import DispatchPause
from legion.sessions.roster import WorkerView
from legion.sessions.screen_watch import ScreenWatch
from legion.sessions.workers import WorkerManager
from legion.store.actionlog import ActionLog, OutcomeKind

from .steps import DONE, StepResult

# How often a worker's screen is looked at, at most: a tick comes at every change a `legion`
# command signals, and a stuck screen is judged over `stale_after` (minutes), so a look every
# few seconds loses nothing; a look at every tick cost one tmux client per worker.
SCREEN_EVERY_S = 5.0


class StuckWorkerReaper:
    def __init__(
        self,
        workers: WorkerManager,
        log: ActionLog,
        *,
        stale_after: float,
        pause: DispatchPause | None = None,
    ) -> None:
        self.workers = workers
        self.log = log
        self.stale_after = stale_after
        self.pause = pause
        # what each worker's screen shows, and since when: all the reaper remembers
        self.screens = ScreenWatch(workers.windows)
        self.looked_at: dict[str, float] = {}  # window id -> when its screen was last read
        # A tenth of `stale_after` when that is shorter (a test's seconds).
        self.screen_every = min(SCREEN_EVERY_S, stale_after / 10)

    def run(self) -> StepResult:
        """Kill a worker only when two signals agree: no transcript activity for `stale_after`
        seconds, and a screen that has not changed for as long. (Comparing with the last tick
        alone is not enough: ticks can come a moment apart, and a thinking CLI's spinner shows
        the same frame again within seconds.) The screens due for a look are read with one
        tmux client."""
        watched: set[str] = set()
        now = time.monotonic()
        # tmux not answering raises here: nothing is killed on what cannot be seen.
        # Idle counts too: a worker that ended its turn without finishing its mode (it still
        # holds worker-active, or the reconciler would have retired it) is as stuck.
        views = [
            view
            for view in self.workers.roster.views(here_only=True)
            if view.state in (SessionState.RUNNING, SessionState.IDLE) and view.window is not None
        ]
        due = [
            view.window.id
            for view in views
            if view.window is not None
            and now - self.looked_at.get(view.window.id, -1e9) >= self.screen_every
        ]
        screens = self.workers.windows.screens(due)
        for window_id in screens:
            self.looked_at[window_id] = now
        for view in views:
            assert view.window is not None
            if view.unreachable is not None:
                if not self.workers.starts.watching(view.window.id):
                    self._unreachable(view)  # (a start still watched: once it has begun)
                continue
            window_id = view.window.id
            screen = screens.get(window_id)
            if screen is None:  # not due (or gone meanwhile): as last seen
                screen_now = self.screens.seen(window_id)
                if screen_now is None:
                    continue
            else:
                screen_now = self.screens.look(window_id, screen, now)
            watched.add(window_id)
            started = _timestamp(view.record.started_at)
            if worker_stuck(
                view.last_activity, started, time.time(), screen_now, now, self.stale_after
            ):
                if not self.screens.confirmed_still(window_id):
                    continue  # it was a spinner's frame, seen again by chance
                self.workers.windows.close_window(view.window)
                quiet_for = f"{self.stale_after:g} s"
                self.log.append(
                    view.record.issue,
                    "kill_stuck_worker",
                    OutcomeKind.DONE,
                    f"{view.record.window}: no transcript activity for {quiet_for} "
                    "and no change on screen",
                )
        self.screens.keep_only(watched)
        self.looked_at = {key: at for key, at in self.looked_at.items() if key in watched}
        return DONE

    def _unreachable(self, view: WorkerView) -> None:
        """A worker whose CLI could not reach the model (no credential, or one refused) waits
        for a person to fix that and would look busy meanwhile: it is stopped at once, marked
        failed with what its CLI said, and dispatch paused (its line says how to fix it), not
        left for `stale_after`."""
        assert view.window is not None
        self.workers.windows.close_window(view.window)
        runtime = self.workers.runtimes.of(view.record)
        fix = runtime.no_credential(self.workers.env) or CREDENTIAL_HINT
        why = f"{view.record.window} could not reach the model: {view.unreachable}"
        self.workers.supervisor.mark_on_bus(view.record.session_id, AgentStatus.FAILED, why)
        record = log_record(self.log)
        record(view.record.issue, "worker_start", OutcomeKind.FAILED, why)
        if self.pause is not None:
            hold_unreachable(self.pause, record, why, fix)


def _timestamp(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()  # unreadable: treat as just started, never as stuck
