"""What tells a reader of a PostgreSQL store, cheaply, that a project's records changed: every
write transaction of a project's store NOTIFYs `STORE_CHANNEL` with the project's schema as it
commits (`legion.store.postgres.PostgresStore.write`), whichever host or command wrote it.
`StoreChanges` LISTENs and counts them by schema: a view that depends on the store (the web
view's board, an issue page, the log) is read again when its count moves, as a view on a SQLite
store is when its files move, so a change anywhere in the fleet reaches an open page within a
second, with no read while nothing changes.

One listening connection per store URL in a process, made at the first ask. While it cannot
listen (the server unreachable, the link cut) a count cannot tell (None): the reader falls back
to reading on a timer; each reconnection moves every count, since changes may have gone unseen.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from legion.config import Project

STORE_CHANNEL = "legion_store"
RETRY_S = 2.0  # between two tries to reach the server
LOOK_S = 0.5  # one wait for notifications (how soon a stop is seen)
CONNECT_TIMEOUT_S = 5


@dataclass(frozen=True, slots=True)
class StoreSignal:
    """A project's store on a PostgreSQL server, as something a view depends on (beside the
    files of a SQLite store): its URL (a credential: never shown) and its schema."""

    url: str
    schema: str

    def __repr__(self) -> str:
        return f"StoreSignal(schema={self.schema!r})"  # never the URL's password


class StoreChanges:
    """Counts the store's NOTIFYs by schema, on a thread of its own."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._counts: dict[str, int] = {}
        self._epoch = 0  # moves at each (re)connection
        self._lock = threading.Lock()
        self.listening = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="legion-store-listen", daemon=True)
        self._thread.start()

    def count(self, schema: str) -> tuple[int, int] | None:
        """How often `schema` changed (with the connection's epoch), or None while not
        listening (it cannot tell)."""
        if not self.listening.is_set():
            return None
        with self._lock:
            return self._epoch, self._counts.get(schema, 0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=LOOK_S + CONNECT_TIMEOUT_S)

    def _run(self) -> None:
        import psycopg

        from legion.store.postgres import LINK_CHECKS

        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, **LINK_CHECKS
                ) as conn:
                    conn.execute(f"LISTEN {STORE_CHANNEL}")
                    with self._lock:
                        self._epoch += 1
                    self.listening.set()
                    self._listen(conn)
            except Exception:  # any failure: quietly again, counts unknown meanwhile
                pass
            finally:
                self.listening.clear()
            self._stop.wait(RETRY_S)

    def _listen(self, conn: Any) -> None:
        while not self._stop.is_set():
            for note in conn.notifies(timeout=LOOK_S):
                with self._lock:
                    self._counts[note.payload] = self._counts.get(note.payload, 0) + 1


_LISTENERS: dict[str, StoreChanges] = {}
_LISTENERS_LOCK = threading.Lock()


def changes_of(url: str) -> StoreChanges:
    """This process's listener on the store at `url` (started at the first ask)."""
    with _LISTENERS_LOCK:
        found = _LISTENERS.get(url)
        if found is None:
            found = _LISTENERS[url] = StoreChanges(url)
        return found


def stamp_of(signal: StoreSignal) -> tuple[int, int] | None:
    """What, unchanged, means the project's store did not change (None: cannot tell)."""
    with contextlib.suppress(Exception):
        return changes_of(signal.url).count(signal.schema)
    return None


def store_watch(project: Project) -> list[Path | StoreSignal]:
    """What tells that the project's store changed: its SQLite database and log files, or its
    PostgreSQL schema's change signal."""
    from legion.store import in_fleet
    from legion.store.postgres import schema_name

    settings = project.settings
    if in_fleet(settings) and settings.store is not None:
        return [StoreSignal(settings.store, schema_name(settings.project_id))]
    return [project.db_path, project.db_path.with_name(project.db_path.name + "-wal")]
