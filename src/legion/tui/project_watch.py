"""An open TUI is the watcher of every project on this machine that no daemon runs for
(`legion.services.agent_watch`, the daemon's own delivery and status code, under each project's
watch lock): messages to idle agents typed in, and every few passes each agent's status read from
its session.

This one polls, every `WATCH_S`, and is not a loop of the app's watcher
(`legion.tui.watcher`): what it waits for is mostly not on the bus. An agent becomes idle
when its CLI ends a turn, which shows only in tmux and a transcript file, and nothing
announces it (no process tells another; the bus is a SQLite file shared by processes, with
no notifications across them either). It also writes (it types into sessions and sets
statuses) and must go on whatever view is shown, while the app's watcher reads for the
screen; a pass that waits on tmux would hold up the screen's reads if they shared a loop.
Where a daemon runs, each pass leaves the project to it at once (its pid file).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping

from legion.errors import LegionError
from legion.tui.projects import name_of

# Messages to idle agents delivered this often (seconds), and the sessions looked at for
# statuses every few passes.
WATCH_S = 0.5
STATUSES_EVERY = 4


class ProjectWatch:
    """Passes of the watcher of the projects no daemon runs for, in a thread of its own
    while `running()`; `env` is Legion's settings' environment."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def watch(self, *, statuses: bool = True) -> None:
        """One pass over every project on this machine that no daemon runs for: idle agents
        handed their messages and, with `statuses`, every agent's status read from its
        session. A project that cannot be had is skipped."""
        from legion.bus import open_bus
        from legion.services.agent_watch import load, projects_to_watch, watch

        bus = open_bus(self.env)
        try:
            for name, root in projects_to_watch(bus, statuses=statuses).items():
                project = load(root, self.env)
                if project is None or name_of(project) != name:
                    continue
                with contextlib.suppress(LegionError):
                    watch(project, bus, self.env, statuses=statuses)
        finally:
            bus.close()

    @contextlib.contextmanager
    def running(self, every: float = WATCH_S) -> Iterator[None]:
        """Watch (`watch`) in a thread while the block runs."""
        stop = threading.Event()

        def loop() -> None:
            passes = 0
            while not stop.wait(every):
                # A pass that failed (a project broken meanwhile) is tried again; the TUI stays.
                with contextlib.suppress(Exception):
                    self.watch(statuses=passes % STATUSES_EVERY == 0)
                passes += 1

        thread = threading.Thread(target=loop, name="legion-watch", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=15)
