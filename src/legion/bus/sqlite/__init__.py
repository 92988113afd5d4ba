"""`SqliteBus`: the `Bus` protocol kept in one SQLite database for every project on the machine
(`$XDG_STATE_HOME/legion/bus.db`).

The database is opened like the project's (`legion.store.sqlite.SqliteStore`): WAL and a busy
timeout so the daemon, every agent and the human post at once; `BEGIN IMMEDIATE` writes, so a
poster waits instead of failing half-way; the migrations of `legion.bus.schema`.

Each job is a piece over the one database, owning its SQL: `agents`, `projects`, `posting`
(addressing, deliveries created, a retry under the same id), `messages` (reading them, and
the threads of questions), `deliveries`, `events` and `tasks`; `rows` holds what they share.
`SqliteBus` only composes them. A second implementation (a server-backed bus) is a sibling
package, not an edit of this one.
"""

from __future__ import annotations

from pathlib import Path

from legion.bus import schema
from legion.bus.sqlite.agents import SqliteAgents
from legion.bus.sqlite.deliveries import SqliteDeliveries
from legion.bus.sqlite.events import SqliteEvents
from legion.bus.sqlite.messages import SqliteMessages
from legion.bus.sqlite.posting import SqlitePosting
from legion.bus.sqlite.projects import SqliteProjects
from legion.bus.sqlite.tasks import SqliteTasks
from legion.store.sqlite import SqliteStore

__all__ = ["SqliteBus"]


class SqliteBus:
    """The bus in one SQLite file: each `Bus` method is its piece's. One instance per thread
    (a connection is not shared)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # A 0-byte file is what a crash between creating it and SQLite's first write leaves.
        self._db = db = SqliteStore(path, create=True, migrations=schema.MIGRATIONS, empty_ok=True)

        agents = SqliteAgents(db)
        self.register_agent = agents.register_agent
        self.update_agent = agents.update_agent
        self.agent = agents.agent
        self.agent_by_session = agents.agent_by_session
        self.human = agents.human
        self.agents = agents.agents
        self.resolve_agent = agents.resolve_agent

        projects = SqliteProjects(db)
        self.claim_project = projects.claim_project
        self.projects = projects.projects

        posting = SqlitePosting(db)
        self.post = posting.post
        self.post_many = posting.post_many

        messages = SqliteMessages(db)
        self.message = messages.message
        self.messages = messages.messages
        self.open_questions = messages.open_questions
        self.unanswered_asks = messages.unanswered_asks
        self.replies = messages.replies

        deliveries = SqliteDeliveries(db)
        self.deliveries = deliveries.deliveries
        self.pending_deliveries = deliveries.pending_deliveries
        self.mark_delivered = deliveries.mark_delivered
        self.record_failed_attempt = deliveries.record_failed_attempt
        self.mark_read = deliveries.mark_read

        events = SqliteEvents(db)
        self.record_event = events.record_event
        self.events = events.events
        self.event_log = events.event_log

        tasks = SqliteTasks(db)
        self.add_task = tasks.add_task
        self.tasks = tasks.tasks
        self.complete_task = tasks.complete_task

    def replaced(self) -> bool:
        return self._db.replaced()

    def close(self) -> None:
        self._db.close()
