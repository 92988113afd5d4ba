"""The fleet's store (`legion.store`): the project's tables in PostgreSQL, one schema per
project (`legion_<project id>`), so one database can serve several projects and every host of
a fleet reaches the same records.

- **The same SQL as SQLite's.** The code that owns a table writes `?` parameters; this store
  turns them into psycopg's `%s` (outside quoted text) and gives back rows that are read by
  name or position, as `sqlite3.Row` is.
- **One writer at a time per project**, as SQLite's `BEGIN IMMEDIATE`: each write transaction
  first takes a transaction-scoped advisory lock on the project. Read-then-write code (the next
  issue number, "is a judgment already open") stays correct without per-table locking, and the
  writes are short (a few per second per host).
- **A snapshot for reads**: `REPEATABLE READ, READ ONLY`.
- **A pool** of connections (psycopg_pool) shared by the threads of one process; a connection
  is checked before it is handed out, so a restarted server costs one failed check, not an
  error.
- **Numbered migrations** (`legion.store.postgres_schema`), run whole in one transaction under
  a session lock, recorded in the schema's `legion_schema` table.
- **The URL is a credential.** It is never printed: messages name the server by host, port and
  database only (`where`).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from legion.errors import StoreError, StoreUnreachableError
from legion.store import Connection, Cursor

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql
    from psycopg_pool import ConnectionPool

# The pool says on Python's logging each time it cannot connect (a line per try, on stderr
# where nothing else takes it): the daemon says an outage once, itself.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
logging.getLogger("psycopg.pool").propagate = False

CONNECT_TIMEOUT_S = 10
WAIT_FOR_CONNECTION_S = 15.0
# libpq's checks of a link that silently drops packets (a partition, a dead host): keepalives
# while idle, and a kernel timeout on unacknowledged data, so a call fails in seconds rather
# than when TCP gives up, many minutes later.
LINK_CHECKS: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,  # ms
}
POOL_SIZE = 4
# Into Legion's own environment, however it was installed (from a clone: `pip install
# '.[postgresql]'`): the `postgresql` extra's two packages.
INSTALL_HINT = (
    "pip install 'psycopg[binary]>=3.2,<4' 'psycopg-pool>=3.2,<4' in Legion's environment"
)
# Seconds since the epoch by the server's clock: one clock for every host's leases.
CLOCK_SQL = "extract(epoch FROM clock_timestamp())::float8"


def schema_name(project_id: str) -> str:
    """The schema of a project's tables: its id (a UUID, so a safe identifier)."""
    name = "legion_" + project_id.lower().replace("-", "_")
    if not re.fullmatch(r"[a-z0-9_]{1,63}", name):
        raise StoreError(f"project id {project_id!r} cannot name a PostgreSQL schema")
    return name


