"""The TUI driven by Textual's pilot on a real bus in a temporary folder: what the human does
(pick a channel, post, answer, archive, kill) lands on the bus, and what others post shows."""

from __future__ import annotations

import asyncio
import io
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import DataTable, Input

from legion.bus import Bus, actions
from legion.bus.model import (
    Agent,
    AgentRole,
    AgentStatus,
    Channel,
    DeliveryState,
    MessageKind,
    Posted,
)
from legion.bus.stored import SqliteBus
from legion.core.decide import Action
from legion.core.model import Mode, Status
from legion.errors import ConflictError
from legion.runtime.tmux import Attach
from legion.services.agent_control import Killed, kill_with
from legion.services.messaging import HandOver
from legion.tui.app import LegionApp
from legion.tui.chat import ChatInput, MessageLog
from legion.tui.present import KEYS, AgentRow, ArchivedHeader, ChannelRow, Row
from legion.tui.readmarks import ReadMarks
from legion.tui.sidebar import Sidebar
from legion.tui.sources import (
    ActionLogView,
    Board,
    BoardIssue,
    LogLine,
    Peek,
    TrackerAsk,
    TrackerInbox,
    Unavailable,
)

MAIN = Channel("app", "main")
LEG7 = Channel("app", "legion/LEG-7")
OTHER = Channel("web", "main")
FIXED_TIME = "12:00"


@dataclass
class FakeSources:
    """The views outside the bus and the commands, as a test sets them (both `Sources` and
    `Commands`); records what the app asked for. A kill applies the bus's own rules
    (`actions.kill`), with a recorded stand-in for closing the session."""

    board_view: Board | Unavailable = field(default_factory=lambda: Unavailable("no project"))
    peek_view: Peek | Unavailable = field(default_factory=lambda: Unavailable("no tmux here"))
    stopped: list[str] = field(default_factory=list)
    woken: list[str] = field(default_factory=list)  # the projects of the posts handed over
    boards_for: list[str | None] = field(default_factory=list)
    inbox_view: TrackerInbox = field(default_factory=lambda: TrackerInbox((), ()))
    inbox_reads: int = 0
    answered: list[tuple[str, str, str]] = field(default_factory=list)
    dispatched: list[tuple[str, str, Mode]] = field(default_factory=list)
    refuse: str | None = None  # what giving feedback or dispatching raises
    log_view: ActionLogView | Unavailable = field(
        default_factory=lambda: Unavailable("no project here")
    )
    attach_with: Attach | Unavailable = field(
        default_factory=lambda: Unavailable("not running: no live session to attach to")
    )
    attached: list[str] = field(default_factory=list)

    def board(self, project: str | None) -> Board | Unavailable:
        self.boards_for.append(project)
        return self.board_view

    def peek(self, agent: Agent, lines: int) -> Peek | Unavailable:
        return self.peek_view

    def action_log(self, project: str | None, limit: int) -> ActionLogView | Unavailable:
        return self.log_view

    def attach(self, bus: Bus, target: Agent, environ: Mapping[str, str]) -> Attach:
        self.attached.append(target.address)
        if isinstance(self.attach_with, Unavailable):
            raise ConflictError(self.attach_with.reason)
        return self.attach_with

    def kill(self, bus: Bus, target: Agent, *, force: bool) -> Killed:
        return kill_with(bus, bus.human(), target, force=force, stop=self._stop)

    def _stop(self, agent: Agent) -> bool:
        if agent.session_id is None:
            return False  # as `legion kill`'s: no session, nothing to stop
        self.stopped.append(agent.address)
        return True

    def hand_over(self, bus: Bus, posted: Posted) -> Mapping[str, str]:
        self.woken.append(posted.message.channel.project)
        # As `messaging.hand_over` says it when no daemon runs: a busy agent takes it at
        # the end of its turn, any other is delivered to now.
        return {
            agent.address: HandOver.AT_TURN_END
            if agent.status is AgentStatus.BUSY
            else HandOver.DELIVERED
            for agent in posted.recipients
        }

    def tracker_questions(self) -> TrackerInbox:
        self.inbox_reads += 1
        return self.inbox_view

    def give_feedback(
        self, project: str, issue: str, text: str, *, author: str | None = None
    ) -> str:
        if self.refuse is not None:
            raise ConflictError(self.refuse)
        self.answered.append((project, issue, text))
        self.inbox_view = TrackerInbox(
            tuple(q for q in self.inbox_view.questions if q.identifier != issue),
            self.inbox_view.troubles,
        )
        return issue

    def dispatch(self, project: str, issue: str, mode: Mode) -> str:
        if self.refuse is not None:
            raise ConflictError(self.refuse)
        self.dispatched.append((project, issue, mode))
        return f"{issue}: {mode.value} worker started"


