"""The fleet's rules, pure: who leads, when a host is lost, how many sessions a host takes.

Every daemon of a project is a host (`host_name`) with a heartbeat and a capacity. One of them
leads: it holds the leader lease, a row in the store with the holder, an epoch and when it
expires, all times by the store's clock (never a host's). The leader runs the controller and the
reconciler's passes; the others keep their heartbeat and wait to lead. A lease is taken when
nobody holds it or it expired, renewed by its holder before it expires, and given up by a
draining host. Each change of holder raises the epoch, so a write made under an old epoch (a
leader paused past its lease, or cut off) is known for what it is and refused
(`legion.fleet.hosts`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from legion.core.liveness import SessionState

# What one busy Claude Code session holds: about a core, and 250-300 MB.
SESSION_MEMORY_BYTES = 512 * 1024 * 1024
SESSIONS_PER_CORE = 2


@dataclass(frozen=True, slots=True)
class Lease:
    holder: str
    epoch: int
    expires_at: float  # the store's clock, seconds since the epoch


def take_lease(
    current: Lease | None, me: str, now: float, duration: float, *, willing: bool = True
) -> Lease | None:
    """The lease after host `me` asks for it at `now`: renewed or taken (a new epoch when the
    holder changes), or None when someone else holds it or `me` gives it up (not `willing`:
    draining). A lease that expired is nobody's."""
    held = current is not None and current.expires_at > now
    if held and current is not None and current.holder != me:
        return None
    if not willing:
        return None
    epoch = current.epoch if current is not None else 0
    if not (held and current is not None and current.holder == me):
        epoch += 1
    return Lease(me, epoch, now + duration)


def leads(current: Lease | None, me: str, epoch: int, now: float) -> bool:
    """Whether `me`, leading under `epoch`, still does at `now` (its writes are fenced on it)."""
    return (
        current is not None
        and current.holder == me
        and current.epoch == epoch
        and current.expires_at > now
    )


class HostState(StrEnum):
    UP = "up"
    DRAINING = "draining"
    LOST = "lost"  # no heartbeat for longer than `host_timeout`
    STOPPED = "stopped"  # its daemon stopped and left


def host_state(
    heartbeat_at: float, draining: bool, now: float, host_timeout: float, *, left: bool = False
) -> HostState:
    if left:
        return HostState.STOPPED
    if now - heartbeat_at > host_timeout:
        return HostState.LOST
    return HostState.DRAINING if draining else HostState.UP


def default_max_sessions(cores: int, memory_bytes: int) -> int:
    """How many sessions a host runs at once unless told: two a core, and half a GiB each of
    its memory, whichever is fewer; at least one."""
    by_memory = memory_bytes // SESSION_MEMORY_BYTES
    return max(1, min(cores * SESSIONS_PER_CORE, by_memory))


# The sessions the leader's host runs besides workers: the controller.
LEADERS_OWN_SESSIONS = 1


@dataclass(frozen=True, slots=True)
class Room:
    """A host as placement sees it: whether it takes new sessions (up, not draining) and how
    many more workers it has room for."""

    open: bool
    free: int


def room(open: bool, capacity: int, workers: int, leads: bool) -> Room:
    """A host's room for workers: its capacity (`max_sessions`) less the workers it runs, and
    less the controller where it leads."""
    return Room(open, capacity - workers - (LEADERS_OWN_SESSIONS if leads else 0))


def worker_capacity(open_capacities: Iterable[int]) -> int:
    """How many workers the fleet runs at once: the capacities of its open hosts, less the
    controller its leader runs."""
    return sum(open_capacities) - LEADERS_OWN_SESSIONS


def place(here: str, holder: str, rooms: Mapping[str, Room]) -> str | None:
    """Which host starts an issue's next session, or None when no host has room (it waits).

    The host that holds the issue's workspace and transcript (`holder`, where its last worker
    ran; "" for none) when it has room: a resume there needs no checkpoint. Else the leader's
    own host (`here`) when it has room: no round trip through the store to start or to watch
    it. Else the open host with the most room (by name on a tie), which restores the issue's
    last checkpoint."""

    def has_room(name: str) -> bool:
        room = rooms.get(name)
        return room is not None and room.open and room.free > 0

    for preferred in (holder, here):
        if preferred and has_room(preferred):
            return preferred
    candidates = sorted((-room.free, name) for name, room in rooms.items() if has_room(name))
    return candidates[0][1] if candidates else None


def remote_session_state(
    host: HostState | None,
    reported: SessionState | None,
    since_start: float,
    start_allowance: float,
) -> SessionState:
    """The state the leader sees of a worker another host runs: dead
    when that host is lost, stopped or unknown; else what the host last reported of it; else,
    before its first report, running (starting) for `start_allowance` seconds from the start
    the leader asked for, and dead after (the host never started it)."""
    if host not in (HostState.UP, HostState.DRAINING):
        return SessionState.DEAD
    if reported is not None:
        return reported
    return SessionState.RUNNING if since_start <= start_allowance else SessionState.DEAD


def hosted_state(
    seen: SessionState, waits_for_setup: bool, *, started_here: bool = True
) -> SessionState | None:
    """What a host reports of a worker of its own, seen `seen` here; None: nothing yet.

    A worker whose start the leader asked and which waits for its workspace's setup (running,
    or backing off after a failure: `legion.core.workspace_setup`) has no window yet, so it is
    seen dead; it is reported running (starting) instead, and its START stays pending: the
    leader neither takes it for dead nor starts it again elsewhere while its setup goes on.

    A worker this host has not `started_here` (no window, never reported by it) is one whose
    start the leader is asking for and this host has not carried out yet (the leader records
    the worker, then asks): it is not reported at all, so the leader counts it as starting
    for its start allowance. Reported dead, it would be started again, and the two starts of
    one session would meet here."""
    if seen is not SessionState.DEAD:
        return seen
    if waits_for_setup:
        return SessionState.RUNNING
    return seen if started_here else None
