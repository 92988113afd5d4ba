"""The stuck-worker step: a worker is killed only when two signals agree it is stuck
(`legion.core.liveness.worker_stuck`); the reconciler then restarts it in its session."""

from __future__ import annotations

import hashlib
import time
from datetime import datetime

from legion.actionlog import ActionLog, OutcomeKind
from legion.core.liveness import ScreenSeen, SessionState, screen_seen, worker_stuck
from legion.sessions.workers import WorkerManager

from .steps import DONE, StepResult


class StuckWorkerReaper:
    def __init__(self, workers: WorkerManager, log: ActionLog, *, stale_after: float) -> None:
        self.workers = workers
        self.log = log
        self.stale_after = stale_after
        # window id -> what its screen shows, and since when: all the reaper remembers
        self.screens: dict[str, ScreenSeen] = {}

    def run(self) -> StepResult:
        """Kill a worker only when two signals agree: no transcript activity for `stale_after`
        seconds, and a screen that has not changed for as long. (Comparing with the last tick
        alone is not enough: ticks can come a moment apart, and a thinking CLI's spinner shows
        the same frame again within seconds.)"""
        seen: dict[str, ScreenSeen] = {}
        now = time.monotonic()
        # tmux not answering raises here: nothing is killed on what cannot be seen.
        for view in self.workers.roster.views():
            # Idle counts too: a worker that ended its turn without finishing its mode (it still
            # holds worker-active, or the reconciler would have retired it) is as stuck.
            if view.state not in (SessionState.RUNNING, SessionState.IDLE) or view.window is None:
                continue
            screen = self.workers.windows.screen(view.window.id)
            digest = hashlib.sha256(screen.encode()).hexdigest()
            before = self.screens.get(view.window.id)
            screen_now = seen[view.window.id] = screen_seen(before, view.window.id, digest, now)
            # A worker with no transcript yet is starting: its age counts from its start.
            last = view.last_activity or _timestamp(view.record.started_at)
            if worker_stuck(last, time.time(), screen_now, now, self.stale_after):
                self.workers.windows.close_window(view.window.id)
                quiet_for = f"{self.stale_after:g} s"
                self.log.append(
                    view.record.issue,
                    "kill_stuck_worker",
                    OutcomeKind.DONE,
                    f"{view.record.window}: no transcript activity for {quiet_for} "
                    "and no change on screen",
                )
        self.screens = seen
        return DONE


def _timestamp(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()  # unreadable: treat as just started, never as stuck
