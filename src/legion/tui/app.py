"""`legion tui`: the control centre for every project and branch on the machine.

Everything on screen is read from the bus and the projects' own read models (see
`legion.tui.sources`); the TUI keeps no state of its own but how far the human has read each
channel (`legion.tui.readmarks`). It owns no process: closing it stops nothing.

Nothing here polls: one watcher (`legion.tui.watcher`) reads the bus, the shown view's read
model and the trackers' questions in worker threads and posts what changed as messages
(`MessagesArrived`, `AgentsChanged`, `InboxChanged`, `BoardChanged`, ...), which the app
routes to its views. What the human does goes through `legion.bus.actions` and the sources,
and the watcher is told to look again (`want`).
"""

from __future__ import annotations

import asyncio
import functools
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import ClassVar, ParamSpec, TypeVar

from rich.console import Group
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.events import Click, Focus, Key, MouseScrollUp, Resize
from textual.message import Message as TextualMessage
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import (
    DataTable,
    Footer,
    Input,
    OptionList,
    RichLog,
    Static,
    TabbedContent,
    TabPane,
)
from textual.widgets.input import Selection
from textual.widgets.option_list import Option

from legion.bus import actions
from legion.bus.model import HUMAN_NAME, Agent, AgentStatus, Channel, Message
from legion.bus.store import Bus
from legion.core.text import for_display
from legion.errors import LegionError
from legion.runtime.tmux import Attach
from legion.tui.present import (
    AgentRow,
    ArchivedChannelRow,
    ArchivedHeader,
    ChannelRow,
    DispatchChoice,
    Row,
    addresses_human,
    board_line_issues,
    board_text,
    channels_of,
    clock_time,
    complete_mention,
    count_text,
    dispatch_choice,
    dispatch_hint,
    hanging_lines,
    inbox_order,
    keys_table,
    markdown_line,
    mention_candidates,
    message_indent,
    message_text,
    one_line,
    question_markdown,
    question_text,
    row_text,
    shown,
    sidebar_rows,
)
from legion.tui.readmarks import ReadMarks
from legion.tui.sources import (
    Board,
    BoardIssue,
    Sources,
    TrackerAsk,
    Unavailable,
)
from legion.tui.watcher import (
    LOOPS,
    POLL_S,
    TRACKER_S,
    AgentsChanged,
    AsksRead,
    BoardChanged,
    BusState,
    InboxChanged,
    LogChanged,
    Loop,
    MessagesArrived,
    PeekChanged,
    Synced,
    Watcher,
    file_signal,
)

HISTORY = 200  # messages loaded when a channel opens, and each time one scrolls back
DISCOVERY = 1000  # recent messages read at start to find channels with no agent left
MARKS_SAVED_AFTER_S = 1.0  # read marks are written at most this often
SETTLE_TIMEOUT_S = 10.0

T = TypeVar("T")
P = ParamSpec("P")


def while_open(method: Callable[P, None]) -> Callable[P, None]:
    """For a timer or a worker thread's result: once the app is closing its widgets are
    gone, and there is nothing left to update."""

    @functools.wraps(method)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            method(*args, **kwargs)
        except NoMatches:
            return

    return guarded


class MentionSuggester(Suggester):
    """Completes an `@mention` from the selected channel's agents (Tab or Right accepts)."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.candidates: list[str] = []

    async def get_suggestion(self, value: str) -> str | None:
        return complete_mention(value, self.candidates)


class TextLine(Input):
    """A line the human types in (the chat line, the answer line). Coming back to it keeps
    the draft as it was, the cursor at its end: nothing selected for the next key to wipe."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(select_on_focus=False, **kwargs)  # type: ignore[arg-type]

    def on_focus(self, event: Focus) -> None:
        self.selection = Selection.cursor(len(self.value))


class ChatInput(TextLine):
    """The chat line: Tab takes the suggested completion, and only that. It never moves the
    focus: a Tab that found nothing to complete would otherwise send the rest of the
    sentence to the sidebar, where plain letters act on agents."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("tab", "complete", "Complete @", show=False, priority=True),
    ]

    def action_complete(self) -> None:
        if self.cursor_at_end and self._suggestion:
            self.action_cursor_right()  # takes the suggestion


class Confirm(ModalScreen[bool]):
    """A yes/no question before something that cannot be undone: `y` says yes; `n`,
    Escape and any other key say no (a stray letter never confirms)."""

    DEFAULT_CSS = """
    Confirm { align: center middle; }
    Confirm > Static {
        width: auto; max-width: 90%; height: auto;
        border: double $error; padding: 1 2; background: $panel;
    }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        yield Static(Text(self.question))

    def on_key(self, event: Key) -> None:
        event.stop()
        event.prevent_default()
        self.dismiss(event.key == "y")


class Help(ModalScreen[None]):
    """Every key (`?`, F1). Arrows and pages scroll; any other key closes it."""

    DEFAULT_CSS = """
    Help { align: center middle; }
    Help > Vertical {
        width: 90%; max-width: 110; height: 90%; max-height: 34;
        border: double $accent; background: $panel; padding: 0 1;
    }
    Help #help-title { height: 1; text-style: bold; }
    Help VerticalScroll { height: 1fr; }
    """
    SCROLL_KEYS = frozenset({"up", "down", "pageup", "pagedown", "home", "end"})

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Keys (↑ ↓ PgUp PgDn scroll; any other key closes this)", id="help-title")
            with VerticalScroll():
                yield Static(keys_table(), id="help-keys")

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()

    def on_key(self, event: Key) -> None:
        if event.key in self.SCROLL_KEYS:
            return
        event.stop()
        event.prevent_default()
        self.dismiss(None)


