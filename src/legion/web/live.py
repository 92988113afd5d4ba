"""The web view's live pages: each view a page listens to (the boards, the inbox, an issue)
read by one poller thread, rendered once per role, and pushed to each listening page whose
last push differs. However many pages are open, a view is read once a period; with none
open it is not read at all.

It reads on a timer rather than on the daemon's wake-ups because what changes a board is
spread over the tracker, the forge, tmux and transcripts (the same reason the TUI's watcher
polls: `legion.tui.project_watch`). A view that can say cheaply whether it may have changed
(`View.stamp`: its files' sizes and times) is read again only when it may have, or after
`REFRESH_S` (what no file here shows: a window that died): so a board of a thousand issues
costs its reads only when something moved, and a change on this machine reaches the page
within a tenth of a second and a read; on a PostgreSQL store the stamp is the store's count
of NOTIFYs (`legion.store.changes`), so a change anywhere in a fleet does the same. A view
whose stamp cannot tell (its tracker is Linear's or GitHub's, or its PostgreSQL store is not
listened to) is read every `SLOW_S`: each read is requests against the rate limit the swarm
itself needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from legion.core.web_access import Role

TICK_S = 0.1  # how often the poller looks at a view's stamp
PERIOD_S = 0.5  # a view without a stamp is read this often (what it reads is this machine's)
REFRESH_S = 5.0  # a view with a stamp is read again at least this often
# A view whose stamp cannot tell (a tracker on Linear or GitHub, a PostgreSQL store not
# listened to) is read this often: its reads are requests to a service whose rate limit the
# swarm needs.
SLOW_S = 15.0
# Live streams at once (in all, and of one person's token), and views other than the fixed
# ones (an issue's, a channel's, a filtered log): each view is read while it is listened to,
# so these bound what open pages can make the server read.
MAX_LISTENERS = 200
MAX_PER_OWNER = 8
MAX_VIEWS = 32
# Given to every page's queue when the server stops: its stream ends at once, so the server
# stops without waiting out (and then cancelling) every open page.
END = "\x00end"


@dataclass(frozen=True, slots=True)
class View:
    read: Callable[[], object]  # slow (a tracker, tmux): called in the poller's thread
    render: Callable[[object, Role], str]  # the page's live part, for a person of that role
    # Cheap: what, unchanged, means the view need not be read again (None: read each period).
    stamp: Callable[[], object] | None = None


@dataclass(eq=False, slots=True)
class _Listener:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[str]
    role: Role
    owner: str  # whose page: the person's token (however many times they logged in)
    sent: str | None = None  # the last part given to this page


@dataclass(slots=True)
class _Watched:
    view: View
    listeners: list[_Listener] = field(default_factory=list)
    stamp: object = None
    read_at: float = 0.0  # monotonic; 0: never read
    shown: dict[Role, str] = field(default_factory=dict)  # the last render, by role


class TooManyListeners(Exception):
    """More live streams or views than the server serves at once."""


class LiveViews:
    """The views pages listen to, by name (`board`, `inbox`, `issue/<project>/<issue>`)."""

    def __init__(
        self,
        period: float = PERIOD_S,
        refresh: float = REFRESH_S,
        *,
        fixed: frozenset[str] = frozenset(),
        slow: float = SLOW_S,
    ) -> None:
        """`fixed`: the views every page may listen to (the board, the inbox, …), never
        counted against MAX_VIEWS."""
        self.tick = min(TICK_S, period)
        self.period = period
        self.refresh = refresh
        self.slow = slow
        self.fixed = fixed
        self._lock = threading.Lock()
        self._watched: dict[str, _Watched] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ending = False

    def refusal(self, name: str, owner: str) -> str | None:
        """Why `owner`'s page may not listen to view `name` now (the bounds), or None."""
        with self._lock:
            return self._refusal(name, owner)

    def _refusal(self, name: str, owner: str) -> str | None:
        if self._ending:
            return "the server is stopping"
        listeners = [e for w in self._watched.values() for e in w.listeners]
        if len(listeners) >= MAX_LISTENERS:
            return f"{MAX_LISTENERS} live pages are open already"
        if sum(1 for e in listeners if e.owner == owner) >= MAX_PER_OWNER:
            return f"{MAX_PER_OWNER} live pages of yours are open already"
        others = [n for n in self._watched if n not in self.fixed]
        if name not in self._watched and name not in self.fixed and len(others) >= MAX_VIEWS:
            return f"{MAX_VIEWS} views are watched already"
        return None

    @contextlib.contextmanager
    def listener(
        self, name: str, view: View, role: Role, owner: str
    ) -> Iterator[asyncio.Queue[str]]:
        """For the block, a queue given view `name`'s live part each time it changes (at
        once what there is now). Called on the page's event loop. `TooManyListeners` past the
        bounds (checked and taken under one lock)."""
        entry = _Listener(asyncio.get_running_loop(), asyncio.Queue(maxsize=8), role, owner)
        with self._lock:
            refused = self._refusal(name, owner)
            if refused is not None:
                raise TooManyListeners(refused)
            watched = self._watched.setdefault(name, _Watched(view))
            watched.listeners.append(entry)
            shown = watched.shown.get(role)
            if shown is not None:  # what there is, at once; the poller sends what changes
                entry.sent = shown
                entry.queue.put_nowait(shown)
            self._start()
        self._wake.set()
        try:
            yield entry.queue
        finally:
            with self._lock:
                watched.listeners.remove(entry)
                if not watched.listeners:
                    self._watched.pop(name, None)

    def listening(self) -> int:
        with self._lock:
            return sum(len(w.listeners) for w in self._watched.values())

    def end_streams(self) -> None:
        """The server stops: every page's stream is told to end (`END`), and no new one
        is admitted."""
        with self._lock:
            self._ending = True
            listeners = [e for w in self._watched.values() for e in w.listeners]
        for entry in listeners:
            with contextlib.suppress(RuntimeError):  # its loop has closed
                entry.loop.call_soon_threadsafe(_offer, entry.queue, END)

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
            self._wake.wait(self.tick)
            self._wake.clear()
            with self._lock:
                watched = list(self._watched.values())
            for one in watched:
                with contextlib.suppress(Exception):  # a failed read shows at the next one
                    self._look(one)

    def _look(self, watched: _Watched) -> None:
        """Read the view if it may have changed (or was never read), render it for each role
        listening, and give each page what it was not given yet."""
        now = time.monotonic()
        with self._lock:
            listeners = list(watched.listeners)
            unshown = any(entry.role not in watched.shown for entry in listeners)
        age = now - watched.read_at if watched.read_at else None
        stamp = None if watched.view.stamp is None else watched.view.stamp()
        if stamp is None:  # no stamp: read each period; one that cannot tell: slowly
            every = self.period if watched.view.stamp is None else self.slow
            if age is not None and age < every and not unshown:
                return
        elif stamp == watched.stamp and age is not None and age < self.refresh and not unshown:
            return
        data = watched.view.read()
        watched.stamp, watched.read_at = stamp, now
        shown = {role: watched.view.render(data, role) for role in {e.role for e in listeners}}
        with self._lock:
            watched.shown.update(shown)
            for entry in listeners:
                html = shown[entry.role]
                if entry.sent == html:
                    continue
                entry.sent = html
                with contextlib.suppress(RuntimeError):  # its loop has closed
                    entry.loop.call_soon_threadsafe(_offer, entry.queue, html)


def _offer(queue: asyncio.Queue[str], html: str) -> None:
    """Give a page the newest view; a page that has not taken the last few loses the oldest."""
    if queue.full():
        with contextlib.suppress(asyncio.QueueEmpty):
            queue.get_nowait()
    queue.put_nowait(html)
