"""Reading the bus's messages (`messages`): one by id, a channel's or everyone's in
order (only the unread of one recipient, only the last few), and the threads of questions: the
open ones addressed to an agent, the ones it asked that no answer settled yet, the replies to
a message.

A question is settled by an answer to it, or to a question that passed it on (an agent's
question handed to the human); one passed on is settled too when the one it passes on is.
"""

from __future__ import annotations

from legion.bus.model import Channel, Message
from legion.bus.stored.rows import MESSAGE_COLUMNS, in_order, message_from_row, qualified
from legion.errors import NotFoundError
from legion.store import Store


class StoredMessages:
    """What was said on the bus, read back."""

    def __init__(self, db: Store) -> None:
        self._db = db

    def message(self, message_id: str) -> Message:
        with self._db.read() as conn:
            row = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
            ).fetchone()
        if row is None:
            raise NotFoundError(f"no message {message_id!r} on the bus")
        return message_from_row(row)

    def messages(
        self,
        *,
        channel: Channel | None = None,
        since: int = 0,
        unread_for: int | None = None,
        last: int | None = None,
    ) -> list[Message]:
        where = ["m.seq > ?"]
        args: list[object] = [since]
        if channel is not None:
            where.append("m.project = ? AND m.branch = ?")
            args += [channel.project, channel.branch]
        if unread_for is not None:
            # Driven by the recipient's deliveries (indexed), not by every message.
            where.append(
                "m.seq IN (SELECT d.message_seq FROM deliveries d "
                "WHERE d.recipient_id = ? AND d.state != 'read')"
            )
            args.append(unread_for)
        query = f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE {' AND '.join(where)}"
        query = in_order(query, "m", "seq", last, args)
        with self._db.read() as conn:
            rows = conn.execute(query, args).fetchall()
        return [message_from_row(row) for row in rows]

    def channels(self) -> list[Channel]:
        """Every channel a message was posted in, by project and branch (no message read)."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT project, branch FROM messages ORDER BY project, branch"
            ).fetchall()
        return [Channel(row["project"], row["branch"]) for row in rows]

    def open_questions(self, recipient_id: int) -> list[Message]:
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {qualified(MESSAGE_COLUMNS, 'm')} "
                "FROM deliveries d JOIN messages m ON m.seq = d.message_seq "
                "WHERE d.recipient_id = ? AND m.kind = 'ask' AND NOT EXISTS ("
                "SELECT 1 FROM messages r WHERE r.kind = 'answer' AND (r.reply_to = m.id OR "
                "r.reply_to IN (SELECT e.id FROM messages e WHERE e.reply_to = m.id "
                "AND e.kind = 'ask') "
                # a question passed on is settled too when the one it passes on is answered
                "OR (m.reply_to IS NOT NULL AND r.reply_to = m.reply_to))) "
                "ORDER BY m.seq",
                (recipient_id,),
            ).fetchall()
        return [message_from_row(row) for row in rows]

    def unanswered_asks(self, sender_id: int) -> list[Message]:
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.sender_id = ? "
                "AND m.kind = 'ask' AND NOT EXISTS (SELECT 1 FROM messages r "
                "WHERE r.kind = 'answer' AND (r.reply_to = m.id OR r.reply_to IN "
                "(SELECT e.id FROM messages e WHERE e.reply_to = m.id AND e.kind = 'ask'))) "
                "ORDER BY m.seq",
                (sender_id,),
            ).fetchall()
        return [message_from_row(row) for row in rows]

    def replies(self, message_id: str) -> list[Message]:
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE reply_to = ? ORDER BY seq",
                (message_id,),
            ).fetchall()
        return [message_from_row(row) for row in rows]
