"""The project's SQLite database in its state dir: the embedded tracker and forge, and the
worker registry (which every backend uses).

WAL journal and a busy timeout let several `legion` processes (the daemon, workers, the user)
read and write at once; every write runs in a `BEGIN IMMEDIATE` transaction so a writer waits
for the lock instead of failing half-way. Schema changes are numbered migrations recorded in
`PRAGMA user_version`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path

from legion.errors import StoreError

BUSY_TIMEOUT_S = 15.0

MIGRATIONS: tuple[str, ...] = (
    # 1: issues, labels, comments, pull requests and their reviews.
    """
    CREATE TABLE issues (
        id INTEGER PRIMARY KEY,
        number INTEGER NOT NULL UNIQUE,
        identifier TEXT NOT NULL UNIQUE,
        title TEXT NOT NULL,
        body TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL,
        parent_id INTEGER REFERENCES issues(id),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX issues_parent ON issues(parent_id);
    CREATE TABLE issue_labels (
        issue_id INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
        label TEXT NOT NULL,
        PRIMARY KEY (issue_id, label)
    ) WITHOUT ROWID;
    CREATE TABLE comments (
        id INTEGER PRIMARY KEY,
        issue_id INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
        author TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX comments_issue ON comments(issue_id, id);
    CREATE TABLE pull_requests (
        id INTEGER PRIMARY KEY,
        number INTEGER NOT NULL UNIQUE,
        issue_id INTEGER NOT NULL REFERENCES issues(id),
        title TEXT NOT NULL,
        body TEXT NOT NULL DEFAULT '',
        branch TEXT NOT NULL,
        base TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('open', 'merged', 'closed')),
        is_draft INTEGER NOT NULL DEFAULT 0,
        merge_commit TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX pull_requests_issue ON pull_requests(issue_id, id);
    CREATE TABLE reviews (
        id INTEGER PRIMARY KEY,
        pr_id INTEGER NOT NULL REFERENCES pull_requests(id) ON DELETE CASCADE,
        outcome TEXT NOT NULL CHECK (outcome IN ('approved', 'changes_requested', 'commented')),
        author TEXT NOT NULL,
        body TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
    );
    CREATE INDEX reviews_pr ON reviews(pr_id, id);
    """,
    # 2: the worker registry: which sessions Legion started, in which window and workspace.
    """
    CREATE TABLE workers (
        id INTEGER PRIMARY KEY,
        issue TEXT NOT NULL,
        mode TEXT NOT NULL,
        session_id TEXT NOT NULL,
        window TEXT NOT NULL,
        workspace TEXT NOT NULL,
        started_at TEXT NOT NULL,
        ended_at TEXT
    );
    CREATE INDEX workers_current ON workers(issue, ended_at);
    """,
    # 3: the action log: every action the reconciler or daemon took, append-only.
    """
    CREATE TABLE actions (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        issue TEXT NOT NULL,
        action TEXT NOT NULL,
        outcome TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX actions_issue ON actions(issue, id);
    """,
)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _describe(path: Path, exc: sqlite3.Error) -> StoreError:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return StoreError(
            f"{path}: the database is locked by another process (waited {BUSY_TIMEOUT_S:g} s); "
            "try again"
        )
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return StoreError(
            f"{path}: the database is corrupt or not a Legion database ({text}); "
            "move it aside to start with an empty one"
        )
    if "unable to open" in text or "readonly" in text or "read-only" in text:
        return StoreError(f"{path}: cannot open the database for writing ({text})")
    return StoreError(f"{path}: database error: {text}")


class Database:
    """A connection to the embedded database, migrated to the current schema on open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{path.parent}: cannot create the state folder ({exc})") from None
        try:
            # isolation_level=None: we issue BEGIN ourselves, so every write is explicit.
            self._conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self._conn.row_factory = sqlite3.Row
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            if self._conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        except sqlite3.Error as exc:
            raise _describe(path, exc) from None

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version == len(MIGRATIONS):
            return
        with self.write() as conn:
            # Re-read under the write lock: another process may have migrated meanwhile.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"{self.path}: the database was written by a newer Legion (schema {version}); "
                    "upgrade Legion"
                )
            for number in range(version, len(MIGRATIONS)):
                for statement in _statements(MIGRATIONS[number]):
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: all of it lands, or none of it does."""
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise _describe(self.path, exc) from None
        try:
            yield self._conn
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            raise _describe(self.path, exc) from None
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            # If even ROLLBACK fails the connection is unusable and the transaction void anyway.
            with suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several queries."""
        try:
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _describe(self.path, exc) from None

    def close(self) -> None:
        self._conn.close()


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]
