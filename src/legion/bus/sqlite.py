"""`SqliteBus`: the `Bus` protocol kept in one SQLite database for every project on the machine
(`$XDG_STATE_HOME/legion/bus.db`).

The database is opened like the project's (`legion.embedded.db.Database`): WAL and a busy
timeout so the daemon, every agent and the human post at once; `BEGIN IMMEDIATE` writes, so a
poster waits instead of failing half-way; the migrations of `legion.bus.schema`. Who a message
is addressed to is `legion.bus.address`'s to say; this module only reads the agents it asks
for and writes what it decides.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from legion.bus import schema
from legion.bus.address import (
    addressees,
    agents_by_key,
    clean_project_name,
    lookup_for,
    may_reach_human,
    parse_mentions,
    resolve,
)
from legion.bus.model import (
    ORCHESTRATOR_NAME,
    STATUS_EVENTS,
    Agent,
    AgentRole,
    AgentStatus,
    Channel,
    Delivery,
    DeliveryState,
    Draft,
    Event,
    EventKind,
    Message,
    MessageKind,
    PendingDelivery,
    Posted,
    Task,
)
from legion.bus.validate import (
    clean_channel,
    clean_channel_cached,
    clean_draft,
    clean_message_body,
    clean_message_id,
    clean_registration,
    new_message_id,
)
from legion.core.text import clean_title
from legion.embedded.db import Database
from legion.errors import ConflictError, NotFoundError


def stamp() -> str:
    """Now, to the millisecond (message order is `seq`; this is for people and latency)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_AGENT_COLUMNS = (
    "id, project, branch, name, role, runtime, session_id, status, spawn_instance, "
    "created_at, updated_at"
)
_MESSAGE_COLUMNS = "seq, id, project, branch, sender, kind, body, mentions, created_at, reply_to"
_MESSAGE_WIDTH = 10  # how many columns _MESSAGE_COLUMNS names


def _agent(row: Sequence[Any]) -> Agent:
    """An agent from a row of `_AGENT_COLUMNS`, in that order."""
    (id_, project, branch, name, role, runtime, sid, status, spawn, created, updated) = row
    return Agent(
        id=id_,
        project=project,
        branch=branch,
        name=name,
        role=AgentRole(role),
        runtime=runtime,
        session_id=sid,
        status=AgentStatus(status),
        spawn_instance=spawn,
        created_at=created,
        updated_at=updated,
    )


def _message(row: Sequence[Any]) -> Message:
    """A message from a row of `_MESSAGE_COLUMNS`, in that order."""
    seq, id_, project, branch, sender, kind, body, mentions, created, reply_to = row
    return Message(
        id=id_,
        seq=seq,
        project=project,
        branch=branch,
        sender=sender,
        kind=MessageKind(kind),
        body=body,
        mentions=tuple(json.loads(mentions)),
        created_at=created,
        reply_to=reply_to,
    )


def _delivery(row: sqlite3.Row) -> Delivery:
    return Delivery(
        message_id=row["message_id"],
        recipient_id=row["recipient_id"],
        state=DeliveryState(row["state"]),
        attempts=row["attempts"],
        last_error=row["last_error"],
        updated_at=row["updated_at"],
    )


def _event(row: sqlite3.Row) -> Event:
    return Event(
        id=row["id"],
        kind=EventKind(row["kind"]),
        agent_id=row["agent_id"],
        message_id=row["message_id"],
        detail=row["detail"],
        created_at=row["created_at"],
    )


def _task(row: sqlite3.Row) -> Task:
    return Task(
        id=row["id"],
        project=row["project"],
        branch=row["branch"],
        parent_id=row["parent_id"],
        title=row["title"],
        assigned_agent_id=row["assigned_agent_id"],
        completed_at=row["completed_at"],
        created_at=row["created_at"],
    )


_DELIVERY_SELECT = (
    "SELECT m.id AS message_id, d.recipient_id, d.state, d.attempts, d.last_error, d.updated_at "
    "FROM deliveries d JOIN messages m ON m.seq = d.message_seq "
)
_EVENT_SELECT = (
    "SELECT e.id, e.kind, e.agent_id, m.id AS message_id, e.detail, e.created_at "
    "FROM events e LEFT JOIN messages m ON m.seq = e.message_seq "
)


