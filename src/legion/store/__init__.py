"""Where Legion keeps what it shares: the embedded tracker and forge, the worker registry, the
judgment queue, the action log, the model ledger, the pauses and the relay's capabilities.

Two stores serve the same SQL through the same small protocol (`Store`):
- `legion.store.sqlite.SqliteStore`, the default: one file in the project's state folder, on
  one machine;
- `legion.store.postgres.PostgresStore`, when the project's `store` setting (or
  `LEGION_STORE`) is a `postgresql://` URL: one schema per project in a PostgreSQL database
  that every host of a fleet reaches (`docs/fleet.md`).

The code that owns each table writes its SQL once, in the dialect both understand: `?`
parameters (the PostgreSQL store turns them into its own), `RETURNING id` for a new row's id,
`ON CONFLICT DO NOTHING`. A write runs in `Store.write()`, one transaction at a time per
project (SQLite's `BEGIN IMMEDIATE`; PostgreSQL's transaction-scoped advisory lock), so the
same read-then-write code is safe on both; `Store.read()` is one consistent snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from legion.config import Project
    from legion.config.settings import Settings
    from legion.plugins import DoctorCheck

__all__ = ["Connection", "Cursor", "Row", "Store", "now", "open_store"]

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
# The store's URL (`store`) and libpq's own password variable: credentials no session gets.
STORE_SECRET_VARIABLES = ("LEGION_STORE", "PGPASSWORD")


class Row(Protocol):
    """A result row: by column name or by position."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """What the code that owns a table is given inside a transaction."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Any, /) -> Cursor: ...


class Store(Protocol):
    """A project's store, migrated to the current schema when it was opened."""

    @property
    def where(self) -> str:
        """Where it is, for a message: a path, or a URL without its credentials."""
        ...

    @property
    def clock_sql(self) -> str:
        """An SQL expression: now, in seconds since the epoch, by the store's clock (the
        database server's, which every host of a fleet shares)."""
        ...

    def write(self) -> AbstractContextManager[Connection]:
        """A write transaction: all of it lands, or none of it does; one at a time."""
        ...

    def read(self) -> AbstractContextManager[Connection]:
        """A consistent snapshot for several queries."""
        ...

    def replaced(self) -> bool:
        """Whether what this store has open is no longer what its settings name (an SQLite
        file put back from a copy): it would go on reading the old one."""
        ...

    def close(self) -> None: ...


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def is_postgres(url: str | None) -> bool:
    return url is not None and url.startswith(POSTGRES_SCHEMES)


def in_fleet(settings: Settings) -> bool:
    """Whether the project runs as a fleet of hosts: the one answer, for every caller. A fleet
    is a project whose store is PostgreSQL, shared by its hosts; on SQLite, one machine."""
    return is_postgres(settings.store)


def open_store(project: Project, *, create: bool = False) -> Store:
    """The project's store: its PostgreSQL schema when `store` names one, else the SQLite file
    in its state folder. Only `legion init` may `create` it: for an existing project a missing
    store is an error, never a fresh start (issue numbers would be handed out again)."""
    url = project.settings.store
    if is_postgres(url):
        from legion.store.postgres import PostgresStore

        assert url is not None
        return PostgresStore(url, project.settings.project_id, create=create)
    from legion.store.sqlite import SqliteStore

    return SqliteStore(project.db_path, create=create)


def store_opener(project: Project, opened: Store) -> Callable[[], Store]:
    """How each thread of a server (the model proxy's) opens the store `opened` is: SQLite, a
    connection of its own each time (one belongs to its thread); PostgreSQL, `opened` itself,
    whose pool serves every thread, behind a `close` that leaves it open."""
    if not is_postgres(project.settings.store):
        return lambda: open_store(project)
    shared = _Shared(opened)
    return lambda: shared


class StoreView:
    """Another store, as it is: a wrapper that changes one thing overrides that one method
    (`_Shared` its `close`, `legion.fleet.hosts.FencedStore` its `write`)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @property
    def where(self) -> str:
        return self._store.where

    @property
    def clock_sql(self) -> str:
        return self._store.clock_sql

    def write(self) -> AbstractContextManager[Connection]:
        return self._store.write()

    def read(self) -> AbstractContextManager[Connection]:
        return self._store.read()

    def replaced(self) -> bool:
        return self._store.replaced()

    def close(self) -> None:
        self._store.close()


class _Shared(StoreView):
    """A store that many users share: their `close` is not its end."""

    def close(self) -> None:
        pass


def store_exists(project: Project) -> bool:
    """Whether the project has a store yet (without opening or creating one). A PostgreSQL
    store is taken to exist: opening it says so if it does not."""
    if is_postgres(project.settings.store):
        return True
    return project.db_path.exists()


# A fleet's hosts compare times they wrote (heartbeats, leases): a clock this far from the
# database server's is worth a warning.
MAX_CLOCK_SKEW_S = 2.0


def store_checks(project: Project) -> list[DoctorCheck]:
    """`legion doctor`'s lines for the project's store: where it is, that it opens at the
    current schema, and (PostgreSQL) how far this machine's clock is from the server's."""
    from legion.errors import LegionError
    from legion.plugins import DoctorCheck

    if not store_exists(project):
        return [DoctorCheck("store", False, f"{project.db_path} is missing", "run `legion init`")]
    try:
        store = open_store(project)
    except LegionError as exc:
        return [DoctorCheck("store", False, "cannot open", str(exc))]
    try:
        if not is_postgres(project.settings.store):
            return [DoctorCheck("store", True, f"SQLite, {store.where}")]
        from legion.store.postgres import PostgresStore

        assert isinstance(store, PostgresStore)
        checks = [DoctorCheck("store", True, f"PostgreSQL {store.where}, version {store.version}")]
        try:
            skew = store.server_time_offset()
        except LegionError as exc:
            return [*checks, DoctorCheck("clock", False, "unknown", str(exc), required=False)]
        detail = f"{skew:+.2f} s from the database server's"
        if abs(skew) > MAX_CLOCK_SKEW_S:
            fix = "synchronise this machine's clock (NTP): hosts compare the times they write"
            return [*checks, DoctorCheck("clock", False, detail, fix, required=False)]
        return [*checks, DoctorCheck("clock", True, detail)]
    finally:
        store.close()
