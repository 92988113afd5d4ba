"""The fleet's rules, pure: who leads, when a host is lost, how many sessions a host takes.

Every daemon of a project is a host (`host_name`) with a heartbeat and a capacity. One of them
leads: it holds the leader lease, a row in the store with the holder, an epoch and when it
expires, all times by the store's clock (never a host's). The leader runs the controller and the
reconciler's passes; the others keep their heartbeat and wait to lead. A lease is taken when
nobody holds it or it expired, renewed by its holder before it expires, and given up by a
draining host. Each change of holder raises the epoch, so a write made under an old epoch (a
leader paused past its lease, or cut off) is known for what it is and refused (`legion.fleet`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

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
