"""The daemon's bus steps: agents' statuses, then message delivery (both
`legion.services.agent_watch`'s), on one long-lived connection to the bus that a replaced or failing
bus file never breaks."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping

from legion.bus import Bus, bus_where, open_bus
from legion.bus.model import EventKind
from legion.config import Project
from legion.core.stamps import instant
from legion.errors import StoreError
from legion.services.agent_watch import Watcher, watch_lock
from legion.sessions.workers import WorkerManager
from legion.store.actionlog import ActionLog, OutcomeKind

from .steps import DONE, StepResult, log_failure


class BusSteps:
    def __init__(
        self,
        project: Project,
        workers: WorkerManager,
        log: ActionLog,
        env: Mapping[str, str],
        paused: Callable[[], str | None],
    ) -> None:
        self.project = project
        self.workers = workers
        self.log = log
        self.env = env
        self.paused = paused
        self._bus: Bus | None = None  # opened at the first delivery: a broken bus stops nothing
        self._watcher: Watcher | None = None
        # What is wrong with the bus's database, once said; None while it works.
        self.trouble: str | None = None
        self._failed_now = False  # a bus step failed on the bus's database this tick

    @property
    def bus(self) -> Bus:
        if self._bus is None:
            self._bus = open_bus(self.env)
        return self._bus

    def last_post(self, session_id: str) -> float | None:
        """When the session last posted on the bus (its progress, as far as the bus knows)."""
        agent = self.bus.agent_by_session(session_id)
        if agent is None:
            return None
        posted = self.bus.event_log(agent_id=agent.id, kinds=[EventKind.MESSAGE_POSTED], last=1)
        return instant(posted[-1].created_at) if posted else None

    def close(self) -> None:
        if self._bus is not None:
            self._bus.close()

    def _drop(self) -> None:
        """Close the bus's connection: the next use opens the file afresh."""
        bus, self._bus = self._bus, None
        self._watcher = None  # it holds the old connection
        if bus is not None:
            with contextlib.suppress(Exception):  # a broken connection is dropped all the same
                bus.close()

    def begin(self) -> None:
        """Before a tick's bus steps: a new look at the sessions, on the bus as it is now. A bus
        file put back from a copy (or moved aside) while the daemon runs: the open connection
        would go on reading the old file, and nothing would be delivered."""
        self._watcher = None
        if self._bus is not None and self._bus.replaced():
            self._drop()
            self.log.append(
                "-", "bus", OutcomeKind.DONE, f"{bus_where(self.env)} was replaced: reopened"
            )

    def failed(self, name: str, exc: StoreError) -> bool:
        """Whether `exc` is the bus's database failing (corrupt, unreadable, locked too long):
        then its connection is dropped, so each tick opens it afresh until it works again, and
        the failure is logged once, not at every tick."""
        if not str(exc).startswith(f"{bus_where(self.env)}:"):
            return False  # the project's own database: the step's failure, logged as usual
        self._drop()
        if self.trouble is None:
            log_failure(
                self.log, name, f"{exc} (the bus is opened afresh at each tick until it works)"
            )
        self.trouble = str(exc)
        self._failed_now = True
        return True

    def end(self) -> None:
        """After a tick's bus steps: say once that a bus which failed works again."""
        failed, self._failed_now = self._failed_now, False
        if not failed and self.trouble is not None:
            self.trouble = None
            self.log.append("-", "bus", OutcomeKind.DONE, "the bus works again")

    @property
    def watcher(self) -> Watcher:
        """The project's statuses and deliveries (`legion.services.agent_watch`), on one look at the
        sessions per tick, shared by both steps (a new one each tick)."""
        if self._watcher is None:
            workers = self.workers
            # In a fleet each host watches its own sessions, and only the leader starts one
            # (a dead worker's session resumed with its messages, wherever it is placed).
            self._watcher = Watcher(
                self.project,
                workers,
                self.bus,
                self.log,
                resume=not workers.in_fleet or workers.leading_epoch is not None,
                paused=self.paused,
                host=workers.host if workers.in_fleet else None,
            )
        return self._watcher

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """The project's watch lock: a `legion say` or a TUI delivering while no daemon ran
        finishes first, and this tick then finds it done."""
        return watch_lock(self.project)

    def sync_statuses(self) -> StepResult:
        """Keep each agent's status on the bus true to its session (`Watcher.sync_statuses`)."""
        self.watcher.sync_statuses()
        return DONE

    def deliver(self) -> StepResult:
        """Hand each pending message to the agents of this project it addresses
        (`Watcher.deliver`); a session whose turn has only just ended is come back to soon."""
        self.watcher.deliver()
        return StepResult(requeue_after=self.watcher.retry_in)
