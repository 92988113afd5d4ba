"""This daemon's place in the fleet (`legion.fleet.hosts`): its heartbeat, and the leader lease.

Every session of a project runs on its leader's host (the controller and the workers): a
follower is a standby. A thread of its own writes the heartbeat and takes or renews the lease
every third of `host_timeout`, so a long pass (a slow tracker) never lets the lease lapse. The
tick's first step (`FleetMembership.follow`) reads what the thread found: a daemon that begins
to lead says so, and its writes are fenced on its epoch from then on (`FencedStore`); one that
stopped leading stops every session it runs at once (the new leader takes them over, each under
its session id) and runs only what a follower runs. On one machine with SQLite the daemon
always leads.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from legion.config import Project
from legion.core.fleet import Lease
from legion.errors import LegionError, StoreUnreachableError
from legion.fleet.hosts import FencedStore, Fleet, this_host
from legion.store import in_fleet, open_store
from legion.store.actionlog import ActionLog, OutcomeKind

from .steps import DONE, StepResult

logger = logging.getLogger(__name__)

RETRY_S = 1.0  # between two heartbeats that could not reach the store
WATCH_S = 0.2  # how often the watchdog looks whether the lease ran out by this machine's clock
# A lease ends here this part of its time before it can end in the store: the sessions are
# closed by the time another host may take the lease and start them.
STOP_MARGIN = 0.1


class FleetMembership:
    def __init__(
        self,
        project: Project,
        fenced: FencedStore,
        log: ActionLog,
        stop_sessions: Callable[[], object],
        wake: Callable[[], object] = lambda: None,
        unreachable: Callable[[str], object] | None = None,
        sessions_running: Callable[[], bool] = lambda: False,
    ) -> None:
        self.project = project
        self.name, self.capacity = this_host(project.settings)
        self.duration = project.settings.host_timeout
        self.fenced = fenced
        self.log = log
        self.stop_sessions = stop_sessions
        self.sessions_running = sessions_running
        # Told the lease's end by this machine's clock at each change (None: no lease): the
        # fence (`legion.fleet.fence`), which closes the sessions if the daemon dies.
        self.on_lease: Callable[[float | None], object] = lambda ends: None
        # In a fleet (a PostgreSQL store) another host may start these sessions; on one
        # machine nobody else can.
        self.in_fleet = in_fleet(project.settings)
        self.wake = wake  # the daemon's loop, when the lease changed hands
        # Where a heartbeat that found the store's server unreachable says so (the daemon's
        # one line for the outage), else its own line.
        self.unreachable = unreachable
        self._lease: Lease | None = None  # what the thread last found
        # When that lease ends by this machine's monotonic clock: counted from before the
        # call that took it, so never later than by the store's (a thread that can no longer
        # reach the store stops leading in time).
        self._lease_ends = 0.0
        # Until when this host's last heartbeat keeps it from being taken for lost, by this
        # machine's clock (as the lease's end).
        self._alive_ends = float("inf")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watchdog: threading.Thread | None = None
        self._failing: str | None = None  # the thread's last error, said once
        self.leading_epoch: int | None = None  # what the tick acts on

    # -- the thread -------------------------------------------------------------------------------

    def start(self) -> None:
        """Join the fleet: a first heartbeat and a first try at the lease now (the first tick
        knows whether it leads), then the thread."""
        store = open_store(self.project)
        try:
            fleet = Fleet(store)
            beat_at = time.monotonic()
            fleet.join(self.name, self.capacity, self.duration)
            self._lead(fleet, beat_at)
        finally:
            store.close()
        self._thread = threading.Thread(target=self._beat, name="legion-fleet", daemon=True)
        self._thread.start()
        self._watchdog = threading.Thread(
            target=self._watch, name="legion-fleet-watchdog", daemon=True
        )
        self._watchdog.start()

    def _lead(self, fleet: Fleet, beat_at: float) -> None:
        """Take or renew the lease, after a heartbeat that the store took, asked at `beat_at`
        (monotonic). Either holds for a lease's time from when it was asked: the fence is told
        so, leader or not (a follower's sessions are restarted elsewhere once it is lost)."""
        asked = time.monotonic()
        lease = fleet.lead(self.name, self.duration)
        with self._lock:
            before = self._lease.epoch if self._lease is not None else None
            self._lease = lease
            self._lease_ends = asked + self.duration * (1 - STOP_MARGIN)
            self._alive_ends = beat_at + self.duration * (1 - STOP_MARGIN)
            self.on_lease(self._lease_ends if lease is not None else self._alive_ends)
        if (lease.epoch if lease is not None else None) != before:
            self.wake()

    def _watch(self) -> None:
        """The watchdog: a thread that does nothing but look at the clock, so the sessions stop
        on time even while the heartbeat or the loop waits on a store that does not answer."""
        while not self._stop.wait(WATCH_S):
            self._lapsed()

    def _lapsed(self) -> None:
        """The lease this daemon held ran out by its own clock and could not be renewed (the
        store unreachable), or, in a fleet, its host's last heartbeat is as old: its sessions
        stop now, whatever the loop is doing, before another host may take the lease, or
        take this host for lost, and start them."""
        now = time.monotonic()
        with self._lock:
            held = self._lease is not None and now >= self._lease_ends
            if held:
                self._lease = None
            # A follower cut off as long: the leader is about to take it for lost and start
            # the workers it runs elsewhere.
            lost = not held and self._lease is None and now >= self._alive_ends
            if lost:
                self._alive_ends = float("inf")  # once, until a heartbeat lands again
        if held or (lost and self.in_fleet):
            with contextlib.suppress(LegionError):
                self.stop_sessions()
        if held:
            self.on_lease(None)
            self.wake()

    def _beat(self) -> None:
        store = None
        try:
            pause = self.duration / 3
            while not self._stop.wait(pause):
                pause = self.duration / 3
                try:
                    if store is None:
                        store = open_store(self.project)
                    fleet = Fleet(store)
                    beat_at = time.monotonic()
                    fleet.heartbeat(self.name, self.capacity)
                    self._lead(fleet, beat_at)
                    self._failing = None
                except LegionError as exc:
                    # Again within a second: the lease is renewed as soon as the store answers.
                    pause = min(pause, RETRY_S)
                    # The store unreachable: no lease is renewed, so another host may lead
                    # once its time is up; by then this one has stopped leading (`_watch`).
                    if isinstance(exc, StoreUnreachableError) and self.unreachable is not None:
                        self.unreachable(str(exc))
                    elif str(exc) != self._failing:
                        self._failing = str(exc)
                        logger.warning("fleet heartbeat: %s", exc, extra={"step": "fleet"})
        finally:
            if store is not None:
                store.close()

    def stop(self) -> bool:
        """Leave: the thread ends, and the host's name is free for the next daemon. A lease held
        is given up (another host leads at once), but in a fleet while this host's sessions
        go on (`legion stop` leaves them running): it is kept until it runs out, so no other
        host starts them meanwhile. Whether it was kept: then the fence closes them when it
        runs out, unless a daemon runs here again by then and takes it back."""
        self._stop.set()
        for thread in (self._thread, self._watchdog):
            if thread is not None:
                thread.join(10)
        running = self.in_fleet and self.sessions_running()
        keep_lease = running and self._epoch() is not None
        # A follower's sessions (workers the leader placed here) go on too: its host is not
        # marked stopped, and another host takes them once it is lost and they are fenced.
        keep_host = running and not keep_lease
        # What the daemon writes as it stops (its last log line) is no leader's decision.
        self.leading_epoch = self.fenced.epoch = None
        with contextlib.suppress(LegionError):
            store = open_store(self.project)
            try:
                Fleet(store).leave(self.name, keep_lease=keep_lease, keep_host=keep_host)
            finally:
                store.close()
        return running

    # -- the tick's step --------------------------------------------------------------------------

    @property
    def leading(self) -> bool:
        return self.leading_epoch is not None

    def _epoch(self) -> int | None:
        """The epoch this daemon leads under, as the thread last found it and while the lease
        lasts by this machine's clock; None: it does not lead."""
        with self._lock:
            lease, ends = self._lease, self._lease_ends
        return lease.epoch if lease is not None and time.monotonic() < ends else None

    def changed(self) -> bool:
        """Whether the tick should look again (the loop asks while it waits)."""
        return self._epoch() != self.leading_epoch

    def follow(self) -> StepResult:
        """Act on what the thread found: begin to lead, go on, or stop leading. A follower
        looks again within a third of `host_timeout` (it may have to take over)."""
        epoch = self._epoch()
        waiting = StepResult(requeue_after=self.duration / 3) if epoch is None else DONE
        if epoch == self.leading_epoch:
            return waiting
        was = self.leading_epoch
        self.leading_epoch = epoch
        self.fenced.epoch = epoch
        if epoch is not None and self.in_fleet:  # on one machine it always leads: no news
            self.log.append(
                "-",
                "fleet_lead",
                OutcomeKind.DONE,
                f"host {self.name} leads (epoch {epoch})",
            )
        elif was is not None:
            self.stop_sessions()
            self.log.append(
                "-",
                "fleet_follow",
                OutcomeKind.DONE,
                f"host {self.name} no longer leads (epoch {was} is another host's now); "
                "its sessions stopped",
            )
        return waiting
