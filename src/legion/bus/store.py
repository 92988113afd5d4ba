"""The event bus's store: the `Bus` protocol its callers use, and `SqliteBus`, which keeps it in
one SQLite database for every project on the machine (`$XDG_STATE_HOME/legion/bus.db`).

Callers import `Bus` and `open_bus` only, so a server-backed bus can replace SQLite without
them changing. The database is opened like the project's (`legion.embedded.db.Database`): WAL
and a busy timeout so the daemon, every agent and the human post at once; `BEGIN IMMEDIATE`
writes, so a poster waits instead of failing half-way; numbered migrations of its own.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from legion.bus.address import (
    HUMAN,
    AgentKey,
    clean_agent_name,
    clean_project_name,
    parse_mentions,
    readings,
    resolve,
)
from legion.bus.model import (
    HUMAN_NAME,
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
from legion.config import state_home
from legion.core.text import clean_body, clean_branch, clean_title
from legion.embedded.db import Database
from legion.errors import ConflictError, InputError, NotFoundError

BUS_FILE_NAME = "bus.db"

MIGRATIONS: tuple[str, ...] = (
    # 1: agents (the human is one, for the whole machine), messages, their deliveries, events
    # and tasks.
    """
    CREATE TABLE agents (
        id INTEGER PRIMARY KEY,
        project TEXT NOT NULL,
        branch TEXT NOT NULL,
        name TEXT NOT NULL,
        role TEXT NOT NULL,
        runtime TEXT NOT NULL,
        session_id TEXT,
        status TEXT NOT NULL
            CHECK (status IN ('busy', 'idle', 'blocked', 'complete', 'failed', 'archived')),
        spawn_instance INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (project, branch, name)
    );
    CREATE INDEX agents_session ON agents(session_id);
    INSERT INTO agents (project, branch, name, role, runtime, status, created_at, updated_at)
    VALUES ('', '', 'human', 'human', 'human', 'idle',
            strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
    CREATE TABLE messages (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        project TEXT NOT NULL,
        branch TEXT NOT NULL,
        sender_id INTEGER NOT NULL REFERENCES agents(id),
        sender TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('say', 'ask', 'answer', 'complete', 'system')),
        body TEXT NOT NULL,
        mentions TEXT NOT NULL DEFAULT '[]',
        created_at TEXT NOT NULL
    );
    CREATE INDEX messages_channel ON messages(project, branch, seq);
    CREATE TABLE deliveries (
        message_seq INTEGER NOT NULL REFERENCES messages(seq),
        recipient_id INTEGER NOT NULL REFERENCES agents(id),
        state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'read')),
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (message_seq, recipient_id)
    ) WITHOUT ROWID;
    CREATE INDEX deliveries_pending ON deliveries(message_seq) WHERE state = 'pending';
    CREATE INDEX deliveries_recipient ON deliveries(recipient_id, state, message_seq);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        agent_id INTEGER REFERENCES agents(id),
        message_seq INTEGER REFERENCES messages(seq),
        detail TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
    );
    CREATE TRIGGER messages_posted AFTER INSERT ON messages BEGIN
        INSERT INTO events (kind, agent_id, message_seq, created_at)
        VALUES ('message_posted', new.sender_id, new.seq, new.created_at);
    END;
    CREATE TABLE tasks (
        id INTEGER PRIMARY KEY,
        project TEXT NOT NULL,
        branch TEXT NOT NULL,
        parent_id INTEGER REFERENCES tasks(id),
        title TEXT NOT NULL,
        assigned_agent_id INTEGER REFERENCES agents(id),
        completed_at TEXT,
        created_at TEXT NOT NULL
    );
    CREATE INDEX tasks_channel ON tasks(project, branch, id);
    """,
    # 2: replies (an answer names the question it answers; a question passed on to the human
    # names the one it passes on), and where each project lives (the TUI opens its board).
    """
    ALTER TABLE messages ADD COLUMN reply_to TEXT;
    CREATE INDEX messages_reply_to ON messages(reply_to) WHERE reply_to IS NOT NULL;
    CREATE TABLE projects (
        name TEXT PRIMARY KEY,
        root TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    """,
    # 3: a project is its project id (two repositories in folders of the same name are two
    # projects); its name on the bus is unique and, once given, never changes. The projects an
    # older Legion recorded keep their names, unclaimed until the project at their root claims
    # them (`SqliteBus.claim_project`): their messages stay theirs.
    """
    CREATE TABLE projects_by_id (
        name TEXT PRIMARY KEY,
        project_id TEXT UNIQUE,
        root TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    INSERT INTO projects_by_id (name, project_id, root, updated_at)
    SELECT name, NULL, root, updated_at FROM projects;
    DROP TABLE projects;
    ALTER TABLE projects_by_id RENAME TO projects;
    CREATE INDEX projects_root ON projects(root) WHERE project_id IS NULL;
    """,
)

# Client-chosen message ids: a UUID, or any short token a client can make unique.
_MESSAGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
# The roles that may address the human directly; everyone else goes through @legion.
_REACH_HUMAN = frozenset({AgentRole.CONTROLLER, AgentRole.HUMAN})


def stamp() -> str:
    """Now, to the millisecond (message order is `seq`; this is for people and latency)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_message_id() -> str:
    """A random (version 4) UUID, as `str(uuid.uuid4())` writes it, made without building a
    `uuid.UUID` (a third of the Python time of a post without mentions)."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class Bus(Protocol):
    """What Legion's commands, the daemon and the hooks need from the event bus."""

    # -- agents
    def register_agent(
        self,
        channel: Channel,
        name: str,
        *,
        role: AgentRole,
        runtime: str,
        session_id: str | None,
    ) -> Agent:
        """A session started: the agent (created on first sight), busy, with a new spawn
        instance, un-archived."""
        ...

    def update_agent(
        self,
        agent_id: int,
        *,
        status: AgentStatus | None = None,
        session_id: str | None = None,
        detail: str = "",
    ) -> Agent:
        """Change what is given; a move to blocked, complete, failed or archived is an event."""
        ...

    def agent(self, agent_id: int) -> Agent: ...

    def agent_by_session(self, session_id: str) -> Agent | None: ...

    def human(self) -> Agent: ...

    def agents(self, *, include_archived: bool = False) -> list[Agent]:
        """Every agent but the human, by address."""
        ...

    def resolve_agent(self, address: str, here: Channel) -> Agent:
        """The agent `address` names when written in `here` (see `legion.bus.address`)."""
        ...

    def claim_project(self, project_id: str, name: str, root: Path) -> str:
        """The name on the bus of the project `project_id`, which lives at `root`: the one it
        was given, else `name` (its folder's), with a suffix (`app-2`) when another project
        has it; a project an older Legion recorded at `root` is claimed with its name."""
        ...

    def projects(self) -> dict[str, Path]:
        """Every project the bus has seen, by name: where it lives."""
        ...

    def replaced(self) -> bool:
        """Whether the database file on disk is no longer the one this bus has open (restored
        from a copy, moved aside): a long-lived holder reopens it."""
        ...

    # -- messages and deliveries
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
        """Post `body` in `channel`: its mentions resolved, one pending delivery per addressee
        (the mentioned agents, then the agents `to` names, each once) and a `message_posted`
        event, all or nothing. `reply_to`: the id of the message this answers (it must exist).
        Posting an id again posts nothing and returns the first message (a different message
        under a used id is refused)."""
        ...

    def post_many(self, drafts: Sequence[Draft]) -> list[Posted]:
        """Post each draft as `post` does, all in one transaction: all of them, or none."""
        ...

    def message(self, message_id: str) -> Message: ...

    def messages(
        self,
        *,
        channel: Channel | None = None,
        since: int = 0,
        unread_for: int | None = None,
        last: int | None = None,
    ) -> list[Message]:
        """Messages after `since` (a `seq`), oldest first: of one channel or all, only those
        addressed to `unread_for` it has not read, only the `last` few."""
        ...

    def open_questions(self, recipient_id: int) -> list[Message]:
        """The questions (`ask`) addressed to `recipient_id` that no answer replies to yet,
        oldest first."""
        ...

    def replies(self, message_id: str) -> list[Message]:
        """The messages that reply to `message_id`, oldest first."""
        ...

    def unanswered_asks(self, sender_id: int) -> list[Message]:
        """The questions `sender_id` asked that no answer replies to yet, oldest first (an
        answer to a question that passed one on counts for both)."""
        ...

    def deliveries(self, message_id: str) -> list[Delivery]: ...

    def pending_deliveries(
        self, *, recipient_id: int | None = None, limit: int = 100
    ) -> list[PendingDelivery]:
        """Deliveries not yet made, oldest message first (what the daemon hands over)."""
        ...

    def mark_delivered(self, message_id: str, recipient_id: int) -> Delivery:
        """Counted as an attempt; a delivery already delivered or read stays as it is."""
        ...

    def mark_read(self, recipient_id: int, message_ids: Iterable[str]) -> int:
        """The recipient saw these messages; returns how many deliveries changed."""
        ...

    def record_failed_attempt(self, message_id: str, recipient_id: int, error: str) -> Delivery:
        """An attempt failed: counted, its error kept, the delivery still pending."""
        ...

    # -- events
    def record_event(
        self,
        kind: EventKind,
        *,
        agent_id: int | None = None,
        message_id: str | None = None,
        detail: str = "",
    ) -> Event: ...

    def events(self, *, since: int = 0, limit: int | None = None) -> list[Event]: ...

    def event_log(
        self,
        *,
        since: int = 0,
        agent_id: int | None = None,
        kinds: Iterable[EventKind] | None = None,
        last: int | None = None,
    ) -> list[Event]:
        """Events after `since`, oldest first: only `agent_id`'s, only of `kinds` (None: all),
        only the newest `last`."""
        ...

    # -- tasks
    def add_task(
        self,
        channel: Channel,
        title: str,
        *,
        parent_id: int | None = None,
        assigned_agent_id: int | None = None,
    ) -> Task: ...

    def tasks(self, channel: Channel) -> list[Task]: ...

    def complete_task(self, task_id: int) -> Task:
        """Done (idempotent: a done task keeps when it was completed)."""
        ...

    def close(self) -> None: ...


def bus_path(env: Mapping[str, str]) -> Path:
    return state_home(env) / BUS_FILE_NAME


def open_bus(env: Mapping[str, str]) -> Bus:
    """The machine's bus."""
    return SqliteBus(bus_path(env))


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


def clean_channel(channel: Channel) -> Channel:
    return Channel(clean_project_name(channel.project), clean_branch(channel.branch))


# Channels already cleaned (a poster writes in a few): cleaning is pure, and only channels
# that passed are kept, so a bad one is refused each time exactly as `clean_channel` does.
_CLEAN_CHANNELS: dict[Channel, Channel] = {}
_CLEAN_CHANNELS_MAX = 1024


def _clean_channel_cached(channel: Channel) -> Channel:
    cleaned = _CLEAN_CHANNELS.get(channel)
    if cleaned is None:
        cleaned = clean_channel(channel)
        if len(_CLEAN_CHANNELS) >= _CLEAN_CHANNELS_MAX:
            _CLEAN_CHANNELS.clear()
        _CLEAN_CHANNELS[channel] = cleaned
    return cleaned


def _cleaned(draft: Draft) -> Draft:
    """`draft` with its channel, body and ids checked and cleaned (InputError if bad)."""
    return Draft(
        draft.sender_id,
        _clean_channel_cached(draft.channel),
        clean_message_body(draft.body),
        draft.kind,
        None if draft.message_id is None else clean_message_id(draft.message_id),
        None if draft.reply_to is None else clean_message_id(draft.reply_to),
        draft.to,
    )


def clean_message_id(text: str) -> str:
    if not _MESSAGE_ID.fullmatch(text):
        raise InputError(
            f"invalid message id {text!r}: up to 128 letters, digits, '.', '_', ':' and '-'"
        )
    return text


def clean_message_body(text: str) -> str:
    body = clean_body(text, "the message").strip()
    if not body:
        raise InputError("the message is empty")
    return body


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
        self._db = Database(path, create=True, migrations=MIGRATIONS, empty_ok=True)
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
        channel = clean_channel(channel)
        name = clean_agent_name(name)
        if role is AgentRole.HUMAN or name == HUMAN_NAME:
            raise InputError(f"{HUMAN_NAME!r} is the human's name on the bus, not an agent's")
        if (name == ORCHESTRATOR_NAME) != (role is AgentRole.CONTROLLER):
            raise InputError(
                f"the name {ORCHESTRATOR_NAME!r} is the orchestrator's (role controller), "
                "and the orchestrator is called by it"
            )
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
            by_key = _by_key(self._all_agents(conn))
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
            _clean_channel_cached(channel),
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
        cleaned = [_cleaned(draft) for draft in drafts]
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
            known = self._senders[sender_id] = (agent.address, agent.role in _REACH_HUMAN)
        return known

    def _addressees(
        self,
        conn: sqlite3.Connection,
        sender_id: int,
        may_reach_human: bool,
        channel: Channel,
        mentioned: Sequence[str],
    ) -> list[Agent]:
        """The agents the mentions name (never the sender), each once.

        Only the agents an address could name are read (one per reading of it, and for
        `@legion` the project's orchestrators), which is all resolving needs; every agent is
        read only to explain an address that names nobody."""
        if not mentioned:
            return []
        keys: set[AgentKey] = set()
        for address in mentioned:
            if address == HUMAN_NAME:
                keys.add(HUMAN)
            elif address != ORCHESTRATOR_NAME:
                keys.update(readings(address, channel))
        clauses = ["(project = ? AND branch = ? AND name = ?)"] * len(keys)
        args = [part for key in sorted(keys) for part in (key.project, key.branch, key.name)]
        if ORCHESTRATOR_NAME in mentioned:  # the project's orchestrator, on whichever branch
            clauses.append("(project = ? AND name = ?)")
            args += [channel.project, ORCHESTRATOR_NAME]
        rows = conn.execute(
            f"SELECT {_AGENT_COLUMNS} FROM agents WHERE {' OR '.join(clauses)}", args
        ).fetchall()
        by_key = _by_key(_agent(row) for row in rows)
        recipients: list[Agent] = []
        for address in mentioned:
            try:
                agent = by_key[
                    resolve(address, channel, by_key.keys(), may_reach_human=may_reach_human)
                ]
            except InputError:
                # Said again against every agent, for the candidates the error names.
                everyone = _by_key(self._all_agents(conn)).keys()
                try:
                    resolve(address, channel, everyone, may_reach_human=may_reach_human)
                except InputError as exc:
                    hint = "(text in `backticks` is not read as a mention)"
                    raise InputError(f"{exc} {hint}") from None
                raise
            if agent.id != sender_id and all(agent.id != other.id for other in recipients):
                recipients.append(agent)
        return recipients

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


def _by_key(agents: Iterable[Agent]) -> dict[AgentKey, Agent]:
    """Agents by (project, branch, name); the human's row is ("", "", "human"), `HUMAN`."""
    return {AgentKey(agent.project, agent.branch, agent.name): agent for agent in agents}
