"""The Board view (F4): one project's issues by phase, each with its worker and its pull
request's review; one highlighted, and `d` starts the worker the decision table suggests for
it (as `legion dispatch` does), in a worker thread."""

from __future__ import annotations

from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.events import Click
from textual.message import Message as TextualMessage
from textual.widgets import Static, TabPane

from legion.errors import LegionError
from legion.tui.closing import while_open
from legion.tui.commands import Commands
from legion.tui.present import one_line, shown
from legion.tui.present_board import (
    DispatchChoice,
    board_line_issues,
    board_text,
    dispatch_choice,
    dispatch_hint,
)
from legion.tui.sources import Board, BoardIssue, Unavailable


class BoardScroll(VerticalScroll):
    """The board's lines, scrolled: ↑/↓ move its highlighted issue, `d` starts the worker it
    suggests."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("d", "dispatch", "Dispatch"),
    ]

    def action_move(self, delta: int) -> None:
        self.query_ancestor(BoardView).move(delta)

    def action_dispatch(self) -> None:
        self.query_ancestor(BoardView).dispatch()


class BoardLines(Static):
    """The board's lines; a click highlights the issue on the line clicked."""

    class Picked(TextualMessage):
        def __init__(self, line: int) -> None:
            super().__init__()
            self.line = line

    def on_click(self, event: Click) -> None:
        self.post_message(self.Picked(event.y))


class BoardView(TabPane):
    """The board as last read (`show`), and the highlighted issue, which stays on its issue
    wherever the issue moves."""

    DEFAULT_CSS = """
    #board-scroll { height: 1fr; padding: 0 1; }
    #board-lines { width: 100%; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    class Dispatched(TextualMessage):
        """A dispatch ended (started or refused): the board is worth reading again."""

    def __init__(self, title: str, commands: Commands, *, id: str | None = None) -> None:
        super().__init__(title, id=id)
        self.commands = commands
        self.board: Board | None = None
        self.cursor = 0
        self._dispatching: set[str] = set()

    def compose(self) -> ComposeResult:
        yield Static("", id="board-title", classes="view-title")
        with BoardScroll(id="board-scroll"):
            yield BoardLines("", id="board-lines")

    def show(self, board: Board | Unavailable) -> None:
        title = self.query_one("#board-title", Static)
        lines = self.query_one("#board-lines", Static)
        if isinstance(board, Unavailable):
            self.board = None
            title.update(shown(board.reason))
            lines.update("")
            return
        # The highlight stays on its issue, wherever the issue moved.
        current = self.issue()
        ids = [issue.identifier for issue in board.issues]
        if current is not None and current.identifier in ids:
            self.cursor = ids.index(current.identifier)
        self.board = board
        self.cursor = max(0, min(self.cursor, len(board.issues) - 1))
        self._draw()

    def _draw(self) -> None:
        board = self.board
        if board is None:
            return
        issues = board.issues
        counts = f"{len(issues)} issue{'' if len(issues) == 1 else 's'}"
        current = self.issue()
        hint = [dispatch_hint(current)] if current is not None else []
        title = self.query_one("#board-title", Static)
        hosts = [f"hosts: {board.hosts}"] if board.hosts else []
        heading = [f"{board.project}: {counts}", *hosts, *hint, *board.warnings]
        title.update(shown("\n".join(heading)))
        cursor = self.cursor if issues else None
        self.query_one("#board-lines", Static).update(board_text(issues, cursor))
        self.call_after_refresh(self._cursor_in_view)

    @while_open
    def _cursor_in_view(self) -> None:
        if self.board is None or not self.board.issues:
            return
        line = board_line_issues(self.board.issues).index(self.cursor)
        if line == 1:
            line = 0  # the first issue: its phase's heading in view too
        scroll = self.query_one(BoardScroll)
        height = scroll.scrollable_content_region.height
        if line < scroll.scroll_y:
            scroll.scroll_to(y=line, animate=False)
        elif height and line >= scroll.scroll_y + height:
            scroll.scroll_to(y=line - height + 1, animate=False)

    def issue(self) -> BoardIssue | None:
        """The highlighted issue."""
        if self.board is None or not self.board.issues:
            return None
        return self.board.issues[min(self.cursor, len(self.board.issues) - 1)]

    def move(self, delta: int) -> None:
        if self.board is None or not self.board.issues:
            return
        moved = max(0, min(self.cursor + delta, len(self.board.issues) - 1))
        if moved != self.cursor:
            self.cursor = moved
            self._draw()

    @on(BoardLines.Picked)
    def _clicked(self, event: BoardLines.Picked) -> None:
        self.query_one(BoardScroll).focus()
        if self.board is None:
            return
        lines = board_line_issues(self.board.issues)
        index = lines[event.line] if 0 <= event.line < len(lines) else None
        if index is not None:
            self.cursor = index
            self._draw()

    def dispatch(self) -> None:
        """`d`: start the worker the decision table suggests for the highlighted issue, as
        `legion dispatch ISSUE MODE` does."""
        issue = self.issue()
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
            said = self.commands.dispatch(project, choice.identifier, choice.mode)
        except LegionError as exc:
            self.app.call_from_thread(self._dispatched, choice, one_line(str(exc)), False)
            return
        self.app.call_from_thread(self._dispatched, choice, said, True)

    @while_open
    def _dispatched(self, choice: DispatchChoice, said: str, started: bool) -> None:
        self._dispatching.discard(choice.identifier)
        self.notify(said, severity="information" if started else "error", markup=False)
        self.post_message(self.Dispatched())
