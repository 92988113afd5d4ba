"""The TUI's one watcher: it reads what changes outside the app (the bus, the shown view's
read model, the trackers' questions) in worker threads and posts what it found to the app as
typed messages; no widget polls (Textual's model: workers post messages, widgets react).

Three loops, one per pace, each a Textual thread worker (the bus's with a connection of its
own; the others read through `Sources`, which opens what it needs):

- **bus**: the bus is a SQLite file many processes write to, and every commit to it changes
  the file or its write-ahead log (size, modification time). The loop looks at those every
  `poll_s` (two `stat`s, no query) and reads only when they moved: new messages
  (`seq > cursor`, one indexed query), agents, and what waits for the human. It reads
  anyway every `BACKSTOP_S`, in case two commits left the file looking the same.
- **views**: the read model of the view shown (board, peek, log), which may ask tmux or a
  tracker: when the view is shown or asked for (`want`), then every few seconds while shown.
- **trackers**: the questions waiting on the projects' trackers (online, maybe slow): at the
  start, every `tracker_s`, and when asked (Ctrl+R in the inbox).

Each loop answers `sync(loop)` with `Synced` after the pass it then makes, so whoever waits
for it (the app's `settled`, for tests) knows everything read before was posted."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from textual.message import Message as TextualMessage
from textual.worker import NoActiveWorker, get_current_worker

from legion.bus import Bus, actions
from legion.bus.model import Agent, Message
from legion.errors import LegionError
from legion.tui.sources import ActionLogView, Board, Peek, Sources, TrackerInbox, Unavailable

POLL_S = 0.1  # how often the bus's file is looked at: a post -> screen well under 250 ms
BACKSTOP_S = 5.0  # a full reading of the bus however the file looks
TRACKER_S = 10.0  # the trackers' questions: they may be online, so seldom
PEEK_LINES = 60
# While a view is shown, its read model is read again this often (seconds).
VIEW_EVERY = {"board": 5.0, "log": 2.0, "peek": 1.0}

Loop = Literal["bus", "views", "trackers"]
LOOPS: tuple[Loop, ...] = ("bus", "views", "trackers")


# -- what the watcher posts ---------------------------------------------------------------------


class MessagesArrived(TextualMessage):
    """Messages posted on the bus since the last ones posted to the app, oldest first."""

    def __init__(self, messages: Sequence[Message]) -> None:
        super().__init__()
        self.messages = tuple(messages)


class AgentsChanged(TextualMessage):
    """Every agent on the bus (the archived too), when one came, went or changed status."""

    def __init__(self, agents: Sequence[Agent]) -> None:
        super().__init__()
        self.agents = list(agents)


class InboxChanged(TextualMessage):
    """What waits for the human on the bus changed: the messages addressed to them that they
    have not read, and the open questions addressed to them (oldest first)."""

    def __init__(self, unread: Sequence[Message], questions: Sequence[Message]) -> None:
        super().__init__()
        self.unread = tuple(unread)
        self.questions = list(questions)


class BoardChanged(TextualMessage):
    def __init__(self, board: Board | Unavailable) -> None:
        super().__init__()
        self.board = board


class PeekChanged(TextualMessage):
    def __init__(self, peek: Peek | Unavailable) -> None:
        super().__init__()
        self.peek = peek


class LogChanged(TextualMessage):
    def __init__(self, log: ActionLogView | Unavailable) -> None:
        super().__init__()
        self.log = log


class AsksRead(TextualMessage):
    """The trackers' questions, read in a reading that began at `began` (monotonic clock):
    an answer given before then is not among them any more."""

    def __init__(self, found: TrackerInbox, began: float) -> None:
        super().__init__()
        self.found = found
        self.began = began


class Synced(TextualMessage):
    """`loop` has made the pass `sync` asked for with `token` (and every earlier one)."""

    def __init__(self, loop: Loop, token: int) -> None:
        super().__init__()
        self.loop = loop
        self.token = token


class SyncWaits:
    """The app's side of `Watcher.sync`: a future for each token asked for, resolved when the
    app handles its loop's `Synced` for that token or a later one."""

    def __init__(self) -> None:
        self._waiting: list[tuple[Loop, int, asyncio.Future[None]]] = []

    def waiting(self, loop: Loop, token: int) -> asyncio.Future[None]:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((loop, token, done))
        return done

    def synced(self, event: Synced) -> None:
        still = []
        for loop, token, done in self._waiting:
            if loop == event.loop and token <= event.token:
                if not done.done():
                    done.set_result(None)
            else:
                still.append((loop, token, done))
        self._waiting = still


