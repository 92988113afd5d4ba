"""The Log view (F6): the project's last actions and its agents' last events on the bus,
oldest first. Its columns fit the view's width: the time and the outcome are never cut; the
issue or agent, the action or event and the detail are cut (`…`) as the width needs."""

from __future__ import annotations

from collections.abc import Callable

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.events import Resize
from textual.widgets import DataTable, Static, TabPane

from legion.tui.present import cell, fit_columns, shown
from legion.tui.sources import ActionLogView, Unavailable

COLUMNS = ("At", "Issue or agent", "Action or event", "Outcome", "Detail")
KEEP = (0, 3)  # the time and the outcome: never cut
MINIMUM = 8  # what a cut column keeps at least
EDGE = 3  # the table's left border and its scroll bar


class LogView(TabPane):
    DEFAULT_CSS = """
    #log-table { height: 1fr; }
    """

    def __init__(
        self, title: str, format_time: Callable[[str], str], *, id: str | None = None
    ) -> None:
        super().__init__(title, id=id)
        self.format_time = format_time
        self.shown_log: ActionLogView | None = None
        self._width = 0  # the width the columns were fitted to

    def compose(self) -> ComposeResult:
        yield Static("", id="log-title", classes="view-title")
        yield DataTable(id="log-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*COLUMNS)

    def show(self, log: ActionLogView | Unavailable) -> None:
        title = self.query_one("#log-title", Static)
        if isinstance(log, Unavailable):
            self.shown_log = None
            self.query_one("#log-table", DataTable).clear()
            title.update(shown(log.reason))
            return
        title.update(shown(f"{log.project}: the last actions and agents' events"))
        self.shown_log = log
        self._fill()

    def on_resize(self, event: Resize) -> None:
        if self.shown_log is not None and event.size.width != self._width:
            self._fill()

    def _fill(self) -> None:
        """The rows, in columns fitted to the view's width (none yet: as wide as they are)."""
        table = self.query_one("#log-table", DataTable)
        rows = [
            (self.format_time(line.at), line.about, line.what, line.outcome, line.detail)
            for line in (self.shown_log.lines if self.shown_log is not None else ())
        ]
        natural = [
            max([cell_len(header), *(cell_len(cell(row[n]).plain) for row in rows)])
            for n, header in enumerate(COLUMNS)
        ]
        self._width = self.size.width
        padding = 2 * table.cell_padding * len(COLUMNS)
        room = self._width - EDGE - padding
        widths = fit_columns(natural, room, KEEP, MINIMUM) if self._width else natural
        table.clear(columns=True)
        for header, width in zip(COLUMNS, widths, strict=True):
            table.add_column(cell(header), width=width)
        for row in rows:
            table.add_row(*(cell(text) for text in row))
        table.move_cursor(row=max(0, table.row_count - 1))
