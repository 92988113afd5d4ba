"""Wake-ups across hosts: with the bus in the fleet's PostgreSQL store, a post made on any host
(a `legion say`, an agent's message, the TUI on a laptop pointed at the store) NOTIFYs the
addressees' projects when it commits (`legion.bus.stored.PostgresBus`). This thread of the
daemon LISTENs, and wakes the daemon's loop when its project is named, so the message is
delivered now rather than at the next tick. A `legion` command on this host wakes its daemon
through the FIFO, as on one machine; this is for the others.

The thread holds one connection of its own (LISTEN needs a session that stays). When the
server cannot be reached it tries again every `RETRY_S`, quietly: the daemon's steps say the
store is unreachable once, and its next tick delivers whatever was posted meanwhile.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from legion.bus.postgres_schema import WAKE_CHANNEL
from legion.store.postgres import LINK_CHECKS

RETRY_S = 2.0  # between two tries to reach the server
LOOK_S = 0.5  # how long one wait for notifications lasts (how soon a stop is seen)
CONNECT_TIMEOUT_S = 5


class BusListener:
    """LISTENs on the bus's NOTIFY channel for `name` (the project's name on the bus, asked
    once connected: `project_name`) and calls `wake` for each notification naming it, and
    once on each (re)connection (a post may have come while it was not listening)."""

    def __init__(
        self,
        url: str,
        project_name: Callable[[], str],
        wake: Callable[[], object],
        also: str | None = None,
    ) -> None:
        """`also`: another payload that wakes the daemon (a start asked of its host)."""
        self.url = url
        self.project_name = project_name
        self.wake = wake
        self.also = also
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.listening = threading.Event()  # set while LISTEN holds (tests wait for it)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="legion-bus-listen", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=LOOK_S + CONNECT_TIMEOUT_S)

    def _run(self) -> None:
        import psycopg

        name: str | None = None
        while not self._stop.is_set():
            try:
                if name is None:
                    name = self.project_name()
                with psycopg.connect(
                    self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, **LINK_CHECKS
                ) as conn:
                    conn.execute(f"LISTEN {WAKE_CHANNEL}")
                    self.listening.set()
                    self.wake()
                    self._listen(conn, name)
            except Exception:  # any failure: quietly again (see the module's docstring)
                pass
            finally:
                self.listening.clear()
            self._stop.wait(RETRY_S)

    def _listen(self, conn: Any, name: str) -> None:
        while not self._stop.is_set():
            for note in conn.notifies(timeout=LOOK_S):
                if note.payload in (name, self.also):
                    with contextlib.suppress(Exception):
                        self.wake()
