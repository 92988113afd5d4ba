"""`legion tui`: the control centre for every project and branch on the machine.

Everything on screen is read from the bus and the projects' own read models (see
`legion.tui.sources`); the TUI keeps no state of its own but how far the human has read each
channel (`legion.tui.readmarks`, written by `legion.tui.reading`). It owns no process:
closing it stops nothing.

The app composes the views (`sidebar`, `chat`, `inbox`, `board`, `peek`, `log`, the
`modals`, in the `views` tabs), opens channels (`legion.tui.channels` counts what is unread
in each) and routes what the watcher (`legion.tui.watcher`) posts to the views it changes.
Nothing here polls: the watcher reads the bus, the shown view's read model and the trackers'
questions in worker threads and posts what changed as typed messages. What the human does
goes through `legion.tui.posting` (say, reply), `legion.tui.agent_actions` (the sidebar's
keys) and the views' own keys, all on `legion.bus.actions` and the commands
(`legion.tui.commands`: the CLI's own service functions); the watcher is then told to look
again (`want`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.events import Resize
from textual.notifications import SeverityLevel
from textual.widgets import Footer, Input, OptionList, TabbedContent

from legion.bus import Bus, actions
from legion.bus.model import Agent, Channel, Message
from legion.core.text import for_display
from legion.tui.agent_actions import AgentActions
from legion.tui.attempt import attempt
from legion.tui.board import BoardView
from legion.tui.channels import Channels
from legion.tui.chat import HISTORY, ChatView, MessageLog
from legion.tui.closing import while_open
from legion.tui.commands import Commands
from legion.tui.inbox import InboxView
from legion.tui.log import LogView
from legion.tui.modals import Help
from legion.tui.peek import PeekView
from legion.tui.posting import Posting
from legion.tui.present import (
    AgentRow,
    ArchivedChannelRow,
    ArchivedHeader,
    ChannelRow,
    channels_of,
    clock_time,
)
from legion.tui.reading import Reads, unread_counts
from legion.tui.readmarks import ReadMarks
from legion.tui.sidebar import Sidebar
from legion.tui.sources import Sources
from legion.tui.views import Views
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
    MessagesArrived,
    PeekChanged,
    Synced,
    SyncWaits,
    Watcher,
    file_signal,
)

DISCOVERY = 1000  # recent messages read at start to find channels with no agent left
SETTLE_TIMEOUT_S = 10.0


class LegionApp(App[int]):
    """The TUI. What it reads outside the bus (`sources`) and what it does outside the bus
    (`commands`) are arguments, so tests drive it with `run_test()`.

    `open_bus` opens a connection to the bus: one for the app's own thread, and one for each
    worker thread that needs the bus (SQLite connections are not shared between threads).
    `channel`: the channel to open first (default: the first listed). `format_time` turns a
    message's `created_at` into what is shown (tests fix it for stable screenshots).
    `bus_file`: the bus's SQLite file, whose changes tell the watcher when to read (without
    it, the watcher reads every `poll_s`)."""

    TITLE = "Legion"
    # The layout, and what every view shares; each view's own is in its module.
    CSS = """
    #body { height: 1fr; }
    Sidebar { width: 26; height: 1fr; }
    #views { width: 1fr; height: 1fr; }
    .view-title { height: auto; max-height: 4; padding: 0 1; }
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
        commands: Commands,
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
        self.commands = commands
        self.bus = open_bus()
        self.human = self.bus.human()
        self.format_time = format_time
        self.history = history
        recent = self.bus.messages(last=DISCOVERY)
        cursor = recent[-1].seq if recent else 0
        self.marks = marks if marks is not None else ReadMarks(None, cursor)
        self.agents: list[Agent] = self.bus.agents(include_archived=True)
        listed = channels_of(self.agents, recent) | ({channel} if channel is not None else set())
        self.channels = Channels(
            listed, unread_counts(self.bus, self.marks, listed), self.marks, channel
        )
        self.reads = Reads(self, self.bus, self.human, self.channels, self.marks)
        # The bus's questions for the human at start (the inbox view keeps them after).
        self.inbox = actions.human_inbox(self.bus)
        self.inbox_ids = {m.id for m in self.inbox}
        self.watcher = Watcher(
            self,
            open_bus,
            sources,
            BusState(cursor, tuple(self.agents), (), tuple(self.inbox_ids)),
            signal=file_signal(bus_file) if bus_file is not None else None,
            poll_s=poll_s,
            tracker_s=tracker_s,
        )
        self.agent_actions = AgentActions(
            self, self.bus, self.human, open_bus, commands, lambda: self.watcher.want("bus")
        )
        self.posting = Posting(
            self, self.bus, self.human, open_bus, commands, lambda: self.watcher.want("bus")
        )
        self._syncs = SyncWaits()
        self._first_view_shown = False  # the tabs show their first view as they mount

    # -- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            yield Sidebar(self.agent_actions, id="sidebar")
            with Views(id="views", initial="chat"):
                yield ChatView(
                    "F2 Chat",
                    self._read_channel,
                    self.format_time,
                    lambda message: message.id in self.inbox_ids,
                    history=self.history,
                    id="chat",
                )
                yield InboxView(
                    "F3 Inbox",
                    self.commands,
                    self.posting.reply,
                    self.format_time,
                    self.inbox,
                    id="inbox",
                )
                yield BoardView("F4 Board", self.commands, id="board")
                yield PeekView("F5 Peek", id="peek")
                yield LogView("F6 Log", self.format_time, id="log")
        yield Footer()

    def on_mount(self) -> None:
        self._refresh_sidebar()
        first = self.channels.selected or next(
            (row.channel for row in self.query_one(Sidebar).rows if isinstance(row, ChannelRow)),
            None,
        )
        if first is not None:
            self.open_channel(first)
        else:
            self.query_one(ChatView).show_channel(None, self.agents)
        self._read_counts()
        self._refresh_sidebar()  # with the counts: the first screen is already right
        for loop in LOOPS:
            self.run_worker(
                functools.partial(self.watcher.run, loop),
                name=f"watch {loop}",
                group="watcher",
                thread=True,
            )
        # The sidebar first: single keys act at once (`?` the help, `a`, `k`, `o`), and
        # Enter on the open channel (or F2, or a click) goes to its chat line.
        self.query_one(Sidebar).focus()

    def on_resize(self, event: Resize) -> None:
        # A wide terminal gives the sidebar room for long branch names.
        self.query_one(Sidebar).styles.width = 26 if event.size.width < 120 else 36

    def on_unmount(self) -> None:
        self.watcher.stop()
        self.reads.save()
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
            synced = self._syncs.waiting(loop, self.watcher.sync(loop))
            await asyncio.wait_for(synced, SETTLE_TIMEOUT_S)

    @on(Synced)
    def _loop_synced(self, event: Synced) -> None:
        self._syncs.synced(event)

    # -- the channels -------------------------------------------------------------------------

    def _read_channel(self, channel: Channel, last: int) -> list[Message]:
        return self.bus.messages(channel=channel, last=last)

    def _refresh_sidebar(self) -> None:
        rows = self.channels.rows(self.agents)
        self.query_one(Sidebar).show(rows, self.channels.selected)

    @on(OptionList.OptionSelected, "#sidebar")
    def _sidebar_selected(self, event: OptionList.OptionSelected) -> None:
        row = self.query_one(Sidebar).row(event.option.id)
        if isinstance(row, ArchivedHeader):
            self.channels.archived_expanded = not row.expanded
            self._refresh_sidebar()
        elif isinstance(row, ChannelRow) and row.channel == self.selected:
            self.action_view("chat")  # open already: Enter goes to its chat line
        elif isinstance(row, ChannelRow | ArchivedChannelRow):
            self.open_channel(row.channel)
        elif isinstance(row, AgentRow):
            self.watcher.show(agent=row.agent)
            self.open_channel(row.agent.channel)

    @on(OptionList.OptionHighlighted, "#sidebar")
    @while_open
    def _sidebar_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        row = self.query_one(Sidebar).row(event.option.id)
        if isinstance(row, AgentRow):
            self.watcher.show(agent=row.agent)

    def open_channel(self, channel: Channel) -> None:
        """Show `channel`'s newest messages; it is then read up to the newest."""
        self.channels.selected = channel
        self.watcher.show(project=channel.project)
        self.reads.seen(self.query_one(ChatView).open(channel, self.agents))
        self._refresh_sidebar()
        self.query_one(Sidebar).highlight(channel)

    @property
    def selected(self) -> Channel | None:
        """The channel open in the chat."""
        return self.channels.selected

    # -- what the watcher posts ---------------------------------------------------------------

    @on(MessagesArrived)
    @while_open
    def _messages_arrived(self, event: MessagesArrived) -> None:
        here = self.channels.arrived(event.messages)
        if here:
            self.query_one(MessageLog).append(here)
            self.reads.seen(here)
        self._refresh_sidebar()

    @on(AgentsChanged)
    @while_open
    def _agents_changed(self, event: AgentsChanged) -> None:
        self.agents = event.agents
        self.channels.add(channels_of(event.agents, ()))
        if self.selected is not None:
            self.query_one(ChatView).show_channel(self.selected, self.agents)
        self._refresh_sidebar()

    @on(InboxChanged)
    @while_open
    def _inbox_changed(self, event: InboxChanged) -> None:
        self._counted(event.unread, event.questions)
        self._refresh_sidebar()

    def _read_counts(self) -> None:
        """What is addressed to the human and unread, and the inbox, read now (the first
        screen; later the watcher posts them)."""
        unread = attempt(self, lambda: self.bus.messages(unread_for=self.human.id, last=1000))
        inbox = attempt(self, lambda: actions.human_inbox(self.bus))
        self._counted(unread, inbox)

    def _counted(self, unread: Sequence[Message] | None, inbox: list[Message] | None) -> None:
        """What is addressed to the human and unread, by channel; and the inbox."""
        if unread is not None:
            self.reads.waiting(unread)
        if inbox is not None:
            self.inbox_ids = {m.id for m in inbox}
            self.query_one(InboxView).show_questions(inbox)

    @on(AsksRead)
    @while_open
    def _asks_read(self, event: AsksRead) -> None:
        self.query_one(InboxView).asks_read(event.found, event.began)

    @on(BoardChanged)
    @while_open
    def _board_changed(self, event: BoardChanged) -> None:
        self.query_one(BoardView).show(event.board)

    @on(PeekChanged)
    @while_open
    def _peek_changed(self, event: PeekChanged) -> None:
        self.query_one(PeekView).show(event.peek)

    @on(LogChanged)
    @while_open
    def _log_changed(self, event: LogChanged) -> None:
        self.query_one(LogView).show(event.log)

    @on(BoardView.Dispatched)
    def _dispatched(self) -> None:
        self.watcher.want("views")

    # -- what the human says --------------------------------------------------------------------

    @on(Input.Submitted, "#chat-input")
    def _send(self, event: Input.Submitted) -> None:
        if self.posting.say(self.selected, event.value):
            event.input.value = ""

    # -- the sidebar's keys -----------------------------------------------------------------------

    def action_help(self) -> None:
        if not isinstance(self.screen, Help):
            self.push_screen(Help())

    # -- the views ------------------------------------------------------------------------------

    def _view(self) -> str:
        return self.query_one(Views).active

    def action_view(self, view: str) -> None:
        self.query_one(Views).show(view)

    @on(TabbedContent.TabActivated)
    def _view_shown(self, event: TabbedContent.TabActivated) -> None:
        self.watcher.show(view=self._view())
        if self._view() == "inbox":
            self.watcher.want("bus")
        if self._first_view_shown or self._view() != "chat":
            self.query_one(Views).focus_shown()
        # The first is the tabs' own, as they mount: the focus stays in the sidebar.
        self._first_view_shown = True

    def action_refresh_view(self) -> None:
        """Ctrl+R: the shown view read again now (in the inbox, the trackers too)."""
        if self._view() == "inbox":
            self.watcher.want("bus")
            self.watcher.want("trackers")
        else:
            self.watcher.want("views")

    def action_focus_sidebar(self) -> None:
        self.query_one(Sidebar).focus()

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
