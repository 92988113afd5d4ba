"""The action log: an append-only record of what Legion did, to which issue, and how it went."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from legion.store import Store, now


class OutcomeKind(StrEnum):
    """How an action went. A `StrEnum`, so it renders (and is stored) as its value."""

    DONE = "done"
    DEFERRED = "deferred"  # not now (WIP limit, a worker finishing, dispatch paused); retried
    FAILED = "failed"  # it raised; the issue is left as it was and retried next pass
    PLANNED = "planned"  # a dry run: what would be done


@dataclass(frozen=True, slots=True)
class Entry:
    id: int
    at: str
    issue: str
    action: str
    outcome: OutcomeKind
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": self.at,
            "issue": self.issue,
            "action": self.action,
            "outcome": self.outcome.value,
            "detail": self.detail,
        }


class ActionLog:
    def __init__(self, db: Store) -> None:
        self._db = db

    @property
    def db(self) -> Store:
        return self._db

    def append(self, issue: str, action: str, outcome: OutcomeKind, detail: str = "") -> Entry:
        stamp = now()
        with self._db.write() as conn:
            entry_id = conn.execute(
                "INSERT INTO actions (at, issue, action, outcome, detail) VALUES (?, ?, ?, ?, ?) "
                "RETURNING id",
                (stamp, issue, action, outcome.value, detail),
            ).fetchone()[0]
        return Entry(int(entry_id), stamp, issue, action, outcome, detail)

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
            Entry(r["id"], r["at"], r["issue"], r["action"], OutcomeKind(r["outcome"]), r["detail"])
            for r in reversed(rows)
        ]

    def after(self, entry_id: int, issue: str | None = None) -> list[Entry]:
        """The entries written after entry `entry_id`, oldest first (`legion log --follow`)."""
        query = "SELECT * FROM actions WHERE id > ?"
        params: tuple[Any, ...] = (entry_id,)
        if issue is not None:
            query += " AND issue = ?"
            params = (*params, issue)
        with self._db.read() as conn:
            rows = conn.execute(query + " ORDER BY id", params).fetchall()
        return [
            Entry(r["id"], r["at"], r["issue"], r["action"], OutcomeKind(r["outcome"]), r["detail"])
            for r in rows
        ]

    def count_since(
        self, issue: str, action: str, since: str, *, reset_by: str | None = None
    ) -> int:
        """How many times `action` was done for `issue` since `since`; with `reset_by` (an
        action's name), only after the issue's last entry of that action."""
        query = (
            "SELECT COUNT(*) FROM actions WHERE issue = ? AND action = ? AND at >= ? "
            "AND outcome = ?"
        )
        params: tuple[Any, ...] = (issue, action, since, OutcomeKind.DONE.value)
        if reset_by is not None:
            query += (
                " AND id > COALESCE((SELECT MAX(id) FROM actions "
                "WHERE issue = ? AND action = ?), 0)"
            )
            params += (issue, reset_by)
        with self._db.read() as conn:
            row = conn.execute(query, params).fetchone()
        return int(row[0])
