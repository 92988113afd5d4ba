"""The bus's agents (`agents`): registered when a session starts (a new spawn
instance each time), their status and session changed, read back one, by session, or all,
and found by address (`legion.bus.address` says which an address names).
"""

from __future__ import annotations

from legion.bus.address import agents_by_key, resolve
from legion.bus.model import STATUS_EVENTS, Agent, AgentRole, AgentStatus, Channel, EventKind
from legion.bus.stored.events import insert_event
from legion.bus.stored.rows import AGENT_COLUMNS, agent_from_row, agent_in, all_agents, stamp
from legion.bus.validate import clean_registration
from legion.store import Store


class StoredAgents:
    """Who is on the bus: registered, changed (a change of status that matters is an event),
    and read."""

    def __init__(self, db: Store) -> None:
        self._db = db

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
                "spawn_instance = agents.spawn_instance + 1, updated_at = excluded.updated_at "
                f"RETURNING {AGENT_COLUMNS}",
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
            agent = agent_from_row(row)
            insert_event(
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
            before = agent_in(conn, agent_id)
            row = conn.execute(
                "UPDATE agents SET status = coalesce(?, status), "
                "session_id = coalesce(?, session_id), updated_at = ? "
                f"WHERE id = ? RETURNING {AGENT_COLUMNS}",
                (None if status is None else status.value, session_id, when, agent_id),
            ).fetchone()
            agent = agent_from_row(row)
            kind = STATUS_EVENTS.get(agent.status)
            if kind is not None and before.status is not agent.status:
                insert_event(conn, kind, agent_id, None, detail, when)
        return agent

    def agent(self, agent_id: int) -> Agent:
        with self._db.read() as conn:
            return agent_in(conn, agent_id)

    def agent_by_session(self, session_id: str) -> Agent | None:
        with self._db.read() as conn:
            row = conn.execute(
                f"SELECT {AGENT_COLUMNS} FROM agents WHERE session_id = ? "
                "ORDER BY updated_at DESC, id DESC LIMIT 1",
                (session_id,),
            ).fetchone()
        return None if row is None else agent_from_row(row)

    def human(self) -> Agent:
        with self._db.read() as conn:
            row = conn.execute(
                f"SELECT {AGENT_COLUMNS} FROM agents WHERE role = 'human' ORDER BY id LIMIT 1"
            ).fetchone()
        return agent_from_row(row)

    def agents(self, *, include_archived: bool = False) -> list[Agent]:
        archived = "" if include_archived else "AND status != 'archived' "
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {AGENT_COLUMNS} FROM agents WHERE role != 'human' {archived}"
                "ORDER BY project, branch, name"
            ).fetchall()
        return [agent_from_row(row) for row in rows]

    def resolve_agent(self, address: str, here: Channel) -> Agent:
        with self._db.read() as conn:
            by_key = agents_by_key(all_agents(conn))
        return by_key[resolve(address, here, by_key.keys())]