# -- what the views loop reads ------------------------------------------------------------------


class Recipient(Protocol):
    """Whom the watcher tells: the app (Textual's `post_message` may be called from any
    thread)."""

    def post_message(self, message: TextualMessage) -> bool: ...


@dataclass(frozen=True, slots=True)
class Shown:
    """The view on screen, the project it is about, and the agent highlighted (for peek)."""

    view: str = "chat"
    project: str | None = None
    agent: Agent | None = None


@dataclass(frozen=True, slots=True)
class BusState:
    """Where the bus loop starts: what the app read itself before its first screen."""

    cursor: int  # the newest message's seq
    agents: tuple[Agent, ...]
    unread: tuple[str, ...]  # ids of the messages for the human, unread
    questions: tuple[str, ...]  # ids of the open questions for the human


def file_signal(path: Path) -> Callable[[], Hashable]:
    """What changes whenever a SQLite file in WAL mode is committed to: the file's and its
    log's identity, size and modification time."""

    def signal() -> Hashable:
        marks: list[tuple[int, int, int]] = []
        for name in (path, path.with_name(path.name + "-wal")):
            try:
                st = name.stat()
            except OSError:
                marks.append((0, 0, 0))
                continue
            marks.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(marks)

    return signal


class _Pace:
    """A loop's wake-up: `sync` and `want` wake it early; `sync`'s tokens are confirmed after
    the pass they woke."""

    def __init__(self) -> None:
        self.wake = threading.Event()
        self._lock = threading.Lock()
        self._asked = 0
        self._confirmed = 0
        self._wanted = False

    def sync(self) -> int:
        with self._lock:
            self._asked += 1
            token = self._asked
        self.wake.set()
        return token

    def want(self) -> None:
        with self._lock:
            self._wanted = True
        self.wake.set()

    def wait(self, timeout: float | None) -> tuple[int, bool]:
        """Until woken or `timeout`: the newest token to confirm after this pass (0: none),
        and whether a reading was asked for. The wake-up is cleared before they are read, so
        one that comes later is never lost."""
        self.wake.wait(timeout)
        self.wake.clear()
        with self._lock:
            wanted, self._wanted = self._wanted, False
            token = self._asked if self._asked > self._confirmed else 0
            self._confirmed = self._asked
            return token, wanted


