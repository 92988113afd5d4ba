"""The action log: an append-only record of what Legion did, to which issue, and how it went;
for the decision table's actions, what each was decided from (`legion.core.decision_log`), and
for a person's or the controller's writes, who made them."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from legion.core.decision_log import Decided, DecisionKey, Logged
from legion.errors import LegionError
from legion.store import Store, now

logger = logging.getLogger(__name__)

# The most of a kept decision read back (one is about 1 KB; a larger one was not Legion's).
MAX_DECIDED = 64 * 1024
# The most of a person's or a session's write's detail kept (label names, blockers).
MAX_NOTE = 200


class OutcomeKind(StrEnum):
    """How an action went. A `StrEnum`, so it renders (and is stored) as its value."""

    DONE = "done"
    DEFERRED = "deferred"  # not now (WIP limit, a worker finishing, dispatch paused); retried
    FAILED = "failed"  # it raised; the issue is left as it was and retried next pass
    PLANNED = "planned"  # a dry run: what would be done
    SKIPPED = "skipped"  # the table left the issue as it is (logged when that changed)


@dataclass(frozen=True, slots=True)
class Entry:
    id: int
    at: str
    issue: str
    action: str
    outcome: OutcomeKind
    detail: str
    decided: Decided | None = None  # what the table decided it from; None for other entries
    author: str = ""  # who wrote it, for a person's or the controller's write; "" for Legion

    @property
    def said(self) -> str:
        """Its detail with who made it, as the log views show it: `to Done by ada`."""
        if not self.author:
            return self.detail
        return f"{self.detail} by {self.author}" if self.detail else f"by {self.author}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": self.at,
            "issue": self.issue,
            "action": self.action,
            "outcome": self.outcome.value,
            "detail": self.detail,
            "author": self.author or None,
            "decided": None if self.decided is None else self.decided.to_json(),
        }


def _decided(text: str) -> Decided | None:
    """A stored decision, or None (none kept, or one this version cannot read: an entry is
    never lost for it)."""
    if not text or len(text) > MAX_DECIDED:
        return None
    try:
        data = json.loads(text)
        return Decided.from_json(data) if isinstance(data, Mapping) else None
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        return None


def _entry(row: Any) -> Entry:  # a row of either store, read by column name
    return Entry(
        row["id"],
        row["at"],
        row["issue"],
        row["action"],
        OutcomeKind(row["outcome"]),
        row["detail"],
        _decided(row["decided"]),
        row["author"],
    )


class ActionLog:
    def __init__(self, db: Store) -> None:
        self._db = db

    @property
    def db(self) -> Store:
        return self._db

    def append(
        self,
        issue: str,
        action: str,
        outcome: OutcomeKind,
        detail: str = "",
        *,
        decided: Decided | None = None,
        author: str = "",
    ) -> Entry:
        stamp = now()
        kept = "" if decided is None else json.dumps(decided.to_json(), sort_keys=True)
        with self._db.write() as conn:
            entry_id = conn.execute(
                "INSERT INTO actions (at, issue, action, outcome, detail, decided, author) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (stamp, issue, action, outcome.value, detail, kept, author),
            ).fetchone()[0]
        return Entry(int(entry_id), stamp, issue, action, outcome, detail, decided, author)

    def tail(self, limit: int = 20, issue: str | None = None) -> list[Entry]:
        query = "SELECT * FROM actions"
        params: tuple[Any, ...] = ()
        if issue is not None:
            query += " WHERE issue = ?"
            params = (issue,)
        query += " ORDER BY id DESC LIMIT ?"
        with self._db.read() as conn:
            rows = conn.execute(query, (*params, limit)).fetchall()
        return [_entry(r) for r in reversed(rows)]

    def after(self, entry_id: int, issue: str | None = None) -> list[Entry]:
        """The entries written after entry `entry_id`, oldest first (`legion log --follow`)."""
        query = "SELECT * FROM actions WHERE id > ?"
        params: tuple[Any, ...] = (entry_id,)
        if issue is not None:
            query += " AND issue = ?"
            params = (*params, issue)
        with self._db.read() as conn:
            rows = conn.execute(query + " ORDER BY id", params).fetchall()
        return [_entry(r) for r in rows]

    def last_decisions(self) -> dict[str, DecisionKey]:
        """Each issue's last decision logged (a pass logs a skip only when it changed)."""
        query = (
            "SELECT issue, decided FROM actions WHERE id IN "
            "(SELECT MAX(id) FROM actions WHERE decided != '' GROUP BY issue)"
        )
        with self._db.read() as conn:
            rows = conn.execute(query).fetchall()
        found = {}
        for row in rows:
            decided = _decided(row["decided"])
            if decided is not None:
                found[row["issue"]] = decided.key
        return found

    def last_decided(self, issue: str) -> Entry | None:
        """The issue's newest entry that keeps a decision (`legion why`), or None."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT * FROM actions WHERE issue = ? AND decided != '' ORDER BY id DESC LIMIT 1",
                (issue,),
            ).fetchone()
        return None if row is None else _entry(row)

    def decisions(self, since: str | None = None, batch: int = 500) -> Iterator[Logged]:
        """Every entry that keeps a decision this version can read, oldest first (from `since`,
        the log's time format), read `batch` at a time (`legion log --replay`)."""
        after = 0
        while True:
            query = "SELECT * FROM actions WHERE id > ? AND decided != ''"
            params: tuple[Any, ...] = (after,)
            if since is not None:
                query += " AND at >= ?"
                params = (*params, since)
            with self._db.read() as conn:
                rows = conn.execute(query + " ORDER BY id LIMIT ?", (*params, batch)).fetchall()
            for row in rows:
                entry = _entry(row)
                if entry.decided is not None:
                    yield Logged(entry.id, entry.at, entry.issue, entry.decided)
            if len(rows) < batch:
                return
            after = rows[-1]["id"]

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


# A write someone made, for the log: (issue, action, detail).
Note = Callable[[str, str, str], None]


def noted_in(db: Store, author: str) -> Note:
    """An entry for each write a person or a session makes (`legion.trackers.audited`,
    `legion.forges.audited`), credited to `author`: `ada`, `legion-controller`,
    `legion-review`. A log that cannot be written loses the entry, never the write (which
    already happened); the daemon's log or stderr says so."""

    def note(issue: str, action: str, detail: str) -> None:
        if len(detail) > MAX_NOTE:
            detail = detail[: MAX_NOTE - 1] + "…"
        try:
            ActionLog(db).append(issue, action, OutcomeKind.DONE, detail, author=author)
        except LegionError as exc:
            logger.warning("%s by %s (%s) is not in the action log: %s", action, author, issue, exc)

    return note
