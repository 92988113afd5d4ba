"""The daemon's follow-up of the workers its passes started: a pass does not wait for a
worker's CLI to start up (another issue's hand-off may be due meanwhile), so the daemon looks
at the pending starts between its ticks and at each: it answers a first-run dialog, and counts
a worker that died as it started toward the dispatch pause, as a waiting pass would have."""

from __future__ import annotations

from legion.reconcile.starts import log_record, settle_starts
from legion.sessions.pause import DispatchPause
from legion.sessions.workers import WorkerManager
from legion.store.actionlog import ActionLog

from .steps import DONE, StepResult

# How often the pending starts are looked at between ticks: a first-run dialog is answered
# this soon, and a start that failed is known this soon.
LOOK_EVERY_S = 0.1


class StartFollowUp:
    def __init__(self, workers: WorkerManager, pause: DispatchPause, log: ActionLog) -> None:
        self.workers = workers
        self.pause = pause
        self.log = log

    @property
    def pending(self) -> bool:
        return self.workers.starts.pending

    def run(self) -> StepResult:
        if not self.pending:
            return DONE
        looked = self.workers.starts.look()
        record = log_record(self.log)
        settle_starts(self.pause, self.workers.roster, record, looked.begun, looked.failed)
        return DONE