class RecordingApp(LegionApp):
    """The app, keeping every notification it showed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.said: list[str] = []

    def notify(self, message: str, **kwargs: Any) -> None:  # type: ignore[override]
        self.said.append(message)
        super().notify(message, **kwargs)


@dataclass
class World:
    """A bus with two projects: app (an orchestrator on main, two workers on LEG-7) and web."""

    path: Path
    bus: SqliteBus
    legion: Agent
    implement: Agent
    review: Agent
    web: Agent
    sources: FakeSources

    def app(self, **kwargs: Any) -> RecordingApp:
        kwargs.setdefault("format_time", lambda _: FIXED_TIME)
        kwargs.setdefault("bus_file", self.path)
        return RecordingApp(lambda: SqliteBus(self.path), self.sources, self.sources, **kwargs)

    def agent(self, agent: Agent) -> Agent:
        return self.bus.agent(agent.id)


def register(bus: SqliteBus, channel: Channel, name: str, role: AgentRole) -> Agent:
    return bus.register_agent(
        channel, name, role=role, runtime="claude-code", session_id=f"s-{channel}-{name}"
    )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    path = tmp_path / "bus.db"
    bus = SqliteBus(path)
    legion = register(bus, MAIN, "legion", AgentRole.CONTROLLER)
    implement = register(bus, LEG7, "implement", AgentRole.IMPLEMENT)
    review = register(bus, LEG7, "review", AgentRole.REVIEW)
    web = register(bus, OTHER, "implement", AgentRole.IMPLEMENT)
    bus.update_agent(review.id, status=AgentStatus.IDLE)
    bus.post(legion.id, MAIN, "Spawning the implementer for LEG-7")
    bus.post(implement.id, LEG7, "Working on the parser, @legion")
    yield World(path, bus, legion, implement, review, web, FakeSources())
    bus.close()


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())  # type: ignore[arg-type]


async def settle(pilot: Pilot[Any]) -> None:
    """Until the app has handled everything there was to read and what the human started is
    done (`LegionApp.settled`), then until it is idle (the screen redrawn)."""
    assert isinstance(pilot.app, LegionApp)
    await pilot.app.settled()
    await pilot.pause()


async def until(pilot: Pilot[Any], shown: Callable[[], bool]) -> bool:
    """Settle until `shown()` (a modal opens, a notification comes); False if it never is,
    after 30 s."""
    deadline = time.monotonic() + 30
    while not shown():
        if time.monotonic() > deadline:
            return False
        await settle(pilot)
    return True


async def until_shown(pilot: Pilot[Any], app: LegionApp, *texts: str) -> str:
    """The screen once it shows every one of `texts`; fails after 5 s with the screen as it
    is."""
    if not await until(pilot, lambda: all(t in screen_text(app) for t in texts)):
        raise AssertionError(f"not shown: {texts}\n{screen_text(app)}")
    return screen_text(app)


async def until_said(pilot: Pilot[Any], app: RecordingApp, wanted: str) -> None:
    """Until a notification holds `wanted` (a worker thread acts); fails after 5 s."""
    if not await until(pilot, lambda: any(wanted in said for said in app.said)):
        raise AssertionError(f"never said {wanted!r}: {app.said}")


def screen_text(app: LegionApp) -> str:
    """The screen as plain text, as a terminal would show it."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        record=True,
        force_terminal=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


def rows(app: LegionApp) -> list[Row]:
    """The sidebar's rows."""
    return app.query_one(Sidebar).rows


def sidebar_index(app: LegionApp, key: str) -> int:
    return [row.key for row in rows(app)].index(key)


async def choose(pilot: Pilot[Any], app: LegionApp, key: str) -> None:
    """Pick a sidebar row by keyboard: focus the sidebar, move to the row, Enter."""
    sidebar = app.query_one(Sidebar)
    sidebar.focus()
    sidebar.highlighted = sidebar_index(app, key)
    await pilot.press("enter")
    await pilot.pause()


# -- the sidebar and the stream --------------------------------------------------------------------


def test_the_sidebar_lists_channels_with_their_agents_and_glyphs(world: World) -> None:
    async def scenario() -> None:
        app = world.app()
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            kinds = [type(row).__name__ for row in rows(app)]
            assert kinds == [
                "ChannelRow",  # app/main first: the orchestrator's branch
                "AgentRow",
                "ChannelRow",  # app/legion/LEG-7
                "AgentRow",
                "AgentRow",
                "ChannelRow",  # web/main
                "AgentRow",
            ]
            text = screen_text(app)
            assert "app/main" in text and "* @legion" in text
            assert "* @implement" in text and "- @review" in text  # busy, idle

    run(scenario)


def test_choosing_a_channel_shows_its_messages(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=MAIN)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            assert "Spawning the implementer" in screen_text(app)
            await choose(pilot, app, f"c:{LEG7}")
            assert app.selected == LEG7
            text = screen_text(app)
            assert "@implement Working on the parser, @legion" in text
            assert "Spawning the implementer" not in text

    run(scenario)


def test_a_click_on_a_channel_opens_it(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=MAIN)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            row = sidebar_index(app, f"c:{LEG7}")
            await pilot.click(Sidebar, offset=(4, 1 + row))  # 1: the sidebar's top border
            await pilot.pause()
            assert app.selected == LEG7

    run(scenario)


def test_a_message_with_a_mention_is_posted_and_delivered_to_the_agent(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=MAIN)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await choose(pilot, app, f"c:{LEG7}")
            chat = app.query_one(ChatInput)
            chat.focus()
            chat.value = "@implement use UTC everywhere"
            await pilot.press("enter")
            await settle(pilot)
            assert chat.value == ""  # sent
            assert "@human @implement use UTC everywhere" in screen_text(app)
            assert world.sources.woken == ["app"]  # the daemon is told at once
        posted = world.bus.messages(channel=LEG7, last=1)[0]
        assert (posted.sender, posted.body) == ("human", "@implement use UTC everywhere")
        deliveries = world.bus.deliveries(posted.id)
        assert [(d.recipient_id, d.state) for d in deliveries] == [
            (world.implement.id, DeliveryState.PENDING)
        ]

    run(scenario)


