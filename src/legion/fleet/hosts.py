"""The fleet in the project's store: each daemon's host (heartbeat, capacity, draining), and the
leader lease (`legion.core.fleet` holds the rules). Every time here is the store's clock (the
database server's), so hosts whose clocks differ still agree on who leads.

On one machine with SQLite this is a fleet of one: its daemon always leads. With a PostgreSQL
store every host's daemon writes its heartbeat here, and the one holding the lease runs the
controller and the reconciler (`legion.daemon.fleet_step`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from legion.config import Project
from legion.config.settings import Settings
from legion.core.fleet import (
    HostState,
    Lease,
    default_max_sessions,
    host_state,
    leads,
    take_lease,
)
from legion.errors import ConflictError, NotFoundError, StoreError
from legion.runtime.tmux import process_alive
from legion.store import Connection, Store, StoreView, in_fleet, open_store

LEADER = "leader"


def fleet_host(settings: Settings) -> str | None:
    """This machine's name in the fleet; None when the project is no fleet."""
    return host_name(settings) if in_fleet(settings) else None


def host_name(settings: Settings) -> str:
    """This machine's name in the fleet: `host_name`, else its hostname."""
    return settings.host_name or socket.gethostname() or "localhost"


def this_host(settings: Settings) -> tuple[str, int]:
    """This machine's name in the fleet and how many sessions it runs at once."""
    name = host_name(settings)
    if settings.max_sessions is not None:
        return name, settings.max_sessions
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = 4 * 1024**3
    return name, default_max_sessions(os.cpu_count() or 1, memory)


def this_machine() -> str:
    """This machine, as long as it runs: its machine id and this boot's id (a daemon recorded
    before a reboot is not running)."""
    parts = []
    for path in ("/etc/machine-id", "/proc/sys/kernel/random/boot_id"):
        try:
            parts.append(Path(path).read_text(encoding="utf-8").strip())
        except OSError:
            parts.append(socket.gethostname())
    return "/".join(parts)


class LeaseLostError(StoreError):
    """A write made by a daemon that believed it led, after another took the lease."""


@dataclass(frozen=True, slots=True)
class Host:
    name: str
    pid: int
    capacity: int
    draining: bool
    started_at: float
    heartbeat_at: float
    state: HostState
    leader: bool
    epoch: int | None  # the lease's epoch, for the leader
    sessions: int  # live workers recorded as running on it

    def to_json(self, now: float) -> dict[str, object]:
        return {
            "name": self.name,
            "state": self.state.value,
            "leader": self.leader,
            "epoch": self.epoch,
            "capacity": self.capacity,
            "sessions": self.sessions,
            "draining": self.draining,
            "pid": self.pid,
            "heartbeat_age_s": round(max(0.0, now - self.heartbeat_at), 1),
        }


def hosts_line(hosts: list[Host]) -> str | None:
    """The fleet in one line, when it is more than one host (`legion status`, the TUI's
    board): each host, its state, its sessions of its capacity, and the leader."""
    if len(hosts) < 2:
        return None
    return ", ".join(
        f"{host.name} ({host.state.value}{', leads' if host.leader else ''}, "
        f"{host.sessions}/{host.capacity})"
        for host in hosts
    )