class Sidebar(OptionList):
    """Channels, their agents, and the archived agents (a section that opens and closes)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "app.attach", "Attach"),
        Binding("a", "app.archive", "Archive"),
        Binding("k", "app.kill(False)", "Kill"),
        Binding("K", "app.kill(True)", "Kill -f", show=False),
    ]  # each asks first (`Confirm`)


class BoardScroll(VerticalScroll):
    """The board: ↑/↓ move its highlighted issue, `d` starts the worker it suggests."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "app.board_move(-1)", "Up", show=False),
        Binding("down", "app.board_move(1)", "Down", show=False),
        Binding("d", "app.dispatch", "Dispatch"),
    ]


class BoardLines(Static):
    """The board's lines; a click highlights the issue on the line clicked."""

    class Picked(TextualMessage):
        def __init__(self, line: int) -> None:
            super().__init__()
            self.line = line

    def on_click(self, event: Click) -> None:
        self.post_message(self.Picked(event.y))


InboxItem = Message | TrackerAsk


class MessageLog(RichLog):
    """A channel's messages: the newest `HISTORY` at first, older ones loaded as one scrolls
    above the first. Only what is loaded is rendered (RichLog keeps rendered lines and
    paints only those in view), so a channel of 10,000 messages opens as fast as one of 200."""

    def __init__(self, render: Callable[[Message, int], Text], **kwargs: object) -> None:
        super().__init__(wrap=True, min_width=20, auto_scroll=False, **kwargs)  # type: ignore[arg-type]
        self.render_message = render  # a message as lines of at most the width given
        self.shown: list[Message] = []
        self.complete = True  # whether the first shown message is the channel's first
        self.on_top: Callable[[], None] = lambda: None
        self._width = 0  # the last width the log had on screen
        self._wrapped_at = 0  # the width its lines were last wrapped to

    def _line_width(self) -> int:
        """The width to wrap to: 0 before the log was ever on screen. A log in a hidden view
        has no width: its messages are wrapped to the width it had on screen (not to a few
        columns), and again if it is shown at another."""
        width = self.scrollable_content_region.width
        if width > 0:
            self._width = width
        return self._width

    def _write(self, message: Message, *, scroll_end: bool) -> None:
        width = self._line_width()
        if not width:
            return  # kept in `shown`: written when the log first has a width (`_rewrap`)
        self._wrapped_at = width
        self.write(self.render_message(message, width), width=width, scroll_end=scroll_end)

    def show(self, messages: Sequence[Message], *, complete: bool) -> None:
        """Replace what is shown, and stay at the newest message."""
        self.shown = list(messages)
        self.complete = complete
        self._rerender(at_end=True)

    def append(self, messages: Iterable[Message]) -> None:
        """New messages at the bottom; followed only if the reader is at the bottom already
        (reading history is not interrupted)."""
        follow = self.is_vertical_scroll_end or self.max_scroll_y == 0
        for message in messages:
            self.shown.append(message)
            self._write(message, scroll_end=follow)

    def prepend(self, older: Sequence[Message], *, complete: bool) -> None:
        """Older messages above, keeping the ones in view where they are."""
        before = len(self.lines)
        top = self.scroll_y
        self.shown[:0] = older
        self.complete = complete
        self._rerender(at_end=False)
        self.scroll_to(y=top + len(self.lines) - before, animate=False, immediate=True)

    def _rerender(self, *, at_end: bool) -> None:
        self.clear()
        last = len(self.shown) - 1
        for n, message in enumerate(self.shown):
            # Scrolled with the last write: writes wait until the widget has a size.
            self._write(message, scroll_end=at_end and n == last)

    def _rewrap(self) -> None:
        # Lines are wrapped when written: a new width needs them written again.
        width = self.scrollable_content_region.width
        if width > 0 and width != self._wrapped_at and self.shown:
            self._rerender(at_end=self.is_vertical_scroll_end or self.max_scroll_y == 0)

    def on_resize(self, event: Resize) -> None:
        # Also sent when a hidden view is shown again at another size. (RichLog's own
        # handler runs too: Textual calls each class's.)
        self._rewrap()

    # One more step up at the top (key or wheel) loads the page before. Not on reaching the
    # top: a scroll animation passes through it, and the reader may only be looking there.
    def _ask_older(self) -> None:
        if self.scroll_y <= 0 and not self.complete:
            self.on_top()

    def action_scroll_up(self) -> None:
        self._ask_older()
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self._ask_older()
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self._ask_older()
        super().action_scroll_home()

    def _on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        # Textual calls each class's handler in turn: Widget's scrolls, this one only asks.
        self._ask_older()