def where(url: str) -> str:
    """`url` as a message may show it: the server and database, never a user or password."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return "the PostgreSQL store"
    try:
        parts = conninfo_to_dict(url)
    except Exception:  # psycopg.ProgrammingError; its text may quote the URL
        raise StoreError(
            "the store setting is not a valid PostgreSQL URL (postgresql://USER@HOST:PORT/DATABASE)"
        ) from None
    host = str(parts.get("host") or "localhost")
    port = str(parts.get("port") or "5432")
    database = str(parts.get("dbname") or "")
    host_text = f"[{host}]" if ":" in host else host
    return f"postgresql://{host_text}:{port}/{database}"


@lru_cache(maxsize=512)
def pg_sql(sql: str) -> str:
    """`sql` with `?` parameters as psycopg's `%s`, and a literal `%` doubled; text in quotes
    (a string, an identifier) is left as it is."""
    out: list[str] = []
    quote: str | None = None
    for char in sql:
        if quote is not None:
            if char == quote:
                quote = None
            out.append("%%" if char == "%" else char)
        elif char in "'\"":
            quote = char
            out.append(char)
        elif char == "?":
            out.append("%s")
        elif char == "%":
            out.append("%%")
        else:
            out.append(char)
    return "".join(out)


def _parameters(parameters: Sequence[Any]) -> tuple[Any, ...]:
    # SQLite stores a bool as 0/1, and Legion's columns are integers: so here.
    return tuple(int(value) if isinstance(value, bool) else value for value in parameters)


class PgRow:
    """A result row, by column name or by position (as `sqlite3.Row`)."""

    __slots__ = ("_names", "_values")

    def __init__(self, names: dict[str, int], values: Sequence[Any]) -> None:
        self._names = names
        self._values = tuple(values)

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            return self._values[self._names[key]]
        return self._values[key]

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def keys(self) -> list[str]:
        return list(self._names)


def _value(value: Any) -> Any:
    # PostgreSQL sums integers as `numeric`; SQLite gives an int, and so does this store.
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _row_factory(cursor: Any) -> Callable[[Sequence[Any]], PgRow]:
    names = {column.name: index for index, column in enumerate(cursor.description or ())}
    return lambda values: PgRow(names, [_value(value) for value in values])


class _Total:
    """What `executemany` returns: the rows it changed, and nothing to fetch."""

    def __init__(self, rowcount: int) -> None:
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        return None

    def fetchall(self) -> list[Any]:
        return []

    def __iter__(self) -> Iterator[Any]:
        return iter(())


class PgConnection:
    """A connection inside one transaction, speaking the SQL the SQLite store speaks."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        cursor = self._conn.cursor(row_factory=_row_factory)
        cursor.execute(pg_sql(sql), _parameters(parameters))
        return cursor

    def executemany(self, sql: str, parameters: Any, /) -> Cursor:
        # One by one, so `rowcount` is the sum (an upsert that changed nothing counts 0).
        cursor = self._conn.cursor()
        query = pg_sql(sql)
        total = 0
        for each in parameters:
            cursor.execute(query, _parameters(each))
            total += max(cursor.rowcount, 0)
        return _Total(total)