class Fleet:
    def __init__(self, db: Store) -> None:
        self._db = db

    def _now(self, conn: Connection) -> float:
        return float(conn.execute(f"SELECT {self._db.clock_sql}").fetchone()[0])

    # -- a host's own writes ----------------------------------------------------------------------

    def join(
        self,
        name: str,
        capacity: int,
        host_timeout: float,
        *,
        machine: str | None = None,
        pid: int | None = None,
    ) -> None:
        """A daemon starts as host `name`: its first heartbeat (a drain is taken back). Refused
        while another live daemon is that host: one on another machine (its heartbeat within
        `host_timeout`), or one still running on this machine. Two daemons under one name
        would both take the lease as theirs."""
        machine = this_machine() if machine is None else machine
        pid = os.getpid() if pid is None else pid
        with self._db.write() as conn:
            now = self._now(conn)
            row = conn.execute(
                "SELECT machine, pid, heartbeat_at FROM hosts WHERE name = ?", (name,)
            ).fetchone()
            held = row is not None and int(row["pid"]) != 0  # 0: its daemon left
            if held and now - float(row["heartbeat_at"]) <= host_timeout:
                age = max(0.0, now - float(row["heartbeat_at"]))
                other = int(row["pid"])
                if row["machine"] != machine:
                    raise ConflictError(
                        f"host name {name!r} is in use by a daemon on another machine (its "
                        f"heartbeat {age:.0f} s ago): give each host its own `host_name`"
                    )
                if other != pid and process_alive(other):
                    raise ConflictError(
                        f"host name {name!r} is in use by another daemon on this machine "
                        f"(pid {other}): give each of its checkouts its own `host_name`"
                    )
            conn.execute(
                "INSERT INTO hosts (name, machine, pid, capacity, started_at, heartbeat_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                "machine = excluded.machine, pid = excluded.pid, capacity = excluded.capacity, "
                "started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, "
                "draining = 0",
                (name, machine, pid, capacity, now, now),
            )

    def heartbeat(self, name: str, capacity: int) -> None:
        """Host `name`, which joined, is alive now."""
        with self._db.write() as conn:
            conn.execute(
                f"UPDATE hosts SET capacity = ?, heartbeat_at = {self._db.clock_sql} "
                "WHERE name = ?",
                (capacity, name),
            )

    def lead(self, name: str, duration: float) -> Lease | None:
        """Take or renew the leader lease for host `name`; the lease it holds now, or None when
        another host leads. A draining host gives it up once no worker runs on it (the
        sessions of a project run on its leader's host: it finishes them first)."""
        with self._db.write() as conn:
            now = self._now(conn)
            current = _lease(conn)
            draining = conn.execute("SELECT draining FROM hosts WHERE name = ?", (name,)).fetchone()
            running = conn.execute(
                "SELECT COUNT(*) FROM workers WHERE ended_at IS NULL AND host = ?", (name,)
            ).fetchone()[0]
            willing = not (draining is not None and draining[0]) or int(running) > 0
            taken = take_lease(current, name, now, duration, willing=willing)
            if taken is None:
                if current is not None and current.holder == name and not willing:
                    conn.execute("UPDATE leases SET expires_at = ? WHERE name = ?", (now, LEADER))
                return None
            conn.execute(
                "INSERT INTO leases (name, holder, epoch, expires_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
                "epoch = excluded.epoch, expires_at = excluded.expires_at",
                (LEADER, taken.holder, taken.epoch, taken.expires_at),
            )
            return taken

    def leave(
        self,
        name: str,
        *,
        pid: int | None = None,
        keep_lease: bool = False,
        keep_host: bool = False,
    ) -> None:
        """Host `name`'s daemon stops: it leads no more (another may lead at once; with
        `keep_lease`, once the lease runs out: its sessions go on until then), and its name is
        free for the next daemon (a stopping process may outlive its pid file a moment). With
        `keep_host` (a follower whose sessions go on), the host is not marked stopped: it is
        lost once its last heartbeat is `host_timeout` old, and its sessions are restarted
        elsewhere only then, when its fence has closed them."""
        pid = os.getpid() if pid is None else pid
        with self._db.write() as conn:
            now = self._now(conn)
            if not keep_lease:
                conn.execute(
                    "UPDATE leases SET expires_at = ? "
                    "WHERE name = ? AND holder = ? AND expires_at > ?",
                    (now, LEADER, name, now),
                )
            if not keep_host:
                conn.execute("UPDATE hosts SET pid = 0 WHERE name = ? AND pid = ?", (name, pid))

    def check(self, name: str, epoch: int, conn: Connection) -> None:
        """In a write's own transaction: `name` still leads under `epoch`, or LeaseLostError."""
        if not leads(_lease(conn), name, epoch, self._now(conn)):
            raise LeaseLostError(
                f"host {name} no longer leads (epoch {epoch}): another host took the lease; "
                "nothing was written"
            )

    # -- the operator's ---------------------------------------------------------------------------

    def drain(self, name: str, *, draining: bool = True) -> None:
        with self._db.write() as conn:
            changed = conn.execute(
                "UPDATE hosts SET draining = ? WHERE name = ?", (int(draining), name)
            ).rowcount
        if not changed:
            raise NotFoundError(f"no host {name!r} in the fleet (see `legion hosts`)")

    # -- reading ----------------------------------------------------------------------------------

    def draining(self, name: str) -> bool:
        with self._db.read() as conn:
            row = conn.execute("SELECT draining FROM hosts WHERE name = ?", (name,)).fetchone()
        return row is not None and bool(row[0])

    def leader(self) -> Lease | None:
        """The lease while it holds (None: nobody leads now)."""
        with self._db.read() as conn:
            current = _lease(conn)
            now = self._now(conn)
        return current if current is not None and current.expires_at > now else None

    def hosts(self, host_timeout: float) -> tuple[list[Host], float]:
        """Every host that ever joined, with its state; and the store's time now."""
        with self._db.read() as conn:
            now = self._now(conn)
            current = _lease(conn)
            rows = conn.execute("SELECT * FROM hosts ORDER BY name").fetchall()
            counts = {
                row[0]: int(row[1])
                for row in conn.execute(
                    "SELECT host, COUNT(*) FROM workers WHERE ended_at IS NULL GROUP BY host"
                ).fetchall()
            }
        lead = current if current is not None and current.expires_at > now else None
        return [
            Host(
                name=row["name"],
                pid=int(row["pid"]),
                capacity=int(row["capacity"]),
                draining=bool(row["draining"]),
                started_at=float(row["started_at"]),
                heartbeat_at=float(row["heartbeat_at"]),
                state=host_state(
                    float(row["heartbeat_at"]),
                    bool(row["draining"]),
                    now,
                    host_timeout,
                    left=int(row["pid"]) == 0,
                ),
                leader=lead is not None and lead.holder == row["name"],
                epoch=lead.epoch if lead is not None and lead.holder == row["name"] else None,
                sessions=counts.get(row["name"], 0),
            )
            for row in rows
        ], now


