"""The bus's SQLite schema: its numbered migrations, applied in order by
`legion.store.sqlite.SqliteStore` (a database is at the version of the last one it ran).

A migration is never edited once released; a change is a new one at the end.
"""

from __future__ import annotations

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
    # them (`legion.bus.stored.projects`): their messages stay theirs.
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
    # 4: an agent may be "stopped" (a clean stop ended its session). SQLite cannot change a
    # CHECK in place: the table is made again (`legion.store.sqlite` runs migrations with
    # foreign keys off, and checks them before it commits).
    """
    CREATE TABLE agents_new (
        id INTEGER PRIMARY KEY,
        project TEXT NOT NULL,
        branch TEXT NOT NULL,
        name TEXT NOT NULL,
        role TEXT NOT NULL,
        runtime TEXT NOT NULL,
        session_id TEXT,
        status TEXT NOT NULL
            CHECK (status IN
                ('busy', 'idle', 'blocked', 'complete', 'failed', 'archived', 'stopped')),
        spawn_instance INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (project, branch, name)
    );
    INSERT INTO agents_new SELECT id, project, branch, name, role, runtime, session_id, status,
        spawn_instance, created_at, updated_at FROM agents;
    DROP TABLE agents;
    ALTER TABLE agents_new RENAME TO agents;
    CREATE INDEX agents_session ON agents(session_id);
    """,
)