class Watcher:
    """The loops, and what the app tells them (`show`, `want`, `sync`, `stop`); run each
    loop with `run(loop)` in a thread worker. Everything it finds goes to `app` as a message."""

    def __init__(
        self,
        app: Recipient,
        open_bus: Callable[[], Bus],
        sources: Sources,
        start: BusState,
        *,
        signal: Callable[[], Hashable] | None = None,
        poll_s: float = POLL_S,
        tracker_s: float = TRACKER_S,
    ) -> None:
        """`signal`: what changes when the bus is written (`file_signal`); without it the
        bus is read every `poll_s`."""
        self.app = app
        self.open_bus = open_bus
        self.sources = sources
        self.signal = signal
        self.poll_s = poll_s
        self.tracker_s = tracker_s
        self._start = start
        self._paces = {loop: _Pace() for loop in LOOPS}
        self._stopped = threading.Event()
        self._shown_lock = threading.Lock()
        self._shown = Shown()

    # -- what the app says ------------------------------------------------------------------------

    def show(
        self, *, view: str | None = None, project: str | None = None, agent: Agent | None = None
    ) -> None:
        """What the views loop reads from now on: the view shown, the open channel's project,
        the agent highlighted (each None: as it was); read at once if it changed."""
        with self._shown_lock:
            shown = Shown(
                view or self._shown.view,
                project if project is not None else self._shown.project,
                agent if agent is not None else self._shown.agent,
            )
            if shown == self._shown:
                return
            self._shown = shown
        self.want("views")

    def want(self, loop: Loop) -> None:
        """Read now: the bus, the view shown, or the trackers."""
        self._paces[loop].want()

    def sync(self, loop: Loop) -> int:
        """A token the loop answers with `Synced` after its next pass."""
        return self._paces[loop].sync()

    def stop(self) -> None:
        self._stopped.set()
        for pace in self._paces.values():
            pace.wake.set()

    def _running(self) -> bool:
        if self._stopped.is_set():
            return False
        try:
            return not get_current_worker().is_cancelled
        except NoActiveWorker:
            return True  # a plain thread (tests): `stop` ends it

    def _post(self, message: TextualMessage) -> None:
        self.app.post_message(message)

    def run(self, loop: Loop) -> None:
        {"bus": self._watch_bus, "views": self._watch_views, "trackers": self._watch_trackers}[
            loop
        ]()

    # -- the bus --------------------------------------------------------------------------------

    def _watch_bus(self) -> None:
        bus = self.open_bus()
        pace = self._paces["bus"]
        cursor = self._start.cursor
        agents = self._start.agents
        unread, questions = self._start.unread, self._start.questions
        seen: Hashable = None
        read_at = time.monotonic()
        try:
            while self._running():
                token, wanted = pace.wait(self.poll_s)
                if not self._running():
                    return
                now = time.monotonic()
                mark = self.signal() if self.signal is not None else None
                due = wanted or token or mark != seen or now - read_at >= BACKSTOP_S
                if self.signal is None or due:
                    try:
                        found = bus.messages(since=cursor)
                        latest = bus.agents(include_archived=True)
                        waiting = bus.messages(unread_for=bus.human().id, last=1000)
                        asked = actions.human_inbox(bus)
                    except LegionError:
                        found = None  # a locked bus: read again next time
                    if found is not None:
                        seen, read_at = mark, now
                        if found:
                            cursor = found[-1].seq
                            self._post(MessagesArrived(found))
                        if tuple(latest) != agents:
                            agents = tuple(latest)
                            self._post(AgentsChanged(latest))
                        ids = tuple(m.id for m in waiting), tuple(m.id for m in asked)
                        if ids != (unread, questions):
                            unread, questions = ids
                            self._post(InboxChanged(waiting, asked))
                if token:
                    self._post(Synced("bus", token))
        finally:
            bus.close()

    # -- the shown view -------------------------------------------------------------------------

    def _watch_views(self) -> None:
        pace = self._paces["views"]
        read_at: dict[str, float] = {}
        last: object = None
        while self._running():
            with self._shown_lock:
                shown = self._shown
            every = VIEW_EVERY.get(shown.view)
            wait = None  # a view with nothing to read (chat, inbox): until told otherwise
            if every is not None:
                wait = max(0.0, read_at.get(shown.view, 0.0) + every - time.monotonic())
            token, wanted = pace.wait(wait)
            if not self._running():
                return
            with self._shown_lock:
                shown = self._shown
            every = VIEW_EVERY.get(shown.view)
            now = time.monotonic()
            if every is not None and (wanted or now - read_at.get(shown.view, 0.0) >= every):
                read_at = {shown.view: now}
                found, read = self._read_view(shown)
                if wanted or (shown.view, read) != last:
                    last = shown.view, read
                    self._post(found)
            if token:
                self._post(Synced("views", token))

    def _read_view(self, shown: Shown) -> tuple[TextualMessage, object]:
        """The message for the view shown, and what it carries (to tell a change)."""
        if shown.view == "board":
            board = self.sources.board(shown.project)
            return BoardChanged(board), board
        if shown.view == "log":
            log = self.sources.action_log(shown.project, 100)
            return LogChanged(log), log
        peek = (
            Unavailable("highlight an agent in the sidebar to see its screen")
            if shown.agent is None
            else self.sources.peek(shown.agent, PEEK_LINES)
        )
        return PeekChanged(peek), peek

    # -- the trackers ---------------------------------------------------------------------------

    def _watch_trackers(self) -> None:
        pace = self._paces["trackers"]
        read_at: float | None = None
        while self._running():
            now = time.monotonic()
            wait = 0.0 if read_at is None else max(0.0, read_at + self.tracker_s - now)
            token, wanted = pace.wait(wait)
            if not self._running():
                return
            now = time.monotonic()
            if wanted or read_at is None or now - read_at >= self.tracker_s:
                read_at = now
                self._post(AsksRead(self.sources.tracker_questions(), now))
            if token:
                self._post(Synced("trackers", token))
