"""The egress proxy's refusals (`legion.proxy.egress`): each counted by session and destination
in the project store (`egress_refusals`; past `MAX_REFUSED_PER_SESSION` destinations, a
session's others together), a session's first to a host said in the action log, and the counts
read back for `legion status` and the TUI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from legion.store import Store


@dataclass(frozen=True)
class Refused:
    """A connection refused by the allow-list: whose, and where to."""

    session_id: str
    issue: str
    host: str
    port: int


def counting(open_db: Callable[[], Store]) -> Callable[[Refused], None]:
    """What the daemon does with each refusal: count it (`record_refusal`), and say a session's
    first to a host in the action log."""

    def refused(refusal: Refused) -> None:
        from legion.store.actionlog import ActionLog, OutcomeKind

        db = open_db()
        try:
            if (counted := record_refusal(db, refusal)) is not None:
                refusal = counted
                shown = f"[{refusal.host}]" if ":" in refusal.host else refusal.host
                what = (
                    f"more than {MAX_REFUSED_PER_SESSION} destinations were refused; the "
                    "others are counted together"
                    if refusal.host == OTHER_HOSTS
                    else f"{shown}:{refusal.port} is not allowed by sandbox_egress"
                )
                ActionLog(db).append(
                    refusal.issue or "-",
                    "egress_refused",
                    OutcomeKind.FAILED,
                    f"session {refusal.session_id}: {what} (counted in `legion status`)",
                )
        finally:
            db.close()

    return refused


# The destinations counted apart for one session; the refusals of a session past them (one
# that asks name after name) are counted together, under `OTHER_HOSTS`, said once in the
# action log: a session cannot fill the store or the action log with names of its making.
MAX_REFUSED_PER_SESSION = 50
OTHER_HOSTS = "(other hosts)"


def record_refusal(db: Store, refusal: Refused) -> Refused | None:
    """Count `refusal` in the store; when it is the session's first to that host (on any
    port), the refusal as counted (the action log then says so), else None. Past
    `MAX_REFUSED_PER_SESSION` destinations, the session's others are counted together
    (`OTHER_HOSTS`, port 0)."""
    from legion.store import now

    stamp = now()
    with db.write() as conn:
        known = conn.execute(
            "SELECT 1 FROM egress_refusals WHERE session_id = ? AND host = ? AND port = ?",
            (refusal.session_id, refusal.host, refusal.port),
        ).fetchone()
        if known is None:
            held = conn.execute(
                "SELECT COUNT(*) AS held FROM egress_refusals WHERE session_id = ?",
                (refusal.session_id,),
            ).fetchone()
            if int(held["held"]) >= MAX_REFUSED_PER_SESSION:
                refusal = Refused(refusal.session_id, refusal.issue, OTHER_HOSTS, 0)
        conn.execute(
            "INSERT INTO egress_refusals (session_id, issue, host, port, count, first_at, "
            "last_at) VALUES (?, ?, ?, ?, 1, ?, ?) ON CONFLICT (session_id, host, port) DO "
            "UPDATE SET count = egress_refusals.count + 1, last_at = excluded.last_at",
            (refusal.session_id, refusal.issue, refusal.host, refusal.port, stamp, stamp),
        )
        row = conn.execute(
            "SELECT SUM(count) AS total FROM egress_refusals WHERE session_id = ? AND host = ?",
            (refusal.session_id, refusal.host),
        ).fetchone()
    return refusal if int(row["total"]) == 1 else None


@dataclass(frozen=True)
class RefusalCount:
    """How often a session was refused one destination (`legion status`)."""

    session_id: str
    issue: str
    host: str
    port: int
    count: int
    last_at: str

    def to_json(self) -> dict[str, object]:
        return {
            "session_id": self.session_id,
            "issue": self.issue,
            "host": self.host,
            "port": self.port,
            "count": self.count,
            "last_at": self.last_at,
        }

    def line(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        who = self.issue or self.session_id[:8]
        times = "once" if self.count == 1 else f"{self.count} times"
        where = shown if self.host == OTHER_HOSTS else f"{shown}:{self.port}"
        return f"{who}: {where} ({times})"


def refusal_counts(db: Store, limit: int = 10, *, since: str = "") -> list[RefusalCount]:
    """The destinations most lately refused, by session; `since`: only those refused at or
    after that instant (a `legion.store.now()`)."""
    with db.read() as conn:
        rows = conn.execute(
            "SELECT session_id, issue, host, port, count, last_at FROM egress_refusals "
            "WHERE last_at >= ? ORDER BY last_at DESC, host, port LIMIT ?",
            (since, limit),
        ).fetchall()
    return [
        RefusalCount(
            str(row["session_id"]),
            str(row["issue"]),
            str(row["host"]),
            int(row["port"]),
            int(row["count"]),
            str(row["last_at"]),
        )
        for row in rows
    ]
