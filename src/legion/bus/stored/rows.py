"""The rows the bus's pieces share: the agents' and messages' columns and the records
they make, the one timestamp, and the agent look-ups other tables' writes make inside their
own transaction (a message's sender, a task's assignee, an event's agent).

The deliveries', events' and tasks' rows are read only by their own piece, so they are mapped
there.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from legion.bus.model import Agent, AgentRole, AgentStatus, Message, MessageKind
from legion.errors import NotFoundError
from legion.store import Connection


def stamp() -> str:
    """Now, to the millisecond (message order is `seq`; this is for people and latency)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


AGENT_COLUMNS = (
    "id, project, branch, name, role, runtime, session_id, status, spawn_instance, "
    "created_at, updated_at"
)
MESSAGE_COLUMNS = "seq, id, project, branch, sender, kind, body, mentions, created_at, reply_to"
MESSAGE_WIDTH = 10  # how many columns MESSAGE_COLUMNS names


def qualified(columns: str, table: str) -> str:
    """`columns` (one of the lists above) each read from `table` (an alias in a join)."""
    return ", ".join(f"{table}.{column.strip()}" for column in columns.split(","))


def agent_from_row(row: Sequence[Any]) -> Agent:
    """An agent from a row of `AGENT_COLUMNS`, in that order."""
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


def message_from_row(row: Sequence[Any]) -> Message:
    """A message from a row of `MESSAGE_COLUMNS`, in that order."""
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


def in_order(query: str, table: str, column: str, last: int | None, args: list[object]) -> str:
    """`query` ordered by `table.column`; with `last`, only the newest `last` rows, still
    oldest first (`args` gains the limit)."""
    if last is None:
        return f"{query} ORDER BY {table}.{column}"
    args.append(max(last, 0))
    return (
        f"SELECT * FROM ({query} ORDER BY {table}.{column} DESC LIMIT ?) AS newest "
        f"ORDER BY {column}"
    )


def agent_in(conn: Connection, agent_id: int) -> Agent:
    """The agent `agent_id`, read in the caller's transaction; refused when there is none."""
    row = conn.execute(f"SELECT {AGENT_COLUMNS} FROM agents WHERE id = ?", (agent_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"no agent {agent_id} on the bus")
    return agent_from_row(row)


def all_agents(conn: Connection) -> list[Agent]:
    """Every agent, the human and the archived included, in the caller's transaction."""
    return [agent_from_row(row) for row in conn.execute(f"SELECT {AGENT_COLUMNS} FROM agents")]
