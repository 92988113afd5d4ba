"""The daemon's reconcile step (auto mode) and its report of a dispatch pause."""

from __future__ import annotations

import logging

from legion.reconcile import Reconciler
from legion.sessions.pause import DispatchPause

from .steps import DONE, StepResult

logger = logging.getLogger(__name__)


class ReconcileStep:
    def __init__(self, reconciler: Reconciler) -> None:
        self.reconciler = reconciler

    def run(self) -> StepResult:
        quiet = self.reconciler.quiet_for()
        if quiet > 0:  # a backend is rate limited: ask nothing until its reset
            return StepResult(requeue_after=quiet)
        outcomes = self.reconciler.run()
        # A worker that said it is done may still be finishing its last message: look again
        # when the reconciler says, rather than a whole tick later.
        waits = [o.retry_after for o in outcomes if o.retry_after is not None]
        return StepResult(requeue_after=min(waits)) if waits else DONE


class PauseReport:
    """Says once, in the daemon's log, that dispatch is paused and why; the reconciler wrote
    the same line to the action log."""

    def __init__(self, pause: DispatchPause, *, say: bool) -> None:
        self.pause = pause
        self.say = say
        self.reported: str | None = None  # the pause last reported; None: not paused

    def run(self) -> StepResult:
        reason = self.pause.reason()
        if reason is not None and reason != self.reported and self.say:
            logger.warning("%s", reason)
        self.reported = reason
        return DONE