def hand_over(project: Project, pid: int | None) -> None:
    """`legion stop --all` closed this host's sessions after its daemon (`pid`, None: none
    ran) stopped: the lease that daemon kept for them is given up now, so another host leads
    at its next heartbeat, and its host is marked stopped, so the leader restarts its workers
    elsewhere at once. Nothing on one machine (SQLite)."""
    if not in_fleet(project.settings):
        return
    store = open_store(project)
    try:
        Fleet(store).leave(host_name(project.settings), pid=-1 if pid is None else pid)
    finally:
        store.close()


def _lease(conn: Connection) -> Lease | None:
    row = conn.execute(
        "SELECT holder, epoch, expires_at FROM leases WHERE name = ?", (LEADER,)
    ).fetchone()
    if row is None:
        return None
    return Lease(str(row["holder"]), int(row["epoch"]), float(row["expires_at"]))


# The lease a `legion` command the daemon runs for a session (`legion.run`) writes under:
# "<host> <epoch>". Its writes are fenced on it, as the daemon's own are.
LEASE_ENV = "LEGION_FENCE_LEASE"


def fenced_on_lease(store: Store, env: Mapping[str, str]) -> Store:
    """`store`, fenced on the lease `env` names (`LEASE_ENV`), else as it is."""
    host, _, epoch = env.get(LEASE_ENV, "").partition(" ")
    if not host or not epoch.isdigit():
        return store
    fenced = FencedStore(store, host)
    fenced.epoch = int(epoch)
    return fenced


class FencedStore(StoreView):
    """The daemon's store while it leads: each write first checks, in its own transaction,
    that the lease is still this host's under the epoch it led with; a daemon that lost it (a
    pause, a cut link) writes nothing. Unfenced while `epoch` is None (it does not lead)."""

    def __init__(
        self, store: Store, host: str, epoch_of: Callable[[], int | None] | None = None
    ) -> None:
        """`epoch_of`: where the epoch is read at each write (another FencedStore's: `over`),
        else `epoch`, set by whoever leads."""
        super().__init__(store)
        self._fleet = Fleet(store)
        self.host = host
        self.epoch: int | None = None
        self._epoch_of = epoch_of

    def over(self, store: Store) -> FencedStore:
        """`store` (another opening of this project's store: a relay call's) fenced on this
        one's lease, under whatever epoch it leads with when that writes."""
        return FencedStore(store, self.host, lambda: self.epoch)

    @property
    def lease(self) -> tuple[str, int] | None:
        """(host, epoch) while it leads: what a `legion` run for it fences its writes on
        (`LEASE_ENV`)."""
        epoch = self._epoch_of() if self._epoch_of is not None else self.epoch
        return None if epoch is None else (self.host, epoch)

    @contextmanager
    def _fenced(self) -> Iterator[Connection]:
        with self._store.write() as conn:
            lease = self.lease
            if lease is not None:
                self._fleet.check(lease[0], lease[1], conn)
            yield conn

    def write(self) -> AbstractContextManager[Connection]:
        return self._fenced()
