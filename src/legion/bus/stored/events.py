"""The bus's event log (`events`): what happened to agents and messages, kept in
order (a session registered, an agent blocked, completed, failed or archived, a compaction, a
message posted).

Most events are written inside another write's transaction (`insert_event`: an agent's
registration, a change of status; a message's by a trigger of `legion.bus.schema`); the rest
are recorded on their own (`StoredEvents.record_event`).
"""

from __future__ import annotations

from collections.abc import Iterable

from legion.bus.model import Event, EventKind
from legion.bus.stored.rows import agent_in, in_order, stamp
from legion.errors import NotFoundError
from legion.store import Connection, Row, Store

_EVENT_SELECT = (
    "SELECT e.id, e.kind, e.agent_id, m.id AS message_id, e.detail, e.created_at "
    "FROM events e LEFT JOIN messages m ON m.seq = e.message_seq "
)


def _event(row: Row) -> Event:
    return Event(
        id=row["id"],
        kind=EventKind(row["kind"]),
        agent_id=row["agent_id"],
        message_id=row["message_id"],
        detail=row["detail"],
        created_at=row["created_at"],
    )


def insert_event(
    conn: Connection,
    kind: EventKind,
    agent_id: int | None,
    message_seq: int | None,
    detail: str,
    when: str,
) -> int:
    """Log an event in the caller's transaction; its id."""
    row = conn.execute(
        "INSERT INTO events (kind, agent_id, message_seq, detail, created_at) "
        "VALUES (?, ?, ?, ?, ?) RETURNING id",
        (kind.value, agent_id, message_seq, detail, when),
    ).fetchone()
    return int(row[0])


class StoredEvents:
    """The event log: recorded, and read in order."""

    def __init__(self, db: Store) -> None:
        self._db = db

    def record_event(
        self,
        kind: EventKind,
        *,
        agent_id: int | None = None,
        message_id: str | None = None,
        detail: str = "",
    ) -> Event:
        when = stamp()
        with self._db.write() as conn:
            seq = None
            if message_id is not None:
                found = conn.execute(
                    "SELECT seq FROM messages WHERE id = ?", (message_id,)
                ).fetchone()
                if found is None:
                    raise NotFoundError(f"no message {message_id!r} on the bus")
                seq = found[0]
            if agent_id is not None:
                agent_in(conn, agent_id)
            event_id = insert_event(conn, kind, agent_id, seq, detail, when)
        return Event(event_id, kind, agent_id, message_id, detail, when)

    def events(self, *, since: int = 0, limit: int | None = None) -> list[Event]:
        query = _EVENT_SELECT + "WHERE e.id > ? ORDER BY e.id"
        args: tuple[int, ...] = (since,)
        if limit is not None:
            query, args = query + " LIMIT ?", (since, limit)
        with self._db.read() as conn:
            rows = conn.execute(query, args).fetchall()
        return [_event(row) for row in rows]

    def event_log(
        self,
        *,
        since: int = 0,
        agent_id: int | None = None,
        kinds: Iterable[EventKind] | None = None,
        last: int | None = None,
    ) -> list[Event]:
        where = ["e.id > ?"]
        args: list[object] = [since]
        if agent_id is not None:
            where.append("e.agent_id = ?")
            args.append(agent_id)
        if kinds is not None:
            names = sorted({kind.value for kind in kinds})
            if not names:
                return []
            where.append(f"e.kind IN ({', '.join('?' * len(names))})")
            args += names
        query = _EVENT_SELECT + f"WHERE {' AND '.join(where)}"
        query = in_order(query, "e", "id", last, args)
        with self._db.read() as conn:
            rows = conn.execute(query, args).fetchall()
        return [_event(row) for row in rows]
