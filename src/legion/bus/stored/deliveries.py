"""The bus's deliveries (`deliveries`): one per message and addressee, pending until
handed over (`mark_delivered`), each failed attempt counted with its error, and read once the
recipient saw the message (`mark_read`).

A delivery already made is left exactly as it is, its time included: a late or repeated mark
changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from legion.bus.model import Delivery, DeliveryState, PendingDelivery
from legion.bus.stored.rows import (
    AGENT_COLUMNS,
    MESSAGE_COLUMNS,
    MESSAGE_WIDTH,
    agent_from_row,
    message_from_row,
    qualified,
    stamp,
)
from legion.errors import NotFoundError
from legion.store import Row, Store

_DELIVERY_SELECT = (
    "SELECT m.id AS message_id, d.recipient_id, d.state, d.attempts, d.last_error, d.updated_at "
    "FROM deliveries d JOIN messages m ON m.seq = d.message_seq "
)
_MARK_CHUNK = 500  # ids per statement, within SQLite's limit on parameters


def _delivery(row: Row) -> Delivery:
    return Delivery(
        message_id=row["message_id"],
        recipient_id=row["recipient_id"],
        state=DeliveryState(row["state"]),
        attempts=row["attempts"],
        last_error=row["last_error"],
        updated_at=row["updated_at"],
    )


class StoredDeliveries:
    """Each message's way to each addressee: pending, delivered, read."""

    def __init__(self, db: Store) -> None:
        self._db = db

    def deliveries(self, message_id: str) -> list[Delivery]:
        with self._db.read() as conn:
            rows = conn.execute(
                _DELIVERY_SELECT + "WHERE m.id = ? ORDER BY d.recipient_id", (message_id,)
            ).fetchall()
        return [_delivery(row) for row in rows]

    def pending_deliveries(
        self, *, recipient_id: int | None = None, limit: int = 100
    ) -> list[PendingDelivery]:
        only = "" if recipient_id is None else "AND d.recipient_id = ? "
        args: list[object] = [] if recipient_id is None else [recipient_id]
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT d.recipient_id, d.state, d.attempts, d.last_error, d.updated_at, "
                f"{qualified(MESSAGE_COLUMNS, 'm')}, {qualified(AGENT_COLUMNS, 'a')} "
                "FROM deliveries d JOIN messages m ON m.seq = d.message_seq "
                "JOIN agents a ON a.id = d.recipient_id "
                f"WHERE d.state = 'pending' {only}ORDER BY d.message_seq, d.recipient_id LIMIT ?",
                [*args, limit],
            ).fetchall()
        found = []
        for row in rows:
            values = tuple(row)
            message = message_from_row(values[5 : 5 + MESSAGE_WIDTH])
            delivery = Delivery(
                message_id=message.id,
                recipient_id=values[0],
                state=DeliveryState(values[1]),
                attempts=values[2],
                last_error=values[3],
                updated_at=values[4],
            )
            recipient = agent_from_row(values[5 + MESSAGE_WIDTH :])
            found.append(PendingDelivery(delivery, message, recipient))
        return found

    def mark_delivered(self, message_id: str, recipient_id: int) -> Delivery:
        return self._change_delivery(
            message_id,
            recipient_id,
            "state = CASE state WHEN 'pending' THEN 'delivered' ELSE state END, "
            "attempts = attempts + CASE state WHEN 'pending' THEN 1 ELSE 0 END, last_error = NULL",
            (),
        )

    def record_failed_attempt(self, message_id: str, recipient_id: int, error: str) -> Delivery:
        return self._change_delivery(
            message_id,
            recipient_id,
            "attempts = attempts + CASE state WHEN 'pending' THEN 1 ELSE 0 END, "
            "last_error = CASE state WHEN 'pending' THEN ? ELSE last_error END",
            (" ".join(error.split())[:1000],),
        )

    def _change_delivery(
        self, message_id: str, recipient_id: int, assignments: str, args: tuple[object, ...]
    ) -> Delivery:
        with self._db.write() as conn:
            changed = conn.execute(
                # Every SET expression reads the row as it was: a delivery already made is
                # left exactly as it is, its time included.
                f"UPDATE deliveries SET {assignments}, "
                "updated_at = CASE state WHEN 'pending' THEN ? ELSE updated_at END "
                "WHERE message_seq = (SELECT seq FROM messages WHERE id = ?) "
                "AND recipient_id = ?",
                (*args, stamp(), message_id, recipient_id),
            ).rowcount
            if not changed:
                raise NotFoundError(
                    f"no delivery of message {message_id!r} to agent {recipient_id} on the bus"
                )
            row = conn.execute(
                _DELIVERY_SELECT + "WHERE m.id = ? AND d.recipient_id = ?",
                (message_id, recipient_id),
            ).fetchone()
        return _delivery(row)

    def mark_read(self, recipient_id: int, message_ids: Iterable[str]) -> int:
        ids = list(dict.fromkeys(message_ids))
        if not ids:
            return 0
        changed = 0
        with self._db.write() as conn:
            when = stamp()
            for start in range(0, len(ids), _MARK_CHUNK):
                chunk = ids[start : start + _MARK_CHUNK]
                marks = ", ".join("?" * len(chunk))
                changed += conn.execute(
                    "UPDATE deliveries SET state = 'read', updated_at = ? "
                    "WHERE recipient_id = ? AND state != 'read' AND message_seq IN "
                    f"(SELECT seq FROM messages WHERE id IN ({marks}))",
                    (when, recipient_id, *chunk),
                ).rowcount
        return changed