def _in_order(query: str, table: str, column: str, last: int | None, args: list[object]) -> str:
    """`query` ordered by `table.column`; with `last`, only the newest `last` rows, still
    oldest first (`args` gains the limit)."""
    if last is None:
        return f"{query} ORDER BY {table}.{column}"
    args.append(max(last, 0))
    return f"SELECT * FROM ({query} ORDER BY {table}.{column} DESC LIMIT ?) ORDER BY {column}"


class SqliteBus:
    """The bus in one SQLite file. One instance per thread (a connection is not shared)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # A 0-byte file is what a crash between creating it and SQLite's first write leaves.
        self._db = Database(path, create=True, migrations=schema.MIGRATIONS, empty_ok=True)
        # Senders already seen: (address, may address the human). Neither can change: an
        # address is the agent's identity, and only the names `legion` and `human` reach the
        # human. Kept, a post without mentions reads nothing before it writes.
        self._senders: dict[int, tuple[str, bool]] = {}

    def close(self) -> None:
        self._db.close()

    # -- agents ---------------------------------------------------------------------------------

    def register_agent(
        self,
        channel: Channel,
        name: str,
        *,
        role: AgentRole,
        runtime: str,
        session_id: str | None,
    ) -> Agent:
        channel, name = clean_registration(channel, name, role)
        when = stamp()
        with self._db.write() as conn:
            row = conn.execute(
                "INSERT INTO agents (project, branch, name, role, runtime, session_id, status, "
                "spawn_instance, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, 'busy', 1, ?, ?) "
                "ON CONFLICT (project, branch, name) DO UPDATE SET role = excluded.role, "
                "runtime = excluded.runtime, session_id = excluded.session_id, status = 'busy', "
                "spawn_instance = spawn_instance + 1, updated_at = excluded.updated_at "
                f"RETURNING {_AGENT_COLUMNS}",
                (
                    channel.project,
                    channel.branch,
                    name,
                    role.value,
                    runtime,
                    session_id,
                    when,
                    when,
                ),
            ).fetchone()
            agent = _agent(row)
            self._insert_event(
                conn,
                EventKind.AGENT_REGISTERED,
                agent.id,
                None,
                f"spawn {agent.spawn_instance}",
                when,
            )
        return agent

    def update_agent(
        self,
        agent_id: int,
        *,
        status: AgentStatus | None = None,
        session_id: str | None = None,
        detail: str = "",
    ) -> Agent:
        when = stamp()
        with self._db.write() as conn:
            before = self._agent_in(conn, agent_id)
            row = conn.execute(
                "UPDATE agents SET status = coalesce(?, status), "
                "session_id = coalesce(?, session_id), updated_at = ? "
                f"WHERE id = ? RETURNING {_AGENT_COLUMNS}",
                (None if status is None else status.value, session_id, when, agent_id),
            ).fetchone()
            agent = _agent(row)
            kind = STATUS_EVENTS.get(agent.status)
            if kind is not None and before.status is not agent.status:
                self._insert_event(conn, kind, agent_id, None, detail, when)
        return agent

    def agent(self, agent_id: int) -> Agent:
        with self._db.read() as conn:
            return self._agent_in(conn, agent_id)

    def agent_by_session(self, session_id: str) -> Agent | None:
        with self._db.read() as conn:
            row = conn.execute(
                f"SELECT {_AGENT_COLUMNS} FROM agents WHERE session_id = ? "
                "ORDER BY updated_at DESC, id DESC LIMIT 1",
                (session_id,),
            ).fetchone()
        return None if row is None else _agent(row)

    def human(self) -> Agent:
        with self._db.read() as conn:
            row = conn.execute(
                f"SELECT {_AGENT_COLUMNS} FROM agents WHERE role = 'human' ORDER BY id LIMIT 1"
            ).fetchone()
        return _agent(row)

    def agents(self, *, include_archived: bool = False) -> list[Agent]:
        archived = "" if include_archived else "AND status != 'archived' "
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {_AGENT_COLUMNS} FROM agents WHERE role != 'human' {archived}"
                "ORDER BY project, branch, name"
            ).fetchall()
        return [_agent(row) for row in rows]

    def resolve_agent(self, address: str, here: Channel) -> Agent:
        with self._db.read() as conn:
            by_key = agents_by_key(self._all_agents(conn))
        return by_key[resolve(address, here, by_key.keys())]

    def claim_project(self, project_id: str, name: str, root: Path) -> str:
        name = clean_project_name(name)
        where = str(root)
        with self._db.read() as conn:  # the common case: known, where it was
            row = conn.execute(
                "SELECT name, root FROM projects WHERE project_id = ?", (project_id,)
            ).fetchone()
        if row is not None and row["root"] == where:
            return str(row["name"])
        with self._db.write() as conn:
            row = conn.execute(
                "SELECT name FROM projects WHERE project_id = ?", (project_id,)
            ).fetchone()
            if row is not None:  # the project moved: same project, same name
                conn.execute(
                    "UPDATE projects SET root = ?, updated_at = ? WHERE project_id = ?",
                    (where, stamp(), project_id),
                )
                return str(row["name"])
            row = conn.execute(
                "SELECT name FROM projects WHERE project_id IS NULL AND root = ? "
                "ORDER BY updated_at DESC LIMIT 1",
                (where,),
            ).fetchone()
            if row is not None:  # recorded here by an older Legion: its messages are ours
                conn.execute(
                    "UPDATE projects SET project_id = ?, updated_at = ? WHERE name = ?",
                    (project_id, stamp(), row["name"]),
                )
                return str(row["name"])
            chosen = _free_project_name(conn, name)
            conn.execute(
                "INSERT INTO projects (name, project_id, root, updated_at) VALUES (?, ?, ?, ?)",
                (chosen, project_id, where, stamp()),
            )
            return chosen

    def projects(self) -> dict[str, Path]:
        with self._db.read() as conn:
            rows = conn.execute("SELECT name, root FROM projects ORDER BY name").fetchall()
        return {name: Path(root) for name, root in rows}

    def replaced(self) -> bool:
        return self._db.replaced()

    @staticmethod
    def _agent_in(conn: sqlite3.Connection, agent_id: int) -> Agent:
        row = conn.execute(
            f"SELECT {_AGENT_COLUMNS} FROM agents WHERE id = ?", (agent_id,)
        ).fetchone()
        if row is None:
            raise NotFoundError(f"no agent {agent_id} on the bus")
        return _agent(row)

    @staticmethod
    def _all_agents(conn: sqlite3.Connection) -> list[Agent]:
        return [_agent(row) for row in conn.execute(f"SELECT {_AGENT_COLUMNS} FROM agents")]

    # -- messages -------------------------------------------------------------------------------

    def post(
        self,
        sender_id: int,
        channel: Channel,
        body: str,
        *,
        kind: MessageKind = MessageKind.SAY,
        message_id: str | None = None,
        reply_to: str | None = None,
        to: Sequence[int] = (),
    ) -> Posted:
        # `post_many` for one draft, built clean at once (no `dataclasses.replace`).
        draft = Draft(
            sender_id,
            clean_channel_cached(channel),
            clean_message_body(body),
            kind,
            None if message_id is None else clean_message_id(message_id),
            None if reply_to is None else clean_message_id(reply_to),
            tuple(to),
        )
        with self._db.write() as conn:
            return self._post_in(conn, draft)

    def post_many(self, drafts: Sequence[Draft]) -> list[Posted]:
        # Checked before the write lock is taken: bad input never holds up other posters.
        cleaned = [clean_draft(draft) for draft in drafts]
        with self._db.write() as conn:
            return [self._post_in(conn, draft) for draft in cleaned]

    def _post_in(self, conn: sqlite3.Connection, draft: Draft) -> Posted:
        if draft.message_id is not None:
            # A retry: what was posted under this id stands, whatever changed since.
            earlier = conn.execute(
                f"SELECT {_MESSAGE_COLUMNS}, sender_id FROM messages WHERE id = ?",
                (draft.message_id,),
            ).fetchone()
            if earlier is not None:
                return self._posted_before(conn, earlier, draft)
        sender, may_reach_human = self._sender(conn, draft.sender_id)
        # No "@", no mention: the parse (a regular expression over the body) is skipped.
        mentioned = parse_mentions(draft.body) if "@" in draft.body else ()
        recipients = self._addressees(
            conn, draft.sender_id, may_reach_human, draft.channel, mentioned
        )
        for agent_id in draft.to:
            named = self._agent_in(conn, agent_id)
            if named.id != draft.sender_id and all(named.id != a.id for a in recipients):
                recipients.append(named)
        if (
            draft.reply_to is not None
            and not conn.execute(
                "SELECT 1 FROM messages WHERE id = ?", (draft.reply_to,)
            ).fetchone()
        ):
            raise NotFoundError(f"no message {draft.reply_to!r} on the bus (to reply to)")
        message_id = draft.message_id or new_message_id()
        mentions = tuple(agent.address for agent in recipients)
        when = stamp()
        # The `message_posted` event is written by a trigger, in this transaction. `seq` is
        # the table's rowid: the insert's own (a trigger's inserts do not change it after the
        # trigger ends), read without a RETURNING clause and its fetch.
        seq = conn.execute(
            "INSERT INTO messages (id, project, branch, sender_id, sender, kind, body, "
            "mentions, created_at, reply_to) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                message_id,
                draft.channel.project,
                draft.channel.branch,
                draft.sender_id,
                sender,
                draft.kind.value,
                draft.body,
                json.dumps(mentions) if mentions else "[]",
                when,
                draft.reply_to,
            ),
        ).lastrowid
        assert seq is not None  # an INSERT into a rowid table always sets it
        if recipients:
            conn.executemany(
                "INSERT INTO deliveries (message_seq, recipient_id, state, updated_at) "
                "VALUES (?, ?, 'pending', ?)",
                [(seq, agent.id, when) for agent in recipients],
            )
        message = Message(
            message_id,
            seq,
            draft.channel.project,
            draft.channel.branch,
            sender,
            draft.kind,
            draft.body,
            mentions,
            when,
            draft.reply_to,
        )
        return Posted(message, tuple(recipients), created=True)

    def _sender(self, conn: sqlite3.Connection, sender_id: int) -> tuple[str, bool]:
        known = self._senders.get(sender_id)
        if known is None:
            agent = self._agent_in(conn, sender_id)
            known = self._senders[sender_id] = (agent.address, may_reach_human(agent.role))
        return known

    def _addressees(
        self,
        conn: sqlite3.Connection,
        sender_id: int,
        reach_human: bool,
        channel: Channel,
        mentioned: Sequence[str],
    ) -> list[Agent]:
        """The agents the mentions name (`legion.bus.address.addressees`), reading only those
        an address could name (`lookup_for`)."""
        if not mentioned:
            return []
        lookup = lookup_for(mentioned, channel)
        clauses = ["(project = ? AND branch = ? AND name = ?)"] * len(lookup.keys)
        args = [part for key in sorted(lookup.keys) for part in (key.project, key.branch, key.name)]
        if lookup.orchestrator_of is not None:  # on whichever branch
            clauses.append("(project = ? AND name = ?)")
            args += [lookup.orchestrator_of, ORCHESTRATOR_NAME]
        rows = conn.execute(
            f"SELECT {_AGENT_COLUMNS} FROM agents WHERE {' OR '.join(clauses)}", args
        ).fetchall()
        return addressees(
            mentioned,
            channel,
            agents_by_key(_agent(row) for row in rows),
            sender_id=sender_id,
            reach_human=reach_human,
            everyone=lambda: agents_by_key(self._all_agents(conn)).keys(),
        )

    def _posted_before(self, conn: sqlite3.Connection, row: sqlite3.Row, draft: Draft) -> Posted:
        message = _message(tuple(row)[:-1])
        if (row["sender_id"], message.channel, message.kind, message.body, message.reply_to) != (
            draft.sender_id,
            draft.channel,
            draft.kind,
            draft.body,
            draft.reply_to,
        ):
            raise ConflictError(
                f"message id {message.id} was already used for another message "
                f"(#{message.seq} in {message.channel}); choose a new id"
            )
        rows = conn.execute(
            f"SELECT {', '.join('a.' + c.strip() for c in _AGENT_COLUMNS.split(','))} "
            "FROM deliveries d JOIN agents a ON a.id = d.recipient_id "
            "WHERE d.message_seq = ? ORDER BY a.id",
            (message.seq,),
        ).fetchall()
        order = {address: n for n, address in enumerate(message.mentions)}
        recipients = sorted((_agent(r) for r in rows), key=lambda a: order.get(a.address, 0))
        return Posted(message, tuple(recipients), created=False)

    def message(self, message_id: str) -> Message:
        with self._db.read() as conn:
            row = conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
            ).fetchone()
        if row is None:
            raise NotFoundError(f"no message {message_id!r} on the bus")
        return _message(row)

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
        query = f"SELECT {_MESSAGE_COLUMNS} FROM messages m WHERE {' AND '.join(where)}"
        query = _in_order(query, "m", "seq", last, args)
        with self._db.read() as conn:
            rows = conn.execute(query, args).fetchall()
        return [_message(row) for row in rows]

    def open_questions(self, recipient_id: int) -> list[Message]:
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {', '.join('m.' + c.strip() for c in _MESSAGE_COLUMNS.split(','))} "
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
        return [_message(row) for row in rows]

    def unanswered_asks(self, sender_id: int) -> list[Message]:
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages m WHERE m.sender_id = ? "
                "AND m.kind = 'ask' AND NOT EXISTS (SELECT 1 FROM messages r "
                "WHERE r.kind = 'answer' AND (r.reply_to = m.id OR r.reply_to IN "
                "(SELECT e.id FROM messages e WHERE e.reply_to = m.id AND e.kind = 'ask'))) "
                "ORDER BY m.seq",
                (sender_id,),
            ).fetchall()
        return [_message(row) for row in rows]

    def replies(self, message_id: str) -> list[Message]:
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE reply_to = ? ORDER BY seq",
                (message_id,),
            ).fetchall()
        return [_message(row) for row in rows]

    # -- deliveries -----------------------------------------------------------------------------

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
        agent_columns = ", ".join("a." + c.strip() for c in _AGENT_COLUMNS.split(","))
        message_columns = ", ".join("m." + c.strip() for c in _MESSAGE_COLUMNS.split(","))
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT d.recipient_id, d.state, d.attempts, d.last_error, d.updated_at, "
                f"{message_columns}, {agent_columns} "
                "FROM deliveries d JOIN messages m ON m.seq = d.message_seq "
                "JOIN agents a ON a.id = d.recipient_id "
                f"WHERE d.state = 'pending' {only}ORDER BY d.message_seq, d.recipient_id LIMIT ?",
                [*args, limit],
            ).fetchall()
        found = []
        for row in rows:
            values = tuple(row)
            message = _message(values[5 : 5 + _MESSAGE_WIDTH])
            delivery = Delivery(
                message_id=message.id,
                recipient_id=values[0],
                state=DeliveryState(values[1]),
                attempts=values[2],
                last_error=values[3],
                updated_at=values[4],
            )
            found.append(PendingDelivery(delivery, message, _agent(values[5 + _MESSAGE_WIDTH :])))
        return found

    def mark_delivered(self, message_id: str, recipient_id: int) -> Delivery:
        return self._change_delivery(
            message_id,
            recipient_id,
            "state = CASE state WHEN 'pending' THEN 'delivered' ELSE state END, "
            "attempts = attempts + (state = 'pending'), last_error = NULL",
            (),
        )

    def record_failed_attempt(self, message_id: str, recipient_id: int, error: str) -> Delivery:
        return self._change_delivery(
            message_id,
            recipient_id,
            "attempts = attempts + (state = 'pending'), "
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
            for start in range(0, len(ids), 500):  # within SQLite's limit on parameters
                chunk = ids[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                changed += conn.execute(
                    "UPDATE deliveries SET state = 'read', updated_at = ? "
                    "WHERE recipient_id = ? AND state != 'read' AND message_seq IN "
                    f"(SELECT seq FROM messages WHERE id IN ({marks}))",
                    (when, recipient_id, *chunk),
                ).rowcount
        return changed

    # -- events ---------------------------------------------------------------------------------

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
                self._agent_in(conn, agent_id)
            event_id = self._insert_event(conn, kind, agent_id, seq, detail, when)
        return Event(event_id, kind, agent_id, message_id, detail, when)

    @staticmethod
    def _insert_event(
        conn: sqlite3.Connection,
        kind: EventKind,
        agent_id: int | None,
        message_seq: int | None,
        detail: str,
        when: str,
    ) -> int:
        cursor = conn.execute(
            "INSERT INTO events (kind, agent_id, message_seq, detail, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (kind.value, agent_id, message_seq, detail, when),
        )
        return int(cursor.lastrowid or 0)

    def events(self, *, since: int = 0, limit: int | None = None) -> list[Event]:
        with self._db.read() as conn:
            rows = conn.execute(
                _EVENT_SELECT + "WHERE e.id > ? ORDER BY e.id LIMIT ?",
                (since, -1 if limit is None else limit),
            ).fetchall()
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
        query = _in_order(query, "e", "id", last, args)
        with self._db.read() as conn:
            rows = conn.execute(query, args).fetchall()
        return [_event(row) for row in rows]

    # -- tasks ----------------------------------------------------------------------------------

    def add_task(
        self,
        channel: Channel,
        title: str,
        *,
        parent_id: int | None = None,
        assigned_agent_id: int | None = None,
    ) -> Task:
        title = clean_title(title)
        channel = clean_channel(channel)
        with self._db.write() as conn:
            if parent_id is not None and self._task_in(conn, parent_id) is None:
                raise NotFoundError(f"no task {parent_id} (the parent)")
            if assigned_agent_id is not None:
                self._agent_in(conn, assigned_agent_id)
            task_id = conn.execute(
                "INSERT INTO tasks (project, branch, parent_id, title, assigned_agent_id, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (channel.project, channel.branch, parent_id, title, assigned_agent_id, stamp()),
            ).fetchone()[0]
            task = self._task_in(conn, task_id)
        assert task is not None  # just inserted, in this transaction
        return task

    def tasks(self, channel: Channel) -> list[Task]:
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT * FROM tasks WHERE project = ? AND branch = ? ORDER BY id",
                (channel.project, channel.branch),
            ).fetchall()
        return [_task(row) for row in rows]

    def complete_task(self, task_id: int) -> Task:
        with self._db.write() as conn:
            conn.execute(
                "UPDATE tasks SET completed_at = ? WHERE id = ? AND completed_at IS NULL",
                (stamp(), task_id),
            )
            task = self._task_in(conn, task_id)
        if task is None:
            raise NotFoundError(f"no task {task_id}")
        return task

    @staticmethod
    def _task_in(conn: sqlite3.Connection, task_id: int) -> Task | None:
        row = conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        return None if row is None else _task(row)


def _free_project_name(conn: sqlite3.Connection, name: str) -> str:
    """`name`, or `name-2`, `name-3`, …: the first no project has, and no agent, message or
    task of the bus uses (an older Legion wrote some without recording their project)."""
    for n in itertools.count(1):
        suffix = "" if n == 1 else f"-{n}"
        candidate = name[: 100 - len(suffix)].rstrip("._-") + suffix
        taken = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM projects WHERE name = ?1) "
            "OR EXISTS (SELECT 1 FROM agents WHERE project = ?1) "
            "OR EXISTS (SELECT 1 FROM messages WHERE project = ?1) "
            "OR EXISTS (SELECT 1 FROM tasks WHERE project = ?1)",
            (candidate,),
        ).fetchone()[0]
        if not taken:
            return candidate
    raise AssertionError("unreachable")  # itertools.count never ends
