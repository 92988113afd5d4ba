"""The bus's tasks (`tasks`): a channel's tree of things to do, each pending,
assigned to an agent, or done (done once: doing it again keeps when it was first done).
"""

from __future__ import annotations

from legion.bus.model import Channel, Task
from legion.bus.stored.rows import agent_in, stamp
from legion.bus.validate import clean_channel
from legion.core.text import clean_title
from legion.errors import NotFoundError
from legion.store import Connection, Row, Store


def _task(row: Row) -> Task:
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


def _task_in(conn: Connection, task_id: int) -> Task | None:
    row = conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
    return None if row is None else _task(row)


class StoredTasks:
    """A channel's tasks: added, listed, completed."""

    def __init__(self, db: Store) -> None:
        self._db = db

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
            if parent_id is not None and _task_in(conn, parent_id) is None:
                raise NotFoundError(f"no task {parent_id} (the parent)")
            if assigned_agent_id is not None:
                agent_in(conn, assigned_agent_id)
            task_id = conn.execute(
                "INSERT INTO tasks (project, branch, parent_id, title, assigned_agent_id, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (channel.project, channel.branch, parent_id, title, assigned_agent_id, stamp()),
            ).fetchone()[0]
            task = _task_in(conn, task_id)
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
            task = _task_in(conn, task_id)
        if task is None:
            raise NotFoundError(f"no task {task_id}")
        return task