class LegionApp(App[int]):
    """The TUI. Its data sources are arguments, so tests drive it with `run_test()`.

    `open_bus` opens a connection to the bus: one for the app's own thread, and one for each
    worker thread that needs the bus (SQLite connections are not shared between threads).
    `channel`: the channel to open first (default: the first listed). `format_time` turns a
    message's `created_at` into what is shown (tests fix it for stable screenshots).
    `bus_file`: the bus's SQLite file, whose changes tell the watcher when to read (without
    it, the watcher reads every `poll_s`)."""

    TITLE = "Legion"
    CSS = """
    #body { height: 1fr; }
    Sidebar { width: 26; height: 1fr; }
    #views { width: 1fr; height: 1fr; }
    #chat-title, .view-title { height: auto; max-height: 4; padding: 0 1; }
    #inbox-detail { height: auto; max-height: 40%; padding: 0 1; }
    #chat-title { text-style: bold; }
    MessageLog { height: 1fr; padding: 0 1; }
    #inbox-table, #log-table { height: 1fr; }
    #inbox-troubles {
        height: auto; max-height: 4; padding: 0 1; display: none;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    #board-scroll { height: 1fr; padding: 0 1; }
    #board-lines { width: 100%; text-wrap: nowrap; text-overflow: ellipsis; }
    #peek-scroll { height: 1fr; padding: 0 1; }
    TabPane { padding: 0; }
    /* Focus shows in the text too (NO_COLOR, a screen reader's dump): a double line. */
    Input:focus, Sidebar:focus { border: double $accent; }
    MessageLog, DataTable, #board-scroll, #peek-scroll { border-left: blank; }
    MessageLog:focus, DataTable:focus, #board-scroll:focus, #peek-scroll:focus {
        border-left: double $accent;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("f2", "view('chat')", "Chat", show=False),
        Binding("f3", "view('inbox')", "Inbox", show=False),
        Binding("f4", "view('board')", "Board", show=False),
        Binding("f5", "view('peek')", "Peek", show=False),
        Binding("f6", "view('log')", "Log", show=False),
        Binding("escape", "focus_sidebar", "Sidebar", show=False),
        Binding("ctrl+r", "refresh_view", "Refresh"),
        Binding("f1", "help", "Help"),
        Binding("question_mark", "help", "Help", show=False),  # a text line types it
    ]

    def __init__(
        self,
        open_bus: Callable[[], Bus],
        sources: Sources,
        *,
        marks: ReadMarks | None = None,
        channel: Channel | None = None,
        format_time: Callable[[str], str] = clock_time,
        poll_s: float = POLL_S,
        history: int = HISTORY,
        tracker_s: float = TRACKER_S,
        bus_file: Path | None = None,
    ) -> None:
        super().__init__()
        self.open_bus = open_bus
        self.sources = sources
        self.bus = open_bus()
        self.human = self.bus.human()
        self.format_time = format_time
        self.history = history
        # What the sidebar is made of.
        recent = self.bus.messages(last=DISCOVERY)
        self.cursor = recent[-1].seq if recent else 0
        self.marks = marks if marks is not None else ReadMarks(None, self.cursor)
        self.agents: list[Agent] = self.bus.agents(include_archived=True)
        self.channels: set[Channel] = channels_of(self.agents, recent)
        self.unread: dict[Channel, int] = {c: self._count_unread(c) for c in self.channels}
        self.for_you: dict[Channel, int] = {}
        self.inbox: list[Message] = actions.human_inbox(self.bus)
        self.inbox_ids = {m.id for m in self.inbox}
        # The trackers' questions, as the watcher last read them (`AsksRead`).
        self.asks: tuple[TrackerAsk, ...] = ()
        self.ask_troubles: tuple[str, ...] = ()
        self.inbox_items: list[InboxItem] = []
        # Tracker answers given (monotonic clock): a reading begun before one may still list it.
        self._answered: dict[str, float] = {}
        self._answering: set[str] = set()
        # The board: its issues, and the highlighted one.
        self.board: Board | None = None
        self.board_cursor = 0
        self._dispatching: set[str] = set()
        self.archived_expanded = False
        self.rows: list[Row] = []
        self.selected: Channel | None = channel
        self.peek_agent: Agent | None = None
        self.suggester = MentionSuggester()
        if channel is not None:
            # The channel the human stands in is listed from the start, though nobody has
            # spoken there yet: it is where the chat line posts.
            self.channels.add(channel)
            self.unread.setdefault(channel, self._count_unread(channel))
        self.watcher = Watcher(
            self,
            open_bus,
            sources,
            BusState(self.cursor, tuple(self.agents), (), tuple(m.id for m in self.inbox)),
            signal=file_signal(bus_file) if bus_file is not None else None,
            poll_s=poll_s,
            tracker_s=tracker_s,
        )
        self._sync_waiters: list[tuple[Loop, int, asyncio.Future[None]]] = []
        self._marks_timer = False

    # -- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            yield Sidebar(id="sidebar")
            with TabbedContent(id="views", initial="chat"):
                with TabPane("F2 Chat", id="chat"):
                    yield Static("", id="chat-title")
                    yield MessageLog(self._render_message, id="messages")
                    yield ChatInput(
                        placeholder="Message (@ completes with Tab)",
                        suggester=self.suggester,
                        id="chat-input",
                    )
                with TabPane("F3 Inbox", id="inbox"):
                    yield Static("", id="inbox-troubles")
                    yield DataTable(id="inbox-table", cursor_type="row", zebra_stripes=True)
                    yield Static("", id="inbox-detail")
                    yield TextLine(placeholder="Answer (Enter sends)", id="answer-input")
                with TabPane("F4 Board", id="board"):
                    yield Static("", id="board-title", classes="view-title")
                    with BoardScroll(id="board-scroll"):
                        yield BoardLines("", id="board-lines")
                with TabPane("F5 Peek", id="peek"):
                    yield Static("", id="peek-title", classes="view-title")
                    with VerticalScroll(id="peek-scroll"):
                        yield Static("", id="peek-screen")
                with TabPane("F6 Log", id="log"):
                    yield Static("", id="log-title", classes="view-title")
                    yield DataTable(id="log-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#inbox-table", DataTable).add_columns("When", "Channel", "From", "Question")
        self.query_one("#log-table", DataTable).add_columns(
            "At", "Issue or agent", "Action or event", "Outcome", "Detail"
        )
        self.query_one(MessageLog).on_top = self._load_older
        self._show_inbox()
        self._refresh_sidebar()
        first = self.selected or next(
            (row.channel for row in self.rows if isinstance(row, ChannelRow)), None
        )
        if first is not None:
            self.open_channel(first)
        else:
            self._set_title()
        self._read_counts()
        self._refresh_sidebar()  # with the counts: the first screen is already right
        for loop in LOOPS:
            self.run_worker(
                functools.partial(self.watcher.run, loop),
                name=f"watch {loop}",
                group="watcher",
                thread=True,
            )
        self.query_one(ChatInput).focus()

    def on_resize(self, event: Resize) -> None:
        # A wide terminal gives the sidebar room for long branch names.
        self.query_one(Sidebar).styles.width = 26 if event.size.width < 120 else 36

    def on_unmount(self) -> None:
        self.watcher.stop()
        self.marks.save()
        self.bus.close()

    # -- waiting for the watcher (tests) ------------------------------------------------------

    async def settled(self) -> None:
        """Until what the human started (a kill, a dispatch, an answer) is done, and each of
        the watcher's loops has made a pass after this call and the app has handled what it
        posted: then the screen shows everything there was to read. Tests wait on this
        instead of sleeping."""
        doing = [w for w in self.workers if w.group != "watcher" and w.is_running]
        if doing:
            await self.workers.wait_for_complete(doing)
        for loop in LOOPS:  # in this order: what the bus changes, the views read
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._sync_waiters.append((loop, self.watcher.sync(loop), done))
            await asyncio.wait_for(done, SETTLE_TIMEOUT_S)

    @on(Synced)
    def _loop_synced(self, event: Synced) -> None:
        waiting = []
        for loop, token, done in self._sync_waiters:
            if loop == event.loop and token <= event.token:
                if not done.done():
                    done.set_result(None)
            else:
                waiting.append((loop, token, done))
        self._sync_waiters = waiting

    # -- rendering ----------------------------------------------------------------------------

    def _render_message(self, message: Message, width: int) -> Text:
        for_you = addresses_human(message) or message.id in self.inbox_ids
        when = self.format_time(message.created_at)
        text = message_text(message, when, for_you=for_you)
        return hanging_lines(text, width, message_indent(when, for_you=for_you), self.console)

    def _set_title(self) -> None:
        title = self.query_one("#chat-title", Static)
        if self.selected is None:
            title.update("No channels yet: agents appear here when Legion starts them.")
            return
        here = [
            a
            for a in self.agents
            if a.channel == self.selected and a.status is not AgentStatus.ARCHIVED
        ]
        title.update(shown(f"{self.selected}  ({len(here)} agent{'' if len(here) == 1 else 's'})"))

    def _live_agents(self) -> list[Agent]:
        return [a for a in self.agents if a.status is not AgentStatus.ARCHIVED]

    # -- the sidebar --------------------------------------------------------------------------

    def _refresh_sidebar(self) -> None:
        rows = sidebar_rows(
            self.channels,
            self.agents,
            self.unread,
            self.for_you,
            archived_expanded=self.archived_expanded,
        )
        if rows == self.rows:
            return
        sidebar = self.query_one(Sidebar)
        same_keys = [r.key for r in rows] == [r.key for r in self.rows]
        self.rows = rows
        if same_keys:  # labels changed only: the list keeps its scroll and highlight
            for index, row in enumerate(rows):
                sidebar.replace_option_prompt_at_index(index, row_text(row))
            return
        highlighted = sidebar.highlighted_option
        keep = highlighted.id if highlighted is not None else None
        sidebar.set_options(Option(row_text(row), id=row.key) for row in rows)
        keys = [row.key for row in rows]
        if keep in keys:
            sidebar.highlighted = keys.index(keep)
        elif self.selected is not None and f"c:{self.selected}" in keys:
            sidebar.highlighted = keys.index(f"c:{self.selected}")

    def _row(self, key: str | None) -> Row | None:
        return next((row for row in self.rows if row.key == key), None)

    @on(OptionList.OptionSelected, "#sidebar")
    def _sidebar_selected(self, event: OptionList.OptionSelected) -> None:
        row = self._row(event.option.id)
        if isinstance(row, ArchivedHeader):
            self.archived_expanded = not row.expanded
            self._refresh_sidebar()
        elif isinstance(row, ChannelRow | ArchivedChannelRow):
            self.open_channel(row.channel)
        elif isinstance(row, AgentRow):
            self.peek_agent = row.agent
            self.watcher.show(agent=row.agent)
            self.open_channel(row.agent.channel)

    @on(OptionList.OptionHighlighted, "#sidebar")
    @while_open
    def _sidebar_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        row = self._row(event.option.id)
        if isinstance(row, AgentRow):
            self.peek_agent = row.agent
            self.watcher.show(agent=row.agent)

    def highlighted_agent(self) -> Agent | None:
        option = self.query_one(Sidebar).highlighted_option
        row = self._row(option.id if option is not None else None)
        return row.agent if isinstance(row, AgentRow) else None

    # -- the channel --------------------------------------------------------------------------

    def open_channel(self, channel: Channel) -> None:
        """Show `channel`'s newest messages; it is then read up to the newest."""
        self.selected = channel
        self.watcher.show(project=channel.project)
        found = self.bus.messages(channel=channel, last=self.history)
        self.query_one(MessageLog).show(found, complete=len(found) < self.history)
        self._seen(found)
        self.suggester.candidates = mention_candidates(channel, self._live_agents())
        self._set_title()
        self._refresh_sidebar()
        self._highlight(channel)

    def _highlight(self, channel: Channel) -> None:
        """Keep the sidebar's highlight on the open channel (or one of its agents)."""
        sidebar = self.query_one(Sidebar)
        option = sidebar.highlighted_option
        row = self._row(option.id if option is not None else None)
        if isinstance(row, AgentRow) and row.agent.channel == channel:
            return
        keys = [r.key for r in self.rows]
        if f"c:{channel}" in keys:
            sidebar.highlighted = keys.index(f"c:{channel}")

    def _seen(self, shown: Sequence[Message]) -> None:
        """The human has now seen `shown` in the selected channel."""
        if self.selected is None:
            return
        if shown:
            self.marks.mark(self.selected, shown[-1].seq)
            self._save_marks_soon()
        self.unread[self.selected] = 0
        if self.for_you.get(self.selected):
            self._attempt(lambda: self.bus.mark_read(self.human.id, (m.id for m in shown)))
            self.for_you[self.selected] = 0

    def _load_older(self) -> None:
        log = self.query_one(MessageLog)
        if self.selected is None or log.complete or not log.shown:
            return
        # The bus reads "the newest N", so older pages are read as a longer newest-N.
        wanted = len(log.shown) + self.history
        found = self.bus.messages(channel=self.selected, last=wanted)
        first = log.shown[0].seq
        older = [m for m in found if m.seq < first]
        log.prepend(older, complete=len(found) < wanted)

    def _count_unread(self, channel: Channel) -> int:
        newer = self.bus.messages(channel=channel, since=self.marks.last_seen(channel), last=1000)
        return sum(1 for m in newer if m.sender != HUMAN_NAME)

    def _save_marks_soon(self) -> None:
        """The read marks on disk within a second: one write for a burst of messages."""
        if not self._marks_timer:
            self._marks_timer = True
            self.set_timer(MARKS_SAVED_AFTER_S, self._save_marks)

    def _save_marks(self) -> None:
        self._marks_timer = False
        self.marks.save()

    # -- what the watcher posts ---------------------------------------------------------------

    @on(MessagesArrived)
    @while_open
    def _messages_arrived(self, event: MessagesArrived) -> None:
        here: list[Message] = []
        for message in event.messages:
            channel = message.channel
            self.channels.add(channel)
            if channel == self.selected:
                here.append(message)
            elif message.sender != HUMAN_NAME:
                self.unread[channel] = self.unread.get(channel, 0) + 1
        if here:
            self.query_one(MessageLog).append(here)
            self._seen(here)
        self._refresh_sidebar()

    @on(AgentsChanged)
    @while_open
    def _agents_changed(self, event: AgentsChanged) -> None:
        self.agents = event.agents
        self.channels |= channels_of(event.agents, ())
        if self.selected is not None:
            live = self._live_agents()
            self.suggester.candidates = mention_candidates(self.selected, live)
        self._set_title()
        self._refresh_sidebar()
        self.watcher.want("views")  # the peek and the board show agents' states

    @on(InboxChanged)
    @while_open
    def _inbox_changed(self, event: InboxChanged) -> None:
        self._counted(event.unread, event.questions)
        self._refresh_sidebar()

    def _read_counts(self) -> None:
        """What is addressed to the human and unread, and the inbox, read now (the first
        screen; later the watcher posts them)."""
        unread = self._attempt(lambda: self.bus.messages(unread_for=self.human.id, last=1000))
        inbox = self._attempt(lambda: actions.human_inbox(self.bus))
        self._counted(unread, inbox)

    def _counted(self, unread: Sequence[Message] | None, inbox: list[Message] | None) -> None:
        """What is addressed to the human and unread, by channel; and the inbox."""
        if unread is not None:
            here = [m for m in unread if m.channel == self.selected]
            counts: dict[Channel, int] = {}
            for message in unread:
                counts[message.channel] = counts.get(message.channel, 0) + 1
            self.for_you = counts
            if here:  # shown already, so read
                self._seen(here)
        if inbox is not None and [m.id for m in inbox] != [m.id for m in self.inbox]:
            self.inbox = inbox
            self.inbox_ids = {m.id for m in inbox}
            self._show_inbox()

    # -- the chat line -------------------------------------------------------------------------

    @on(Input.Submitted, "#chat-input")
    def _send(self, event: Input.Submitted) -> None:
        if self.selected is None:
            self.notify("no channel selected", severity="error")
            return
        channel = self.selected
        posted = self._attempt(lambda: actions.say(self.bus, self.human, channel, event.value))
        if posted is None:
            return
        event.input.value = ""
        self.watcher.want("bus")
        if posted.recipients:
            self._wake(channel.project)

    @work(thread=True, group="wake")
    def _wake(self, project: str) -> None:
        try:
            self.sources.wake(project)
        except LegionError:
            return  # a daemon that is not told delivers at its next tick

    # -- the inbox ----------------------------------------------------------------------------

    def _show_inbox(self) -> None:
        """The bus's open questions and the trackers', oldest first."""
        table = self.query_one("#inbox-table", DataTable)
        current = self._inbox_question()
        self.inbox_items = inbox_order(self.inbox, self.asks)
        table.clear()
        for item in self.inbox_items:
            if isinstance(item, TrackerAsk):
                table.add_row(
                    self.format_time(item.asked_at),
                    shown(item.project),
                    shown(item.identifier),
                    shown(item.title),
                    key=item.key,
                )
                continue
            body = item.body.strip()
            first_line = markdown_line(body.splitlines()[0] if body else "")
            table.add_row(
                self.format_time(item.created_at),
                shown(str(item.channel)),
                shown(f"@{item.sender.rpartition('/')[2]}"),
                first_line,
                key=item.id,
            )
        keys = [_inbox_key(item) for item in self.inbox_items]
        if current is not None and _inbox_key(current) in keys:
            table.move_cursor(row=keys.index(_inbox_key(current)))
        count = len(self.inbox_items)
        label = "F3 Inbox" + (f" {count_text(count)}" if count else "")
        self.query_one(TabbedContent).get_tab("inbox").label = label
        troubles = self.query_one("#inbox-troubles", Static)
        troubles.update(shown("\n".join(self.ask_troubles), style="bold"))
        troubles.display = bool(self.ask_troubles)
        self._show_question()

    def _inbox_question(self) -> InboxItem | None:
        table = self.query_one("#inbox-table", DataTable)
        if not self.inbox_items or table.row_count == 0:
            return None
        row = min(table.cursor_row, len(self.inbox_items) - 1)
        return self.inbox_items[row] if row >= 0 else None

    @on(DataTable.RowHighlighted, "#inbox-table")
    def _show_question(self) -> None:
        question = self._inbox_question()
        detail = self.query_one("#inbox-detail", Static)
        if question is None:
            detail.update("No open questions for you.")
        elif isinstance(question, TrackerAsk):
            asker = f"{question.project} {question.identifier} {question.title}"
            detail.update(
                Group(
                    shown(f"{asker} asks:", style="bold"),
                    question_markdown(question_text(question.question)),
                )
            )
        else:
            detail.update(
                Group(
                    shown(f"@{question.sender} asks in {question.channel}:", style="bold"),
                    question_markdown(question.body.strip()),
                )
            )

    @on(Input.Submitted, "#answer-input")
    def _answer(self, event: Input.Submitted) -> None:
        question = self._inbox_question()
        if question is None:
            self.notify("no question selected", severity="error")
            return
        if isinstance(question, TrackerAsk):
            if question.key in self._answering:
                self.notify(f"answering {question.identifier} already", severity="warning")
                return
            self._answering.add(question.key)
            self._answer_ask(question, event.value)
            return
        posted = self._attempt(
            lambda: actions.reply(self.bus, self.human, question.id, event.value)
        )
        if posted is None:
            return
        event.input.value = ""
        self.notify(f"answered @{question.sender}")
        self.watcher.want("bus")
        self._wake(question.channel.project)

    @work(thread=True, group="feedback")
    def _answer_ask(self, ask: TrackerAsk, text: str) -> None:
        # `legion feedback`'s: the tracker may be online, so off the app's thread.
        try:
            issue = self.sources.give_feedback(ask.project, ask.identifier, text)
        except LegionError as exc:
            self.call_from_thread(self._ask_refused, ask, one_line(str(exc)))
            return
        self.call_from_thread(self._ask_answered, ask, issue, time.monotonic())

    @while_open
    def _ask_refused(self, ask: TrackerAsk, reason: str) -> None:
        self._answering.discard(ask.key)
        self.notify(reason, severity="error", markup=False)

    @while_open
    def _ask_answered(self, ask: TrackerAsk, issue: str, at: float) -> None:
        self._answering.discard(ask.key)
        self._answered[ask.key] = at
        self.asks = tuple(a for a in self.asks if a.key != ask.key)
        self.query_one("#answer-input", Input).value = ""
        self.notify(f"answered {ask.project} {issue}: Legion relays it to the worker")
        self._show_inbox()

    @on(AsksRead)
    @while_open
    def _asks_read(self, event: AsksRead) -> None:
        # A reading begun after an answer was given lists it no more, or lists it again.
        self._answered = {k: at for k, at in self._answered.items() if at >= event.began}
        found = event.found
        asks = tuple(a for a in found.questions if a.key not in self._answered)
        if asks == self.asks and found.troubles == self.ask_troubles:
            return
        self.asks = asks
        self.ask_troubles = found.troubles
        self._show_inbox()

    # -- agents -------------------------------------------------------------------------------

    def action_archive(self) -> None:
        target = self.highlighted_agent()
        if target is None:
            self.notify("highlight an agent in the sidebar first", severity="warning")
            return

        def archive(yes: bool | None) -> None:
            if not yes:
                return
            done = self._attempt(lambda: actions.archive(self.bus, self.human, target))
            if done is not None:
                self.notify(f"archived @{done.address}")
                self.watcher.want("bus")

        self.push_screen(Confirm(f"Archive @{target.address}? y/n"), archive)

    def action_kill(self, force: bool) -> None:
        target = self.highlighted_agent()
        if target is None:
            self.notify("highlight an agent in the sidebar first", severity="warning")
            return
        question = (
            f"Force-kill @{target.address}, even in the middle of a turn (SIGKILL)? y/n"
            if force
            else f"Kill @{target.address}? y/n"
        )

        def kill(yes: bool | None) -> None:
            if yes:
                self._kill(target, force)

        self.push_screen(Confirm(question), kill)

    def action_attach(self) -> None:
        """`o`: the highlighted agent's live session in this terminal, read-write, as
        `legion attach` does. Outside Legion's tmux server the TUI steps aside until the
        human detaches (C-b d); inside it, the tmux client switches to the agent's window and
        the TUI runs on in its own."""
        target = self.highlighted_agent()
        if target is None:
            self.notify("highlight an agent in the sidebar first", severity="warning")
            return
        found = self.sources.attach(target, os.environ)
        if isinstance(found, Unavailable):
            self.notify(found.reason, severity="error")
            return
        try:
            if found.switched:
                self._run_tmux(found)
            else:
                with self.suspend():
                    self._run_tmux(found)
        except SuspendNotSupported:
            self.notify(
                f"this terminal cannot hand over: run `legion attach {target.address}`",
                severity="error",
            )
            return
        self.refresh()

    def _run_tmux(self, attach: Attach) -> None:
        done = subprocess.run(attach.argv, env=attach.env, check=False)
        if done.returncode != 0:
            self.notify(f"tmux could not attach (exit {done.returncode})", severity="error")

    def action_help(self) -> None:
        if not isinstance(self.screen, Help):
            self.push_screen(Help())

    @work(thread=True, group="kill")
    def _kill(self, target: Agent, force: bool) -> None:
        # Closing a window waits for its process: off the app's thread, with its own bus.
        bus = self.open_bus()
        try:
            killed = actions.kill(
                bus,
                self.human,
                target,
                force=force,
                stop=lambda agent: self.sources.stop(agent, force=force),
            )
        except LegionError as exc:
            hint = " (K kills it anyway)" if "busy" in str(exc) and not force else ""
            self.call_from_thread(self.notify, f"{exc}{hint}", severity="error")
            return
        finally:
            bus.close()
        self.call_from_thread(self.notify, f"killed @{killed.address}")

    # -- the slow views -----------------------------------------------------------------------

    def _view(self) -> str:
        return self.query_one(TabbedContent).active

    def action_view(self, view: str) -> None:
        tabs = self.query_one(TabbedContent)
        if tabs.active == view:  # shown already (no TabActivated): its line takes the focus
            self._focus_view()
            return
        # Focus leaves the pane first: Textual moves the focus of a widget being hidden to a
        # sibling, whose pane would then take the screen back.
        self.screen.set_focus(None)
        tabs.active = view

    @on(TabbedContent.TabActivated)
    def _view_shown(self, event: TabbedContent.TabActivated) -> None:
        self.watcher.show(view=self._view())
        if self._view() == "inbox":
            self.watcher.want("bus")
        self._focus_view()

    def _focus_view(self) -> None:
        focus = {
            "chat": "#chat-input",
            "inbox": "#answer-input",
            "board": "#board-scroll",
            "peek": "#peek-scroll",
            "log": "#log-table",
        }.get(self._view())
        if focus is not None:
            self.query_one(focus).focus()

    def action_refresh_view(self) -> None:
        """Ctrl+R: the shown view read again now (in the inbox, the trackers too)."""
        if self._view() == "inbox":
            self.watcher.want("bus")
            self.watcher.want("trackers")
        else:
            self.watcher.want("views")

    def action_focus_sidebar(self) -> None:
        self.query_one(Sidebar).focus()

    @on(BoardChanged)
    @while_open
    def _board_changed(self, event: BoardChanged) -> None:
        board = event.board
        title = self.query_one("#board-title", Static)
        lines = self.query_one("#board-lines", Static)
        if isinstance(board, Unavailable):
            self.board = None
            title.update(shown(board.reason))
            lines.update("")
            return
        # The highlight stays on its issue, wherever the issue moved.
        current = self._board_issue()
        ids = [issue.identifier for issue in board.issues]
        if current is not None and current.identifier in ids:
            self.board_cursor = ids.index(current.identifier)
        self.board = board
        self.board_cursor = max(0, min(self.board_cursor, len(board.issues) - 1))
        self._render_board()

    def _render_board(self) -> None:
        board = self.board
        if board is None:
            return
        issues = board.issues
        counts = f"{len(issues)} issue{'' if len(issues) == 1 else 's'}"
        current = self._board_issue()
        hint = [dispatch_hint(current)] if current is not None else []
        title = self.query_one("#board-title", Static)
        title.update(shown("\n".join([f"{board.project}: {counts}", *hint, *board.warnings])))
        cursor = self.board_cursor if issues else None
        self.query_one("#board-lines", Static).update(board_text(issues, cursor))
        self.call_after_refresh(self._board_cursor_in_view)

    @while_open
    def _board_cursor_in_view(self) -> None:
        if self.board is None or not self.board.issues:
            return
        line = board_line_issues(self.board.issues).index(self.board_cursor)
        if line == 1:
            line = 0  # the first issue: its phase's heading in view too
        scroll = self.query_one(BoardScroll)
        height = scroll.scrollable_content_region.height
        if line < scroll.scroll_y:
            scroll.scroll_to(y=line, animate=False)
        elif height and line >= scroll.scroll_y + height:
            scroll.scroll_to(y=line - height + 1, animate=False)

    def _board_issue(self) -> BoardIssue | None:
        if self.board is None or not self.board.issues:
            return None
        return self.board.issues[min(self.board_cursor, len(self.board.issues) - 1)]

    def action_board_move(self, delta: int) -> None:
        if self.board is None or not self.board.issues:
            return
        moved = max(0, min(self.board_cursor + delta, len(self.board.issues) - 1))
        if moved != self.board_cursor:
            self.board_cursor = moved
            self._render_board()

    @on(BoardLines.Picked)
    def _board_clicked(self, event: BoardLines.Picked) -> None:
        self.query_one(BoardScroll).focus()
        if self.board is None:
            return
        lines = board_line_issues(self.board.issues)
        index = lines[event.line] if 0 <= event.line < len(lines) else None
        if index is not None:
            self.board_cursor = index
            self._render_board()

    def action_dispatch(self) -> None:
        """`d` on the board: start the worker the decision table suggests for the highlighted
        issue, as `legion dispatch ISSUE MODE` does."""
        issue = self._board_issue()
        if self.board is None or issue is None:
            self.notify("no issue highlighted on the board", severity="warning")
            return
        choice = dispatch_choice(issue)
        if isinstance(choice, str):
            self.notify(choice, severity="warning", markup=False)
            return
        if choice.identifier in self._dispatching:
            self.notify(f"dispatching {choice.identifier} already", severity="warning")
            return
        self._dispatching.add(choice.identifier)
        self.notify(f"dispatching {choice.mode.value} for {choice.identifier}")
        self._dispatch(self.board.project, choice)

    @work(thread=True, group="dispatch")
    def _dispatch(self, project: str, choice: DispatchChoice) -> None:
        # Starting a session waits for it to begin: off the app's thread.
        try:
            said = self.sources.dispatch(project, choice.identifier, choice.mode)
        except LegionError as exc:
            self.call_from_thread(self._dispatched, choice, one_line(str(exc)), False)
            return
        self.call_from_thread(self._dispatched, choice, said, True)

    @while_open
    def _dispatched(self, choice: DispatchChoice, said: str, started: bool) -> None:
        self._dispatching.discard(choice.identifier)
        self.notify(said, severity="information" if started else "error", markup=False)
        self.watcher.want("views")

    @on(PeekChanged)
    @while_open
    def _peek_changed(self, event: PeekChanged) -> None:
        peek = event.peek
        title = self.query_one("#peek-title", Static)
        screen = self.query_one("#peek-screen", Static)
        if isinstance(peek, Unavailable):
            title.update(shown(peek.reason))
            screen.update("")
            return
        head = f"@{peek.agent} ({peek.state})\nin tmux window {peek.window}"
        title.update(shown(f"{head}\n{peek.tasks}" if peek.tasks else head))
        said = "\n".join(peek.transcript) or "(nothing yet)"
        screen.update(
            Text.assemble(
                # The agent's own terminal, captured without escape sequences; what is left
                # that a terminal acts on (a bidi override) is escaped like any outside text.
                shown(peek.screen or "(blank screen)"),
                ("\n\n-- transcript --\n", "bold"),
                shown(said),
            )
        )

    @on(LogChanged)
    @while_open
    def _log_changed(self, event: LogChanged) -> None:
        log = event.log
        title = self.query_one("#log-title", Static)
        table = self.query_one("#log-table", DataTable)
        table.clear()
        if isinstance(log, Unavailable):
            title.update(shown(log.reason))
            return
        title.update(shown(f"{log.project}: the last actions and agents' events"))
        for line in log.lines:
            table.add_row(
                self.format_time(line.at),
                *(shown(cell) for cell in (line.about, line.what, line.outcome, line.detail)),
            )
        table.move_cursor(row=max(0, table.row_count - 1))

    # -- errors -------------------------------------------------------------------------------

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A notification: it quotes outside text (an error from a tracker, an address, an
        identifier), so it is escaped and never read as markup."""
        super().notify(
            for_display(message),
            title=for_display(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def _attempt(self, call: Callable[[], T]) -> T | None:
        """`call()`, or None after showing its error in one line (bad input, a locked bus)."""
        try:
            return call()
        except LegionError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return None
        except NoMatches:
            return None  # the app is closing: its widgets are gone


def _inbox_key(item: InboxItem) -> str:
    return item.key if isinstance(item, TrackerAsk) else item.id
