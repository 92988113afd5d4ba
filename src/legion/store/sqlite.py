"""The default store (`legion.store`): the project's SQLite database in its state folder, and
the machine's event bus (`legion.bus.stored`).

WAL journal and a busy timeout let several `legion` processes (the daemon, workers, the user)
read and write at once; every write runs in a `BEGIN IMMEDIATE` transaction so a writer waits
for the lock instead of failing half-way. Schema changes are numbered migrations recorded in
`PRAGMA user_version`; the pending ones run as whole scripts in one transaction, so a database
is either migrated completely or left as it was.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from legion.errors import StoreError
from legion.files.private import private_folder
from legion.store import Connection
from legion.store.fleet_schema import FLEET_TABLES, HOST_SESSION_TABLES

BUSY_TIMEOUT_S = 15.0
# Seconds since the epoch by SQLite's clock (the machine's): what leases are timed by.
CLOCK_SQL = "((julianday('now') - 2440587.5) * 86400.0)"

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
    # 4: the daemon's durable state: the judgment queue (what the controller must look at, until
    # it no longer needs looking at) and the dispatch pause (worker starts that keep failing).
    """
    CREATE TABLE judgments (
        id INTEGER PRIMARY KEY,
        issue TEXT NOT NULL,
        kind TEXT NOT NULL,
        ref TEXT NOT NULL DEFAULT '',
        reason TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        delivered_at TEXT,
        delivered_mark INTEGER,
        handled_at TEXT,
        closed_at TEXT,
        closed_reason TEXT
    );
    CREATE UNIQUE INDEX judgments_one_open ON judgments(issue, kind) WHERE closed_at IS NULL;
    CREATE TABLE dispatch_pause (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        cause TEXT,
        streak INTEGER NOT NULL DEFAULT 0,
        reason TEXT,
        paused_at TEXT
    );
    INSERT INTO dispatch_pause (id, streak) VALUES (1, 0);
    """,
    # 5: the relay's capabilities: what each session Legion started may ask the daemon to do
    # on the tracker and forge (`legion.relay.capabilities`). Only a token's hash is kept.
    """
    CREATE TABLE capabilities (
        id INTEGER PRIMARY KEY,
        token_sha256 TEXT NOT NULL UNIQUE,
        scope TEXT NOT NULL CHECK (scope IN ('issue', 'project')),
        issue TEXT,
        mode TEXT NOT NULL DEFAULT '',
        session_id TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        CHECK ((scope = 'issue') = (issue IS NOT NULL))
    );
    CREATE INDEX capabilities_session ON capabilities(session_id);
    """,
    # 6: which agent CLI each worker's session runs on (its transcript is that CLI's).
    """
    ALTER TABLE workers ADD COLUMN runtime TEXT NOT NULL DEFAULT 'claude-code';
    """,
    # 7: "blocked by": an issue waits until each of its blockers is Done.
    """
    CREATE TABLE issue_blockers (
        issue_id INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
        blocker_id INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
        PRIMARY KEY (issue_id, blocker_id),
        CHECK (issue_id != blocker_id)
    ) WITHOUT ROWID;
    CREATE INDEX issue_blockers_blocker ON issue_blockers(blocker_id);
    """,
    # 8: what each model response used, recorded by the daemon's model proxy as it passed
    # (`legion.proxy`): the ledger `legion usage` reads.
    """
    CREATE TABLE model_usage (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        session_id TEXT NOT NULL DEFAULT '',
        issue TEXT NOT NULL DEFAULT '',
        mode TEXT NOT NULL DEFAULT '',
        runtime TEXT NOT NULL DEFAULT '',
        model TEXT NOT NULL DEFAULT '',
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX model_usage_issue ON model_usage(issue, at);
    CREATE INDEX model_usage_at ON model_usage(at);
    """,
    # 9: what a human's answer allowed an issue past its token budget (the proxy enforces it
    # without reading the tracker), the provider's rate limit or overload the proxy holds
    # every request for (`legion.proxy.budget`, `legion.proxy.limits`), and the ledger by
    # session (what a worker spent since its last progress: `legion.daemon.idle_step`).
    """
    CREATE TABLE token_allowance (
        issue TEXT PRIMARY KEY,
        allowed INTEGER NOT NULL,
        at TEXT NOT NULL
    );
    CREATE TABLE model_hold (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        until TEXT NOT NULL,
        reason TEXT NOT NULL,
        since TEXT NOT NULL
    );
    CREATE INDEX model_usage_session ON model_usage(session_id, at);
    """,
    # 10: the last question each session's model asked (an `AskUserQuestion` call), as the
    # proxy saw it pass: its CLI may show it before its transcript has it
    # (`legion.proxy.questions`).
    """
    CREATE TABLE model_questions (
        session_id TEXT PRIMARY KEY,
        tool_use_id TEXT NOT NULL,
        input TEXT NOT NULL,
        at REAL NOT NULL
    );
    """,
    # 11: the fleet (`legion.fleet.hosts`): each daemon's host, its heartbeat and capacity; the
    # leader lease; which host runs each worker.
    FLEET_TABLES
    + """
    ALTER TABLE workers ADD COLUMN host TEXT NOT NULL DEFAULT '';
    """,
    # 12: workers on other hosts than the leader's: the starts asked of each host, and what
    # each reports of its sessions (`legion.sessions.placement`).
    HOST_SESSION_TABLES,
    # 13: a model's answer whose usage the proxy could not read, recorded as unread, not as
    # zero tokens (`legion.proxy.ledger`).
    """
    ALTER TABLE model_usage ADD COLUMN unread INTEGER NOT NULL DEFAULT 0;
    """,
    # 14: the head commit each pull request's approving review saw, recorded by the relay
    # (`legion.forges.reviewed`): a session's merge lands only that head's work.
    """
    CREATE TABLE reviewed_heads (
        pr_number INTEGER PRIMARY KEY,
        branch TEXT NOT NULL,
        head TEXT NOT NULL,
        reviewed_at TEXT NOT NULL
    );
    """,
    # 15: the connections the egress proxy refused, by session and destination, with how
    # often (`legion.proxy.egress`; `legion status` shows them).
    """
    CREATE TABLE egress_refusals (
        session_id TEXT NOT NULL,
        issue TEXT NOT NULL,
        host TEXT NOT NULL,
        port INTEGER NOT NULL,
        count INTEGER NOT NULL,
        first_at TEXT NOT NULL,
        last_at TEXT NOT NULL,
        PRIMARY KEY (session_id, host, port)
    );
    CREATE INDEX egress_refusals_last ON egress_refusals(last_at);
    """,
    # 16: the newest head of each pull request's branch Legion saw (`legion.forges.local`): a
    # branch that went back, its commits lost with the host they were made on, is not merged.
    """
    ALTER TABLE pull_requests ADD COLUMN head TEXT;
    """,
    # 17: what each of the table's decisions was made from (`legion.core.decision_log`: the
    # inputs, the row, what admission saw), and who wrote an entry (a person, the controller).
    """
    ALTER TABLE actions ADD COLUMN decided TEXT NOT NULL DEFAULT '';
    ALTER TABLE actions ADD COLUMN author TEXT NOT NULL DEFAULT '';
    CREATE INDEX actions_decided ON actions(issue, id) WHERE decided != '';
    """,
    # 18: the embedded forge's CI (`legion.forges.local_checks`): each pull request's checks,
    # the latest run of each on the head it ran on.
    """
    CREATE TABLE local_checks (
        pr INTEGER NOT NULL,
        name TEXT NOT NULL,
        head TEXT NOT NULL,
        state TEXT NOT NULL,
        exit_code INTEGER,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        PRIMARY KEY (pr, name)
    );
    """,
    # 19: each issue's task list comment (`legion.core.task_sync`): which comment, the digest
    # of the list it shows, and when it was written (seconds since the epoch); what the last
    # pass read of a service's tracker and forge; and the children Legion created, by whom
    # (an epic's are its architect's or a person's).
    """
    CREATE TABLE task_comments (
        issue TEXT PRIMARY KEY,
        comment_id TEXT NOT NULL,
        digest TEXT NOT NULL,
        written_at INTEGER NOT NULL
    );
    -- What the daemon's pass last read of a service's tracker and forge (`reconcile.last_read`).
    CREATE TABLE last_read (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        taken_at REAL NOT NULL,
        reading TEXT NOT NULL
    );
    -- Each issue created through Legion as another's child, and who asked (`core.epics`).
    CREATE TABLE issue_splits (
        child TEXT PRIMARY KEY,
        parent TEXT NOT NULL,
        author TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    """,
)


def _tighten(path: Path) -> None:
    """The database and its journal files: owner only, also when an older Legion made them."""
    for candidate in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with suppress(FileNotFoundError):
            if candidate.stat().st_mode & 0o077:
                candidate.chmod(0o600)


def _check_present(path: Path, *, create: bool, empty_ok: bool) -> None:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        if create:
            return
        raise StoreError(
            f"{path}: the project's database is missing; restore it from a backup, or, on a "
            "new machine, run `legion init` to create an empty one"
        ) from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the database ({exc})") from None
    if size == 0 and not empty_ok:
        raise StoreError(
            f"{path}: the project's database is empty (0 bytes), so its issues are gone; "
            "restore it from a backup, or move it aside and run `legion init` for an empty one"
        )


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
    if "disk I/O error" in text or "database or disk is full" in text:
        return StoreError(
            f"{path}: cannot write the database ({text}); is the disk full? free some space "
            "and try again (nothing was half-written)"
        )
    if "unable to open" in text or "readonly" in text or "read-only" in text:
        return StoreError(f"{path}: cannot open the database for writing ({text})")
    return StoreError(f"{path}: database error: {text}")


class SqliteStore:
    """A connection to an SQLite database of Legion's, migrated to the current schema on open:
    the project's (`MIGRATIONS`) unless another list is given (the event bus has its own)."""

    def __init__(
        self,
        path: Path,
        *,
        create: bool = True,
        migrations: Sequence[str] | None = None,
        empty_ok: bool = False,
    ) -> None:
        """Open the database at `path`. Without `create`, a missing or empty file is an error:
        an existing project's store never silently starts afresh (issue numbers would be
        handed out again). `empty_ok`: a 0-byte file is an empty database, not lost records."""
        self.path = path
        # Looked up at each open, not bound at import, so tests can change the module's list.
        self._migrations: Sequence[str] = MIGRATIONS if migrations is None else migrations
        _check_present(path, create=create, empty_ok=empty_ok)
        try:
            private_folder(path.parent)
            if not path.exists():
                # Created private whatever the umask; SQLite gives its -wal and -shm files the
                # database file's mode.
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            _tighten(path)
        except FileExistsError:
            pass  # created by another process just now
        except OSError as exc:
            raise StoreError(f"{path.parent}: cannot create the state folder ({exc})") from None
        try:
            # isolation_level=None: we issue BEGIN ourselves, so every write is explicit.
            self._conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self._identity = _identity(path)
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
        latest = len(self._migrations)
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version == latest:
            return
        if version > latest:
            raise self._too_new(version)
        # Off while a migration makes a table again (SQLite's way to change a constraint): a
        # dropped table's rows are not deleted from those that refer to it. The script checks
        # every reference before it commits.
        self._conn.execute("PRAGMA foreign_keys = OFF")
        try:
            self._conn.executescript(migration_script(version, self._migrations))
        except sqlite3.Error:
            self._rollback()
            # Another process may have migrated between our read and our lock: the script's
            # guard then failed and nothing ran. Anything else is a real failure.
            now_at = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if now_at == latest:
                return
            if now_at > latest:
                raise self._too_new(now_at) from None
            raise
        finally:
            self._conn.execute("PRAGMA foreign_keys = ON")

    def _too_new(self, version: int) -> StoreError:
        return StoreError(
            f"{self.path}: the database was written by a newer Legion (schema {version}); "
            "upgrade Legion"
        )

    @contextmanager
    def write(self) -> Iterator[Connection]:
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
    def read(self) -> Iterator[Connection]:
        """A consistent snapshot for several queries."""
        try:
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _describe(self.path, exc) from None

    @property
    def where(self) -> str:
        return str(self.path)

    @property
    def clock_sql(self) -> str:
        return CLOCK_SQL

    def replaced(self) -> bool:
        """Whether the file at `path` is no longer the one this connection has open (put back
        from a copy, moved aside): the connection would go on reading the old one."""
        return _identity(self.path) != self._identity

    def close(self) -> None:
        self._conn.close()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


def migration_script(version: int, migrations: Sequence[str] | None = None) -> str:
    """One script that takes a database from schema `version` to the latest: every pending
    migration whole (never split on `;`, which a string or a trigger body may hold), in one
    `BEGIN IMMEDIATE` transaction, with `user_version` set inside it.

    The guard first checks, under the write lock, that the schema is still `version`; if another
    process migrated meanwhile, its CHECK fails and the script stops before changing anything.
    """
    migrations = MIGRATIONS if migrations is None else migrations
    parts = [
        "BEGIN IMMEDIATE;",
        "CREATE TEMP TABLE legion_migration_guard "
        "(expected INTEGER NOT NULL, found INTEGER NOT NULL, CHECK (found = expected));",
        f"INSERT INTO temp.legion_migration_guard SELECT {version}, user_version "
        "FROM pragma_user_version;",
        "DROP TABLE temp.legion_migration_guard;",
    ]
    for number in range(version, len(migrations)):
        parts.append(f"-- migration {number + 1}\n{migrations[number].strip()}\n;")
    parts += [
        # Migrations run with foreign keys off: every reference is checked here instead.
        "CREATE TEMP TABLE legion_reference_guard (broken INTEGER NOT NULL CHECK (broken = 0));",
        "INSERT INTO temp.legion_reference_guard SELECT count(*) FROM pragma_foreign_key_check;",
        "DROP TABLE temp.legion_reference_guard;",
        f"PRAGMA user_version = {len(migrations)};",
        "COMMIT;",
    ]
    return "\n".join(parts)
