"""The `Bus` protocol kept in a store (`legion.store`): `SqliteBus`, one SQLite database for
every project on the machine (`$XDG_STATE_HOME/legion/bus.db`), the default; `PostgresBus`, one
schema (`legion_bus`) of the fleet's PostgreSQL database for every project that uses it.

Each engine is opened like the project's store: SQLite with WAL, a busy timeout and
`BEGIN IMMEDIATE` writes, so the daemon, every agent and the human post at once, and a poster
waits instead of failing half-way; PostgreSQL with a pool and one writer at a time. Each has
its numbered migrations (`legion.bus.schema`, `legion.bus.postgres_schema`).

Each job is a piece over the one store, owning its SQL, written once in the dialect both
engines speak: `agents`, `projects`, `posting` (addressing, deliveries created, a retry under
the same id), `messages` (reading them, and the threads of questions), `deliveries`, `events`
and `tasks`; `rows` holds what they share. `StoreBus` only composes them.
"""

from __future__ import annotations

from pathlib import Path

from legion.bus import schema
from legion.bus.stored.agents import StoredAgents
from legion.bus.stored.deliveries import StoredDeliveries
from legion.bus.stored.events import StoredEvents
from legion.bus.stored.messages import StoredMessages
from legion.bus.stored.posting import StoredPosting
from legion.bus.stored.projects import StoredProjects
from legion.bus.stored.tasks import StoredTasks
from legion.store import Store

__all__ = ["PostgresBus", "SqliteBus", "StoreBus"]


class StoreBus:
    """The bus in a store: each `Bus` method is its piece's."""

    def __init__(self, db: Store, signal: str | None = None) -> None:
        self._db = db

        agents = StoredAgents(db)
        self.register_agent = agents.register_agent
        self.update_agent = agents.update_agent
        self.agent = agents.agent
        self.agent_by_session = agents.agent_by_session
        self.human = agents.human
        self.agents = agents.agents
        self.resolve_agent = agents.resolve_agent

        projects = StoredProjects(db)
        self.claim_project = projects.claim_project
        self.projects = projects.projects
        self.known_projects = projects.known_projects
        self.forget_project = projects.forget_project

        posting = StoredPosting(db, signal)
        self.post = posting.post
        self.post_many = posting.post_many

        messages = StoredMessages(db)
        self.message = messages.message
        self.messages = messages.messages
        self.channels = messages.channels
        self.open_questions = messages.open_questions
        self.unanswered_asks = messages.unanswered_asks
        self.replies = messages.replies

        deliveries = StoredDeliveries(db)
        self.deliveries = deliveries.deliveries
        self.pending_deliveries = deliveries.pending_deliveries
        self.mark_delivered = deliveries.mark_delivered
        self.record_failed_attempt = deliveries.record_failed_attempt
        self.mark_read = deliveries.mark_read

        events = StoredEvents(db)
        self.record_event = events.record_event
        self.events = events.events
        self.event_log = events.event_log

        tasks = StoredTasks(db)
        self.add_task = tasks.add_task
        self.tasks = tasks.tasks
        self.complete_task = tasks.complete_task

    def replaced(self) -> bool:
        return self._db.replaced()

    def close(self) -> None:
        self._db.close()


class SqliteBus(StoreBus):
    """The machine's bus in one SQLite file. One instance per thread (a connection is not
    shared)."""

    def __init__(self, path: Path) -> None:
        from legion.store.sqlite import SqliteStore

        self.path = path
        # A 0-byte file is what a crash between creating it and SQLite's first write leaves.
        super().__init__(
            SqliteStore(path, create=True, migrations=schema.MIGRATIONS, empty_ok=True)
        )


class PostgresBus(StoreBus):
    """The fleet's bus in its PostgreSQL database (`store`), made on first use. Thread-safe:
    its pool serves every thread."""

    def __init__(self, url: str) -> None:
        from legion.bus.postgres_schema import MIGRATIONS, SCHEMA, WAKE_CHANNEL
        from legion.store.postgres import PostgresStore

        super().__init__(
            PostgresStore(url, "", create=True, migrations=MIGRATIONS, schema=SCHEMA),
            signal=f"SELECT pg_notify('{WAKE_CHANNEL}', ?)",
        )
