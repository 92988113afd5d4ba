"""What this host asks of the fleet's other hosts for its workers (`FleetAsks`), through the
store (`legion.sessions.placement`): where a worker's start goes (`place`, only while this host
leads the fleet), a start asked of another host, a prompt typed or a question answered in a
worker another host runs; and which of the commands asked of this host are still its own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from legion.config import Project
from legion.core.fleet import HostState, place, room
from legion.core.liveness import SessionState
from legion.diagnostics.tracing import span
from legion.errors import ConflictError, NoRoomError
from legion.fleet.hosts import Fleet
from legion.sessions.placement import (
    ANSWER,
    START,
    TYPE,
    HostCommand,
    HostSessions,
    wake_name,
)
from legion.sessions.registry import Registry, WorkerRecord
from legion.sessions.roster import WorkerView

# How long an answer for a worker on another host may take to reach that host's daemon (its
# NOTIFY wakes it at once; without it, its next tick), beside the time to type it in.
ANSWER_RELAY_S = 30.0


class FleetAsks:
    """This host's (`host`) asks of the others; `leading_epoch`: the epoch this host leads the
    fleet under now (None: it does not lead, and places no worker elsewhere)."""

    def __init__(
        self,
        project: Project,
        registry: Registry,
        placement: HostSessions,
        host: str,
        in_fleet: bool,
        leading_epoch: Callable[[], int | None],
    ) -> None:
        self.project = project
        self.registry = registry
        self.placement = placement
        self.host = host
        self.in_fleet = in_fleet
        self.leading_epoch = leading_epoch

    def place(self, identifier: str, from_host: str) -> str:
        """The host the issue's next session starts on (`legion.core.fleet.place`): always
        this one on one machine, and in a fleet under a leader that places none elsewhere."""
        if not self.in_fleet or self.leading_epoch() is None:
            return self.host
        with span("start: place", identifier):
            hosts, _ = Fleet(self.registry.db).hosts(self.project.settings.host_timeout)
        rooms = {
            host.name: room(host.state is HostState.UP, host.capacity, host.sessions, host.leader)
            for host in hosts
        }
        placed = place(self.host, from_host, rooms)
        if placed is None:
            raise NoRoomError(
                f"no host of the fleet has room for {identifier}'s worker (`legion hosts`)"
            )
        return placed

    def ask_start(self, host: str, record: WorkerRecord, prompt: str, from_host: str) -> WorkerView:
        """Ask `host` to start the worker recorded under it (`legion.sessions.placement`). Its
        workspace is that host's, recorded when it starts."""
        epoch = self.leading_epoch()
        assert epoch is not None
        with span("start: ask the host", record.issue):
            self.placement.ask(
                host,
                epoch,
                START,
                record.id,
                prompt,
                wake=wake_name(self.project.settings.project_id, host),
                from_host=from_host,
            )
        return WorkerView(record, None, SessionState.RUNNING, Path(), None, None)

    def ask_type(self, record: WorkerRecord, prompt: str) -> None:
        """Ask the host that runs `record`'s live session to type `prompt` into it."""
        epoch = self.leading_epoch()
        if epoch is None:
            raise ConflictError(
                f"{record.issue}'s worker runs on host {record.host}: only the fleet's leader "
                "gives it a prompt (the daemon there, or `legion say` to reach it)"
            )
        with span("resume: ask the host", record.issue):
            self.placement.ask(
                record.host,
                epoch,
                TYPE,
                record.id,
                prompt,
                wake=wake_name(self.project.settings.project_id, record.host),
            )

    def asked_of_me(self, command: HostCommand) -> WorkerRecord | None:
        """The worker a command is for, while it is current and this host's; else None."""
        record = self.registry.current_by_id(command.worker_id)
        return record if record is not None and record.host == self.host else None

    def ask_answer(self, view: WorkerView, answers: Sequence[str], timeout: float) -> WorkerView:
        """Answer the question of a worker another host runs: that host is asked (under the
        fleet's current epoch: a human's or the Oracle's answer may come through any host),
        and this waits until it says how it went."""
        record = view.record
        lease = Fleet(self.registry.db).leader()
        if lease is None:
            raise ConflictError(
                f"{record.issue}'s worker runs on host {record.host}, and no host leads the "
                "fleet now to pass the answer on; try again in a moment"
            )
        asked = self.placement.ask(
            record.host,
            lease.epoch,
            ANSWER,
            record.id,
            json.dumps(list(answers)),
            wake=wake_name(self.project.settings.project_id, record.host),
        )
        deadline = time.monotonic() + timeout + ANSWER_RELAY_S
        while time.monotonic() < deadline:
            outcome = self.placement.outcome(asked)
            if outcome and outcome.startswith("answered"):
                return view
            if outcome:
                raise ConflictError(f"host {record.host}: {outcome}")
            time.sleep(0.2)
        raise ConflictError(
            f"the answer was passed to host {record.host}, which has not typed it into "
            f"{record.window} yet; check with `legion workers`"
        )