def _lock_key(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


class PostgresStore:
    """A project's schema in a PostgreSQL database, migrated on open. Thread-safe: a pool of
    connections serves every thread of the process."""

    def __init__(
        self,
        url: str,
        project_id: str,
        *,
        create: bool = False,
        migrations: Sequence[str] | None = None,
        schema: str | None = None,
        pool_size: int = POOL_SIZE,
    ) -> None:
        try:
            import psycopg  # noqa: F401
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise StoreError(
                f"the store is PostgreSQL, but psycopg is not installed: {INSTALL_HINT}"
            ) from None
        from legion.store.postgres_schema import MIGRATIONS

        self._url = url
        self._where = where(url)
        self.schema = schema if schema is not None else schema_name(project_id)
        self._lock = _lock_key(self.schema)
        self._migrations: Sequence[str] = MIGRATIONS if migrations is None else migrations
        self.version = 0  # the schema's, once migrated
        self._migrate(create=create)
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S, **LINK_CHECKS},
            configure=self._configure,
            check=ConnectionPool.check_connection,
            timeout=WAIT_FOR_CONNECTION_S,
            name=f"legion {self.schema}",
            open=False,
        )
        self._pool.open(wait=False)

    @property
    def where(self) -> str:
        return f"{self._where} (schema {self.schema})"

    @property
    def clock_sql(self) -> str:
        return CLOCK_SQL

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        from psycopg import sql

        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))

    def _error(self, exc: Exception) -> StoreError:
        return describe(self._where, exc)

    def _migrate(self, *, create: bool) -> None:
        import psycopg
        from psycopg import sql

        latest = len(self._migrations)
        schema = sql.Identifier(self.schema)
        try:
            with psycopg.connect(
                self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, **LINK_CHECKS
            ) as conn:
                # Most opens find the schema current: one read, no lock, no DDL.
                if self._current(conn, schema, latest):
                    return
                with conn.transaction():
                    self._migrate_locked(conn, schema, latest, create=create)
        except psycopg.Error as exc:
            raise self._error(exc) from None

    def _current(self, conn: psycopg.Connection[Any], schema: sql.Identifier, latest: int) -> bool:
        from psycopg import sql

        table = f"{self.schema}.legion_schema"
        if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() == (None,):
            return False
        row = conn.execute(
            sql.SQL("SELECT version FROM {}.legion_schema").format(schema)
        ).fetchone()
        if row is None or int(row[0]) < latest:
            return False
        self._refuse_newer(int(row[0]), latest)
        self.version = latest
        return True

    def _refuse_newer(self, version: int, latest: int) -> None:
        if version > latest:
            raise StoreError(
                f"{self.where}: the store was written by a newer Legion "
                f"(schema {version}); upgrade Legion"
            )

    def _migrate_locked(
        self, conn: psycopg.Connection[Any], schema: sql.Identifier, latest: int, *, create: bool
    ) -> None:
        """Under the project's lock, in the caller's transaction: the schema made (`create`)
        and migrated to `latest`; a host that migrated meanwhile leaves nothing to do."""
        from psycopg import sql

        conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock,))
        present = conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)
        ).fetchone()
        if present is None and not create:
            raise StoreError(
                f"{self.where}: the project has no tables in this PostgreSQL store; "
                "run `legion init` to create them (or check the store setting)"
            )
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(schema))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS legion_schema ("
            "id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)"
        )
        conn.execute("INSERT INTO legion_schema (id, version) VALUES (1, 0) ON CONFLICT DO NOTHING")
        row = conn.execute("SELECT version FROM legion_schema").fetchone()
        version = int(row[0]) if row is not None else 0
        self._refuse_newer(version, latest)
        for number in range(version, latest):
            conn.execute(self._migrations[number])
        if version != latest:
            conn.execute("UPDATE legion_schema SET version = %s", (latest,))
        self.version = latest

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout:
            raise StoreUnreachableError(
                f"{self._where}: cannot reach the PostgreSQL store "
                f"(waited {WAIT_FOR_CONNECTION_S:g} s for a connection)"
            ) from None
        except psycopg.Error as exc:
            raise self._error(exc) from None

    @contextmanager
    def write(self) -> Iterator[Connection]:
        from legion.store.changes import STORE_CHANNEL

        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock,))
            # Sent as the write commits (never for one rolled back): readers of the store
            # (the web view) read again now, wherever the write was made.
            conn.execute("SELECT pg_notify(%s, %s)", (STORE_CHANNEL, self.schema))
            yield PgConnection(conn)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self._connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield PgConnection(conn)

    def replaced(self) -> bool:
        return False

    def close(self) -> None:
        self._pool.close()

    def server_time_offset(self) -> float:
        """The database server's clock minus this machine's, in seconds (a lease or heartbeat
        compares times written by several hosts)."""
        import time

        with self._connection() as conn:
            before = time.time()
            row = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
            after = time.time()
        assert row is not None
        return float(row[0]) - (before + after) / 2


def describe(where_text: str, exc: Exception) -> StoreError:
    """A psycopg error as one line that names the store by `where_text` (never its URL)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    state = getattr(exc, "sqlstate", None) or ""
    lowered = text.lower()
    if state.startswith("28") or "authentication failed" in lowered or "no password" in lowered:
        return StoreError(f"{where_text}: the PostgreSQL store refused the login ({text})")
    if state.startswith("08") or state == "57P01" or "connection" in lowered:
        return StoreUnreachableError(f"{where_text}: cannot reach the PostgreSQL store ({text})")
    if state == "53100":
        return StoreError(f"{where_text}: the PostgreSQL server's disk is full ({text})")
    return StoreError(f"{where_text}: database error: {text}")