def test_a_posted_message_says_whom_it_woke_and_what_became_of_it(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("enter", *"@review @implement look", "enter")
            await until_said(pilot, app, "wakes @review, @implement")
            assert app.said[-1].splitlines() == [
                "wakes @review, @implement",  # as `legion say` says it
                "delivered to @review",
                "@implement is busy: its session gets the message at the end of its turn",
            ]
            await pilot.press(*"thanks all", "enter")
            await until_said(pilot, app, "wakes nobody")

    run(scenario)


def test_an_unknown_mention_is_one_line_in_the_app_and_nothing_is_posted(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            before = world.bus.messages()
            await pilot.press("enter")  # on the open channel in the sidebar: its chat line
            chat = app.query_one(ChatInput)
            assert app.focused is chat
            chat.value = "@nobody are you there?"
            await pilot.press("enter")
            await settle(pilot)
            assert len(app.said) == 1 and "nobody" in app.said[0]
            assert "\n" not in app.said[0]
            assert chat.value == "@nobody are you there?"  # kept, to be corrected
            chat.value = "   "
            await pilot.press("enter")
            await settle(pilot)
            assert app.said[-1] == "the message is empty"
            assert world.bus.messages() == before

    run(scenario)


def test_tab_completes_a_mention_from_the_channels_agents(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            chat = app.query_one(ChatInput)
            chat.focus()
            await pilot.press("@", "i", "m")
            await settle(pilot)
            await pilot.press("tab")
            assert chat.value == "@implement "
            assert app.focused is chat

    run(scenario)


def test_a_message_posted_elsewhere_shows_live(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            world.bus.post(world.review.id, LEG7, "Done: @implement fix it")
            world.bus.post(world.legion.id, LEG7, "Which zone? @human", kind=MessageKind.ASK)
            await settle(pilot)
            text = screen_text(app)
            assert "@review Done: @implement fix it" in text
            assert "@main/legion [ask] Which zone? @human" in text
            assert app.query_one(MessageLog).shown[-1].body == "Which zone? @human"

    run(scenario)


def test_unread_counts_rise_in_other_channels_and_reset_when_read(
    world: World, tmp_path: Path
) -> None:
    marks_file = tmp_path / "state" / "tui.json"

    async def scenario() -> None:
        marks = ReadMarks.load(marks_file, world.bus.messages(last=1)[-1].seq)
        app = world.app(channel=MAIN, marks=marks)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            world.bus.post(world.implement.id, LEG7, "one")
            world.bus.post(world.legion.id, LEG7, "two @human")
            await settle(pilot)
            row = next(r for r in rows(app) if isinstance(r, ChannelRow) and r.channel == LEG7)
            assert (row.unread, row.for_you) == (2, 1)
            assert "app/legion/LEG-7 2 @1" in screen_text(app)
            await choose(pilot, app, f"c:{LEG7}")
            await settle(pilot)
            row = next(r for r in rows(app) if isinstance(r, ChannelRow) and r.channel == LEG7)
            assert (row.unread, row.for_you) == (0, 0)
        # The human's delivery is read, and the marks are saved for next time.
        assert world.bus.messages(unread_for=world.bus.human().id) == []
        again = ReadMarks.load(marks_file, 0)
        assert again.last_seen(LEG7) == world.bus.messages(channel=LEG7, last=1)[0].seq

    run(scenario)


def test_scrolling_above_the_first_message_loads_older_ones(world: World) -> None:
    for n in range(120):
        world.bus.post(world.implement.id, LEG7, f"step {n}")

    async def scenario() -> None:
        app = world.app(channel=LEG7, history=50)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            log = app.query_one(MessageLog)
            assert [m.body for m in log.shown][-1] == "step 119"
            assert len(log.shown) == 50 and not log.complete
            log.focus()
            await pilot.press("home")
            await pilot.press("up")
            await pilot.pause()
            assert len(log.shown) == 100
            await pilot.press("home", "up", "home", "up")
            await pilot.pause()
            assert log.complete and log.shown[0].body == "Working on the parser, @legion"
            assert [m.seq for m in log.shown] == sorted({m.seq for m in log.shown})

    run(scenario)


# -- the inbox -------------------------------------------------------------------------------------


def test_an_inbox_question_is_answered_in_place(world: World) -> None:
    question = actions.ask(world.bus, world.legion, "UTC or local time?").message

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("f3")
            await settle(pilot)
            table = app.query_one("#inbox-table", DataTable)
            assert table.row_count == 1
            assert "UTC or local time?" in screen_text(app)
            assert app.focused is not None and app.focused.id == "answer-input"
            await pilot.press(*"UTC")
            await pilot.press("enter")
            await settle(pilot)
            assert table.row_count == 0
            assert "No open questions for you." in screen_text(app)
        answers = world.bus.replies(question.id)
        assert [(a.kind, a.sender, a.body) for a in answers] == [
            (MessageKind.ANSWER, "human", "UTC")
        ]
        assert actions.human_inbox(world.bus) == []

    run(scenario)


def test_tracker_questions_join_the_inbox_oldest_first_and_are_answered_in_place(
    world: World,
) -> None:
    question = actions.ask(world.bus, world.legion, "UTC or local time?").message
    world.sources.inbox_view = TrackerInbox(
        (
            TrackerAsk("app", "LEG-7", "Add the parser", "## Question\nWhich grammar?", ""),
            TrackerAsk("web", "WEB-2", "Restyle", "Which CSS framework?", "2999-01-01T00:00:00Z"),
        ),
        ("project ghost cannot be opened: not a Legion project",),
    )

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("f3")
            text = await until_shown(pilot, app, "WEB-2", "project ghost cannot be opened")
            assert "F3 Inbox 3" in text
            table = app.query_one("#inbox-table", DataTable)
            # Cells are rich Text (outside text is never read as markup): compared as text.
            rows = [[str(c) for c in table.get_row_at(n)[1:3]] for n in range(table.row_count)]
            # Oldest first: the tracker question with no time, the bus's, the newest last.
            assert rows == [["app", "LEG-7"], [str(MAIN), "@legion"], ["web", "WEB-2"]]
            # The highlight stayed on the question it was on; the oldest is one up.
            assert table.cursor_row == 1
            await pilot.press("shift+tab", "up", "tab")
            text = await until_shown(pilot, app, "app LEG-7 Add the parser asks:")
            lines = text.splitlines()
            asks = next(n for n, line in enumerate(lines) if "Add the parser asks:" in line)
            assert "Which grammar?" in lines[asks + 1]  # rendered, its heading gone
            assert app.focused is not None and app.focused.id == "answer-input"
            await pilot.press(*"LALR")
            await pilot.press("enter")
            await until_said(pilot, app, "answered app LEG-7")
            assert world.sources.answered == [("app", "LEG-7", "LALR")]
            await until_shown(pilot, app, "F3 Inbox 2")
            assert [str(table.get_row_at(n)[2]) for n in range(table.row_count)] == [
                "@legion",
                "WEB-2",
            ]
            # The bus's question is still answered on the bus.
            await pilot.press(*"UTC", "enter")
            await until_shown(pilot, app, "F3 Inbox 1")
        assert [a.body for a in world.bus.replies(question.id)] == ["UTC"]

    run(scenario)


def test_a_refused_tracker_answer_is_one_line_and_the_text_stays(world: World) -> None:
    world.sources.inbox_view = TrackerInbox(
        (TrackerAsk("app", "LEG-7", "Parser", "Which grammar?", ""),), ()
    )
    world.sources.refuse = "LEG-7 is not waiting for an answer"

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("f3")
            await until_shown(pilot, app, "LEG-7")
            await pilot.press(*"LALR", "enter")
            await until_said(pilot, app, "not waiting")
            assert app.said[-1] == "LEG-7 is not waiting for an answer"
            assert app.query_one("#answer-input", Input).value == "LALR"

    run(scenario)


def test_the_trackers_are_read_seldom_in_a_thread_and_on_ctrl_r(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)  # the trackers every 10 s, as in use
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.pause(0.5)  # a while, in which nothing reads the trackers again
            await settle(pilot)
            assert world.sources.inbox_reads == 1  # at the start only
            await pilot.press("f3")
            await settle(pilot)
            assert world.sources.inbox_reads == 1  # showing the inbox reads only the bus
            world.sources.inbox_view = TrackerInbox(
                (TrackerAsk("app", "LEG-9", "Export", "CSV or JSON?", ""),), ()
            )
            await pilot.press("ctrl+r")
            await until_shown(pilot, app, "CSV or JSON?")
            assert world.sources.inbox_reads == 2

    run(scenario)


# -- acting on agents ------------------------------------------------------------------------------


def test_archiving_the_highlighted_agent(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            sidebar = app.query_one(Sidebar)
            sidebar.focus()
            sidebar.highlighted = sidebar_index(app, f"a:{world.review.id}")
            await pilot.press("a")
            await until_shown(pilot, app, "Archive @app/legion/LEG-7/review? y/n")
            await pilot.press("y")
            await settle(pilot)
            assert world.agent(world.review).status is AgentStatus.ARCHIVED
            header = next(r for r in rows(app) if isinstance(r, ArchivedHeader))
            assert (header.count, header.expanded) == (1, False)
            assert "> Archived (1)" in screen_text(app)
            await choose(pilot, app, "archived")  # Enter opens the section
            assert any(isinstance(r, AgentRow) and r.archived for r in rows(app))
            text = screen_text(app)
            assert "v Archived (1)" in text
            assert "║   app/legion/LEG-7" in text and "║     . @review" in text  # focused: ║
            assert ". @review" in text

    run(scenario)


def test_archive_without_an_agent_highlighted_says_so(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            sidebar = app.query_one(Sidebar)
            sidebar.focus()
            sidebar.highlighted = sidebar_index(app, f"c:{LEG7}")
            await pilot.press("a")
            await pilot.pause()
            assert app.said == ["highlight an agent in the sidebar first"]

    run(scenario)


def test_kill_needs_force_for_a_busy_agent(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            sidebar = app.query_one(Sidebar)
            sidebar.focus()
            sidebar.highlighted = sidebar_index(app, f"a:{world.implement.id}")
            await pilot.press("k", "y")
            await until_said(pilot, app, "busy")
            assert "busy" in app.said[-1] and "K kills it anyway" in app.said[-1]
            assert world.agent(world.implement).status is AgentStatus.BUSY
            await pilot.press("K", "y")
            await until_said(pilot, app, "force-killed @app/legion/LEG-7/implement: its session")
            assert world.agent(world.implement).status is AgentStatus.FAILED
            assert world.sources.stopped == ["app/legion/LEG-7/implement"]
            await until_shown(pilot, app, "x @implement")

    run(scenario)


def test_killing_an_agent_with_no_session_says_there_was_nothing_to_kill(world: World) -> None:
    done = world.bus.register_agent(
        LEG7, "plan", role=AgentRole.PLAN, runtime="claude-code", session_id=None
    )
    world.bus.update_agent(done.id, status=AgentStatus.COMPLETE)

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await highlight_agent(pilot, app, done)
            await pilot.press("k", "y")
            await until_said(pilot, app, "nothing to kill")
            assert app.said[-1] == (
                "nothing to kill: @app/legion/LEG-7/plan is complete, with no running session"
            )
            assert world.agent(done).status is AgentStatus.COMPLETE
            assert world.sources.stopped == []

    run(scenario)


# -- the other views -------------------------------------------------------------------------------


def test_the_board_shows_the_selected_projects_issues_by_phase(world: World) -> None:
    world.sources.board_view = Board(
        "app",
        (
            BoardIssue(Status.TODO, "LEG-8", "Add a flag", "-", "-"),
            BoardIssue(Status.IN_PROGRESS, "LEG-7", "Parser", "implement running", "-"),
            BoardIssue(Status.NEEDS_REVIEW, "LEG-5", "Docs", "review idle", "#2 approved"),
        ),
        (),
        hosts="alpha (up, leads, 2/2), beta (up, 1/1)",
    )

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("f4")
            text = await until_shown(pilot, app, "app: 3 issues")
            assert "hosts: alpha (up, leads, 2/2), beta (up, 1/1)" in text
            assert "In Progress (1)" in text and "LEG-7  implement running" in text
            assert "#2 approved" in text
            assert world.sources.boards_for[-1] == "app"

    run(scenario)


def board_world(world: World) -> None:
    world.sources.board_view = Board(
        "app",
        (
            BoardIssue(
                Status.BACKLOG,
                "LEG-9",
                "Export",
                "-",
                "-",
                Action.DISPATCH_ARCHITECT,
                Mode.ARCHITECT,
            ),
            BoardIssue(Status.TODO, "LEG-8", "Flag", "-", "-", Action.DISPATCH_PLANNER, Mode.PLAN),
            BoardIssue(Status.IN_PROGRESS, "LEG-7", "Parser", "implement running", "-", live=True),
        ),
        (),
    )


def test_d_on_the_board_dispatches_the_suggested_mode_for_the_highlighted_issue(
    world: World,
) -> None:
    board_world(world)

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("f4")
            text = await until_shown(pilot, app, "> LEG-9", "d Dispatch")
            assert "LEG-9: d dispatches architect" in text
            await pilot.press("down")
            text = await until_shown(pilot, app, "> LEG-8", "LEG-8: d dispatches plan")
            await pilot.press("d")
            await until_said(pilot, app, "LEG-8: plan worker started")
            assert world.sources.dispatched == [("app", "LEG-8", Mode.PLAN)]
            await pilot.press("down", "down")  # stays on the last
            await until_shown(pilot, app, "> LEG-7")
            await pilot.press("d")
            await pilot.pause()
            assert app.said[-1] == (
                "LEG-7 has a live worker (implement running): nothing to dispatch"
            )
            assert world.sources.dispatched == [("app", "LEG-8", Mode.PLAN)]
            await pilot.press("up", "up", "up")
            await until_shown(pilot, app, "> LEG-9")
            # A refused dispatch is one line.
            world.sources.refuse = "LEG-9 already has a live worker: window leg-9-architect"
            await pilot.press("d")
            await until_said(pilot, app, "already has a live worker")
            assert world.sources.dispatched == [("app", "LEG-8", Mode.PLAN)]

    run(scenario)


def test_the_board_says_the_next_step_in_words(world: World) -> None:
    world.sources.board_view = Board(
        "app",
        (
            BoardIssue(
                Status.IN_PROGRESS,
                "LEG-7",
                "Parser",
                "-",
                "-",
                Action.REMOVE_WORKER_ACTIVE_AND_REDISPATCH,
                Mode.IMPLEMENT,
            ),
        ),
        (),
    )

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(100, 24)) as pilot:
            await settle(pilot)
            await pilot.press("f4")
            text = await until_shown(pilot, app, "re-dispatch implement (worker gone)")
            assert "remove_worker_active" not in text

    run(scenario)


def test_d_on_an_empty_board_says_so(world: World) -> None:
    world.sources.board_view = Board("app", (), ())

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("f4")
            await until_shown(pilot, app, "No issues yet")
            await pilot.press("down", "d")
            await pilot.pause()
            assert app.said == ["no issue highlighted on the board"]

    run(scenario)


def test_a_click_on_an_issue_highlights_it(world: World) -> None:
    board_world(world)

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("f4")
            await until_shown(pilot, app, "> LEG-9")
            await pilot.click("#board-lines", offset=(4, 3))  # the line of LEG-8
            await until_shown(pilot, app, "> LEG-8")
            assert app.focused is not None and app.focused.id == "board-scroll"

    run(scenario)


def test_a_view_that_cannot_be_had_says_why_in_one_line(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            for key, reason in (("f4", "no project"), ("f6", "no project here")):
                await pilot.press(key)
                await until_shown(pilot, app, reason)
            await pilot.press("f5")
            await until_shown(pilot, app, "highlight an agent in the sidebar")

    run(scenario)


def test_peek_shows_the_highlighted_agents_screen_and_transcript(world: World) -> None:
    world.sources.peek_view = Peek(
        "app/legion/LEG-7/implement",
        "leg-7-implement",
        "running",
        "$ pytest\n3 passed",
        ("assistant: Running the tests", "assistant: (Bash)"),
    )

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("f5")
            sidebar = app.query_one(Sidebar)
            sidebar.highlighted = sidebar_index(app, f"a:{world.implement.id}")
            await until_shown(
                pilot,
                app,
                "@app/legion/LEG-7/implement (running)",
                "in tmux window leg-7-implement",
                "3 passed",
                "assistant: (Bash)",
            )

    run(scenario)


def test_peek_shows_the_agents_task_list(world: World) -> None:
    world.sources.peek_view = Peek(
        "app/legion/LEG-7/implement",
        "leg-7-implement",
        "running",
        "$ pytest",
        (),
        "Tasks 2/5, now: Writing the parser",
    )

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(100, 24)) as pilot:
            await settle(pilot)
            await pilot.press("f5")
            sidebar = app.query_one(Sidebar)
            sidebar.highlighted = sidebar_index(app, f"a:{world.implement.id}")
            await until_shown(pilot, app, "Tasks 2/5, now: Writing the parser")

    run(scenario)


def test_the_log_shows_actions_and_the_agents_events_by_time(world: World) -> None:
    world.sources.log_view = ActionLogView(
        "app",
        (
            LogLine("2026-11-26T10:00:00Z", "LEG-7", "dispatch_planner", "done", "plan started"),
            LogLine(
                "2026-11-26T10:00:05.250Z",
                "@app/legion/LEG-7/plan",
                "completed",
                "event",
                "plan posted",
            ),
        ),
    )

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(120, 24)) as pilot:
            await settle(pilot)
            await pilot.press("f6")
            text = await until_shown(pilot, app, "dispatch_planner", "plan posted")
            assert "Issue or agent" in text and "Action or event" in text
            assert text.index("dispatch_planner") < text.index("@app/legion/LEG-7/plan")

    run(scenario)


def test_the_log_keeps_its_outcome_column_at_100_columns(world: World) -> None:
    world.sources.log_view = ActionLogView(
        "app",
        (
            LogLine(
                "2026-11-26T10:00:00Z",
                "LEG-7",
                "remove_worker_active_and_redispatch",
                "deferred",
                "leg-7-implement is finishing its turn; retried in 30 s when the window closes",
            ),
            LogLine(
                "2026-11-26T10:00:05Z",
                "@app/legion/LEG-7/implement",
                "compaction",
                "event",
                "the context was compacted after 180,000 tokens of the parser's tests",
            ),
        ),
    )

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("f6")
            text = await until_shown(pilot, app, "Outcome", "deferred", "event")
            assert "…" in text  # the long columns are cut, not the outcome
            row = next(line for line in text.splitlines() if "deferred" in line)
            assert "remove_worker" in row and "leg-7-impl" in row  # each column still begins

    run(scenario)


def test_o_attaches_the_highlighted_agent_by_running_the_tmux_command(
    world: World, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    # Inside Legion's own tmux server the command is a switch-client: the TUI runs it as it
    # is (a real process here, standing in for tmux) and stays on screen.
    world.sources.attach_with = Attach(
        [sys.executable, "-c", f"open({str(ran)!r}, 'w').write('attached')"], {}, switched=True
    )

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(100, 24)) as pilot:
            await settle(pilot)
            await pilot.press("escape")
            app.query_one(Sidebar).highlighted = sidebar_index(app, f"a:{world.implement.id}")
            await pilot.press("o")
            await settle(pilot)
            assert world.sources.attached == ["app/legion/LEG-7/implement"]
            assert ran.read_text() == "attached"

    run(scenario)


def test_o_says_why_an_agent_cannot_be_attached(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(100, 24)) as pilot:
            await settle(pilot)
            await pilot.press("escape")
            app.query_one(Sidebar).highlighted = sidebar_index(app, f"a:{world.review.id}")
            await pilot.press("o")
            await until_said(pilot, app, "no live session to attach to")
            # A terminal the TUI cannot step aside from (here: the test's headless one) is
            # told what to run instead.
            world.sources.attach_with = Attach(["true"], {}, switched=False)
            await pilot.press("o")
            await until_said(pilot, app, "run `legion attach app/legion/LEG-7/review`")

    run(scenario)


def test_closing_the_app_leaves_the_agents_as_they_were(world: World) -> None:
    before = world.bus.agents(include_archived=True)

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("ctrl+q")

    run(scenario)
    assert world.bus.agents(include_archived=True) == before


def test_no_color_leaves_no_colour_on_screen(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Textual honours NO_COLOR itself (a monochrome filter on every line); the TUI's
    distinctions are also made in text (glyphs, labels, reverse video), so nothing is lost."""
    world.bus.post(world.legion.id, LEG7, "Ready? @human", kind=MessageKind.ASK)

    async def colours() -> set[str]:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            assert "[ask]" in screen_text(app)
            return _colours(app.export_screenshot())

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert not all(_grey(c) for c in asyncio.run(colours()))
    monkeypatch.setenv("NO_COLOR", "1")
    assert all(_grey(c) for c in asyncio.run(colours()))


def _colours(svg: str) -> set[str]:
    """The colours an SVG screenshot paints, but its template's default text colour."""
    import re

    from rich.terminal_theme import SVG_EXPORT_THEME

    default = "#{:02x}{:02x}{:02x}".format(*SVG_EXPORT_THEME.foreground_color)
    return {c.lower() for c in re.findall(r"fill:\s*(#[0-9a-fA-F]{6})", svg)} - {default}


def _grey(colour: str) -> bool:
    return colour[1:3] == colour[3:5] == colour[5:7]


def test_no_channels_yet_says_so(tmp_path: Path) -> None:
    path = tmp_path / "bus.db"
    SqliteBus(path).close()

    async def scenario() -> None:
        fake = FakeSources()
        app = LegionApp(lambda: SqliteBus(path), fake, fake, format_time=lambda _: "")
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            assert "No channels yet" in screen_text(app)

    run(scenario)


# -- the first screen, focus and keys that act -----------------------------------------------------


def test_the_project_here_is_listed_from_the_start_and_the_chat_line_posts_there(
    tmp_path: Path,
) -> None:
    """A project with no agent and no message yet: its channel is listed, open and
    highlighted in the sidebar, which has the focus; Enter goes to its chat line, and what is
    typed and sent lands in that channel."""
    path = tmp_path / "bus.db"
    SqliteBus(path).close()
    here = Channel("repo", "main")

    async def scenario() -> None:
        fake = FakeSources()
        app = RecordingApp(lambda: SqliteBus(path), fake, fake, channel=here)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            assert [row.key for row in rows(app)] == [f"c:{here}"]
            text = screen_text(app)
            assert "No channels yet" not in text
            assert "repo/main" in text.splitlines()[1]  # listed in the sidebar
            assert isinstance(app.focused, Sidebar)
            await pilot.press("enter")
            assert isinstance(app.focused, ChatInput)
            await pilot.press(*"hello from the first screen", "enter")
            await settle(pilot)
            assert app.said == ["wakes nobody"]  # no error; no mention, so nobody woken
            assert "@human hello from the first screen" in screen_text(app)

    run(scenario)
    bus = SqliteBus(path)
    try:
        assert [(m.sender, m.body) for m in bus.messages(channel=here)] == [
            ("human", "hello from the first screen")
        ]
    finally:
        bus.close()


def test_tab_without_a_completion_stays_in_the_chat_line_so_letters_never_act(
    world: World,
) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)
        before = {a.id: a.status for a in world.bus.agents(include_archived=True)}
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            chat = app.query_one(ChatInput)
            # The sidebar's highlight on a live agent: `a` there would archive it, `k` kill it.
            app.query_one(Sidebar).highlighted = sidebar_index(app, f"a:{world.implement.id}")
            await pilot.press("f2")
            assert app.focused is chat
            await pilot.press("tab")
            await pilot.press(*"please also add a test")
            await settle(pilot)
            assert app.focused is chat
            assert chat.value == "please also add a test"
            assert world.sources.stopped == []
            assert app.said == []
        assert {a.id: a.status for a in world.bus.agents(include_archived=True)} == before

    run(scenario)


def test_f2_focuses_the_chat_line_and_reentering_keeps_the_draft(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            chat = app.query_one(ChatInput)
            await pilot.press("f2", *"a draft")
            await pilot.press("escape")
            assert isinstance(app.focused, Sidebar)
            await pilot.press("f2")
            await pilot.pause()
            assert app.focused is chat
            assert chat.selection.is_empty and chat.cursor_position == len("a draft")
            await pilot.press(*" kept")
            assert chat.value == "a draft kept"
            # From another view too.
            await pilot.press("f4")
            await settle(pilot)
            await pilot.press("f2")
            await settle(pilot)
            assert app.focused is chat
            assert chat.selection.is_empty and chat.cursor_position == len("a draft kept")

    run(scenario)


def test_the_focused_area_is_marked_in_the_text(world: World) -> None:
    """Focus shows without colour: the focused area's border is drawn double."""

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            lines = screen_text(app).splitlines()
            assert lines[0].startswith("╔") and lines[1].startswith("║")  # the sidebar
            assert "╔" not in lines[-4]
            await pilot.press("f2")
            await pilot.pause()
            lines = screen_text(app).splitlines()
            assert "╔" in lines[-4] and "║" in lines[-3]  # the chat line
            assert "╔" not in lines[0]

    run(scenario)


def test_human_is_offered_by_completion(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            chat = app.query_one(ChatInput)
            await pilot.press("f2", "@", "h", "u")
            await settle(pilot)
            await pilot.press("tab")
            assert chat.value == "@human "

    run(scenario)


async def highlight_agent(pilot: Pilot[Any], app: LegionApp, agent: Agent) -> None:
    sidebar = app.query_one(Sidebar)
    sidebar.focus()
    sidebar.highlighted = sidebar_index(app, f"a:{agent.id}")
    await pilot.pause()


def test_archive_and_kill_ask_first_naming_the_agent(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await highlight_agent(pilot, app, world.review)
            for key, question in (
                ("a", "Archive @app/legion/LEG-7/review? y/n"),
                ("k", "Kill @app/legion/LEG-7/review? y/n"),
                ("K", "Force-kill @app/legion/LEG-7/review"),
            ):
                await pilot.press(key)
                await until_shown(pilot, app, question)
                await pilot.press("n")
                await settle(pilot)
                assert question not in screen_text(app)
            await pilot.press("a")
            await until_shown(pilot, app, "Archive @app/legion/LEG-7/review?")
            await pilot.press("escape")
            await settle(pilot)
            await pilot.press("k", "x")  # any key but y declines
            await settle(pilot)
            assert world.agent(world.review).status is AgentStatus.IDLE
            assert world.sources.stopped == []
            assert isinstance(app.focused, Sidebar)
            await pilot.press("a")
            await until_shown(pilot, app, "Archive @app/legion/LEG-7/review?")
            await pilot.press("y")
            await until_said(pilot, app, "archived @app/legion/LEG-7/review")
            assert world.agent(world.review).status is AgentStatus.ARCHIVED

    run(scenario)


def test_question_mark_opens_the_help_listing_every_key(world: World) -> None:
    docs = Path(__file__).parents[2] / "docs" / "tui.md"
    keys = docs.read_text(encoding="utf-8").split("\n## Keys\n", 1)[1].split("\n## ", 1)[0]
    documented = [
        line.split("|")[1].strip()
        for line in keys.splitlines()
        if line.startswith("| ") and not line.startswith("| key")
    ]
    assert documented == [key for key, _, _ in KEYS]  # docs/tui.md lists what the help does

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(100, 50)) as pilot:
            await settle(pilot)
            await pilot.press("question_mark")  # the first key pressed: the help
            text = await until_shown(pilot, app, "Keys")
            for key in documented:
                assert key in text, key
            await pilot.press("escape")
            await settle(pilot)
            assert "Keys" not in screen_text(app)
            await pilot.press("f2", "f1")  # F1 in the chat line, where ? is typed
            await until_shown(pilot, app, "Keys")
            await pilot.press("escape")
            await settle(pilot)
            await pilot.press("question_mark")
            assert app.query_one(ChatInput).value == "?"

    run(scenario)


# -- messages that arrive out of view, and the inbox ---------------------------------------------

LONG = (
    "The parser now reads every statement of the grammar, and the tests cover "
    "each error message the reviewer asked about, including the unterminated string"
)


def test_a_message_arriving_while_another_view_is_shown_fills_the_width(world: World) -> None:
    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("f4")
            await settle(pilot)
            world.bus.post(world.implement.id, LEG7, LONG)
            await settle(pilot)
            await pilot.press("f2")
            await settle(pilot)
            lines = [line.rstrip() for line in screen_text(app).splitlines()]
            first = next((n for n, line in enumerate(lines) if "The parser" in line), None)
            assert first is not None, screen_text(app)
            column = lines[first].index("12:00 @implement")  # where the messages begin
            lines = [line[column:] for line in lines]
            said = lines[first : first + 4]
            said = said[: next((n for n, line in enumerate(said) if not line.strip()), 4)]
            width = app.query_one(MessageLog).scrollable_content_region.width
            assert said[0].startswith("12:00 @implement The parser now reads every")
            # Continuation lines under the sender, and the width used, not a few columns.
            assert all(line.startswith("      ") and line[6] != " " for line in said[1:]), said
            assert all(len(line) > width - 12 for line in said[:-1]), said
            assert " ".join(line.strip() for line in said) == f"12:00 @implement {LONG}"

    run(scenario)


def test_the_inbox_renders_a_questions_markdown_escaped(world: World) -> None:
    body = (
        "Which **format** for `--since`?\n\n- ISO dates\n- relative, like `3d`\n\n"
        "<div>kept as text</div>"
    )
    actions.ask(world.bus, world.legion, body)

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(100, 40)) as pilot:
            await settle(pilot)
            await pilot.press("f3")
            text = await until_shown(pilot, app, "ISO dates")
            assert "Which format for --since?" in text
            assert "• ISO dates" in text and "• relative, like 3d" in text
            assert "**" not in text and "`" not in text
            assert "<div>kept as text</div>" in text

    run(scenario)


def test_a_resize_while_another_view_is_shown_rewraps_the_messages_when_shown(
    world: World,
) -> None:
    world.bus.post(world.implement.id, LEG7, LONG)

    async def scenario() -> None:
        app = world.app(channel=LEG7)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            narrow = [
                line for line in screen_text(app).splitlines() if "12:00 @implement The" in line
            ]
            await pilot.press("f4")
            await settle(pilot)
            await pilot.resize_terminal(140, 30)
            await settle(pilot)
            await pilot.press("f2")
            await settle(pilot)
            wide = [
                line for line in screen_text(app).splitlines() if "12:00 @implement The" in line
            ]
            assert len(wide) == 1 and len(narrow) == 1
            assert len(wide[0].rstrip()) > len(narrow[0].rstrip()) + 40, (narrow, wide)

    run(scenario)
