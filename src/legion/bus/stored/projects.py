"""The bus's projects (`projects`): each project's name on the bus, given the first
time the bus sees its id and kept when its folder moves, and where it lives.

A name is free when no project has it and no agent, message or task uses it: an older Legion
wrote some without recording their project, and those stay theirs.

What belongs to a project, and goes when it is forgotten (`forget_project`), is decided here
only: its record; its agents; every message posted in its channels or by its agents (in any
channel); the deliveries of those messages and every delivery to its agents; the events of its
agents and of those messages; its channels' tasks (a task elsewhere assigned to one of its
agents, or under one of its tasks, stays, unassigned or at the top). Nothing else of the bus
names a project.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from legion.bus.address import clean_project_name
from legion.bus.model import ForgottenProject, KnownProject
from legion.bus.stored.rows import stamp
from legion.store import Connection, Store


class StoredProjects:
    """Projects by name on the bus: claimed, and where each lives."""

    def __init__(self, db: Store) -> None:
        self._db = db

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

    def known_projects(self) -> list[KnownProject]:
        with self._db.read() as conn:
            recorded = {
                row["name"]: (row["project_id"], row["root"])
                for row in conn.execute("SELECT name, project_id, root FROM projects")
            }
            counts = {
                row["project"]: row["n"]
                for row in conn.execute(
                    "SELECT project, COUNT(*) AS n FROM agents WHERE project <> '' GROUP BY project"
                )
            }
        return [
            KnownProject(
                name,
                recorded.get(name, (None, None))[0],
                None if name not in recorded else Path(recorded[name][1]),
                counts.get(name, 0),
            )
            for name in sorted(set(recorded) | set(counts))
        ]

    def forget_project(self, name: str) -> ForgottenProject | None:
        if not name:
            return None  # the human's, who belongs to no project
        agents = "SELECT id FROM agents WHERE project = ?"
        messages = f"SELECT seq FROM messages WHERE project = ? OR sender_id IN ({agents})"
        tasks = "SELECT id FROM tasks WHERE project = ?"
        with self._db.write() as conn:

            def count(query: str, times: int) -> int:
                return int(
                    conn.execute(
                        f"SELECT COUNT(*) FROM ({query}) AS found", (name,) * times
                    ).fetchone()[0]
                )

            recorded = conn.execute("SELECT 1 FROM projects WHERE name = ?", (name,)).fetchone()
            found = ForgottenProject(name, count(agents, 1), count(messages, 2), count(tasks, 1))
            if recorded is None and not (found.agents or found.messages or found.tasks):
                return None
            for statement, times in (
                (f"DELETE FROM deliveries WHERE message_seq IN ({messages}) "
                 f"OR recipient_id IN ({agents})", 3),
                (f"DELETE FROM events WHERE agent_id IN ({agents}) "
                 f"OR message_seq IN ({messages})", 3),
                (f"UPDATE tasks SET assigned_agent_id = NULL WHERE project <> ? "
                 f"AND assigned_agent_id IN ({agents})", 2),
                (f"UPDATE tasks SET parent_id = NULL WHERE project <> ? "
                 f"AND parent_id IN ({tasks})", 2),
                ("DELETE FROM tasks WHERE project = ?", 1),
                (f"DELETE FROM messages WHERE seq IN ({messages})", 2),
                ("DELETE FROM agents WHERE project = ?", 1),
                ("DELETE FROM projects WHERE name = ?", 1),
            ):  # fmt: skip
                conn.execute(statement, (name,) * times)
            return found


def _free_project_name(conn: Connection, name: str) -> str:
    """`name`, or `name-2`, `name-3`, …: the first no project has, and no agent, message or
    task of the bus uses (an older Legion wrote some without recording their project)."""
    for n in itertools.count(1):
        suffix = "" if n == 1 else f"-{n}"
        candidate = name[: 100 - len(suffix)].rstrip("._-") + suffix
        taken = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM projects WHERE name = ?) "
            "OR EXISTS (SELECT 1 FROM agents WHERE project = ?) "
            "OR EXISTS (SELECT 1 FROM messages WHERE project = ?) "
            "OR EXISTS (SELECT 1 FROM tasks WHERE project = ?)",
            (candidate,) * 4,
        ).fetchone()[0]
        if not taken:
            return candidate
    raise AssertionError("unreachable")  # itertools.count never ends
