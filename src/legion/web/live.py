"""The web view's live pages: each view (the boards, the inbox) read once every `PERIOD_S`
while a page listens, rendered once per role, and pushed to the pages listening when it
changed. However many pages are open, the swarm is read once a period; with none open it
is not read at all.

It reads on a timer rather than on the daemon's wake-ups because what changes a board is
spread over the tracker, the forge, tmux and transcripts (the same reason the TUI's watcher
polls: `legion.tui.project_watch`); half a second keeps a change within a second of the page.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from legion.core.web_access import Role

PERIOD_S = 0.5

_Listener = tuple[asyncio.AbstractEventLoop, "asyncio.Queue[str]"]


@dataclass(frozen=True, slots=True)
class View:
    read: Callable[[], object]  # slow (a tracker, tmux): called in the poller's thread
    render: Callable[[object, Role], str]  # the page's live part, for a person of that role


class LiveViews:
    """The views pages listen to, by name (`board`, `inbox`, `issue/<project>/<issue>`): each
    read while a page listens, and forgotten when none does."""

    def __init__(self, period: float = PERIOD_S) -> None:
        self.period = period
        self._lock = threading.Lock()
        self._views: dict[str, View] = {}
        self._listeners: dict[tuple[str, Role], list[_Listener]] = {}
        self._last: dict[tuple[str, Role], str] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def listener(self, name: str, view: View, role: Role) -> Iterator[asyncio.Queue[str]]:
        """For the block, a queue given view `name`'s live part each time it changes (at
        once what there is now). Called on the page's event loop."""
        queue: asyncio.Queue[str] = asyncio.Queue(maxsize=8)
        entry = (asyncio.get_running_loop(), queue)
        key = (name, role)
        with self._lock:
            self._views.setdefault(name, view)
            self._listeners.setdefault(key, []).append(entry)
            self._last.pop(key, None)  # the new page is sent what there is at once
            self._start()
        self._wake.set()
        try:
            yield queue
        finally:
            with self._lock:
                self._listeners[key].remove(entry)
                if not self._listeners[key]:
                    del self._listeners[key]
                    self._last.pop(key, None)
                if not any(n == name for n, _ in self._listeners):
                    self._views.pop(name, None)

    def listening(self) -> int:
        with self._lock:
            return sum(len(entries) for entries in self._listeners.values())

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._poll, name="legion-web-live", daemon=True)
            self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.period)
            self._wake.clear()
            with self._lock:
                wanted = {key: list(entries) for key, entries in self._listeners.items() if entries}
                views = dict(self._views)
            for view in {name for name, _ in wanted}:
                shown = views[view]
                try:
                    data = shown.read()
                except Exception:
                    continue
                for key in [key for key in wanted if key[0] == view]:
                    html = shown.render(data, key[1])
                    with self._lock:
                        if self._last.get(key) == html:
                            continue
                        self._last[key] = html
                    for loop, queue in wanted[key]:
                        with contextlib.suppress(RuntimeError):  # its loop has closed
                            loop.call_soon_threadsafe(_offer, queue, html)


def _offer(queue: asyncio.Queue[str], html: str) -> None:
    """Give a page the newest view; a page that has not taken the last few loses the oldest."""
    if queue.full():
        with contextlib.suppress(asyncio.QueueEmpty):
            queue.get_nowait()
    queue.put_nowait(html)
