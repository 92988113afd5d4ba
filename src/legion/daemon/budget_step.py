"""The daemon's stop of a session whose model request the proxy refused for a spent budget.

The proxy refuses the request before it reaches the model and tells this step (from the
request's thread), which wakes the daemon: at its next tick the session is stopped (its window
closed, its capability revoked; its workspace and transcript kept, so the same session goes on
once it may), and for an issue's budget a human is asked, once, whether it may spend more
(the question a pass would ask before a start: `legion.reconcile.starts.ask_about_budget`).
The day's budget asks nobody: the day's end lifts it, and the workers stopped for it are
started again then, as any worker that stopped before it finished.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from legion.core.budget import Spent
from legion.proxy.ledger import Spender
from legion.reconcile.starts import ask_about_budget
from legion.sessions.workers import WorkerManager
from legion.store.actionlog import ActionLog, OutcomeKind
from legion.trackers.base import Tracker

from .steps import DONE, StepResult


class BudgetStop:
    def __init__(
        self,
        workers: WorkerManager,
        tracker: Tracker,
        log: ActionLog,
        token_budget: int | None,
        wake: Callable[[], None],
    ) -> None:
        self.workers = workers
        self.tracker = tracker
        self.log = log
        self.token_budget = token_budget
        self.wake = wake
        self._lock = threading.Lock()
        self._refused: dict[str, tuple[Spender, Spent]] = {}  # by session id

    def refused(self, spender: Spender, spent: Spent) -> None:
        """The proxy refused `spender`'s request for `spent` (called from its thread)."""
        with self._lock:
            self._refused[spender.session_id] = (spender, spent)
        self.wake()

    def run(self) -> StepResult:
        with self._lock:
            refused, self._refused = self._refused, {}
        for spender, spent in refused.values():
            if spender.issue:
                self._stop(spender, spent)
        return DONE

    def _stop(self, spender: Spender, spent: Spent) -> None:
        issue = spender.issue
        live = [
            view
            for view in self.workers.roster.views_of(issue)
            if view.record.session_id == spender.session_id and view.state.is_live
        ]
        for view in live:
            self.workers.retire(view)
            self.log.append(
                issue, "budget_stop", OutcomeKind.DONE, f"{view.record.window}: {spent.describe()}"
            )
        if spent.daily or self.token_budget is None:
            return
        if ask_about_budget(self.tracker, spent, self.token_budget):
            self.log.append(
                issue,
                "ask_human",
                OutcomeKind.DONE,
                f"token budget spent ({spent.used:,} of {spent.allowed:,}): asked a human",
            )
