"""The action log: an append-only record of what Legion did, to which issue, and how it went."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from legion.embedded.db import Database, now


@dataclass(frozen=True, slots=True)
class Entry:
    id: int
    at: str
    issue: str
    action: str
    outcome: str  # done, deferred, failed, planned (dry run)
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at,
            "issue": self.issue,
            "action": self.action,
            "outcome": self.outcome,
            "detail": self.detail,
        }


class ActionLog:
    def __init__(self, db: Database) -> None:
        self._db = db

    def append(self, issue: str, action: str, outcome: str, detail: str = "") -> Entry:
        stamp = now()
        with self._db.write() as conn:
            cursor = conn.execute(
                "INSERT INTO actions (at, issue, action, outcome, detail) VALUES (?, ?, ?, ?, ?)",
                (stamp, issue, action, outcome, detail),
            )
        assert cursor.lastrowid is not None
        return Entry(cursor.lastrowid, stamp, issue, action, outcome, detail)

    def tail(self, limit: int = 20, issue: str | None = None) -> list[Entry]:
        query = "SELECT * FROM actions"
        params: tuple[Any, ...] = ()
        if issue is not None:
            query += " WHERE issue = ?"
            params = (issue,)
        query += " ORDER BY id DESC LIMIT ?"
        with self._db.read() as conn:
            rows = conn.execute(query, (*params, limit)).fetchall()
        return [
            Entry(r["id"], r["at"], r["issue"], r["action"], r["outcome"], r["detail"])
            for r in reversed(rows)
        ]

    def count_since(self, issue: str, action: str, since: str) -> int:
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT COUNT(*) FROM actions WHERE issue = ? AND action = ? AND at >= ? "
                "AND outcome = 'done'",
                (issue, action, since),
            ).fetchone()
        return int(row[0])
