"""The Log view (F6): the project's last actions and its agents' last events on the bus,
oldest first."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.widgets import DataTable, Static, TabPane

from legion.tui.present import shown
from legion.tui.sources import ActionLogView, Unavailable


class LogView(TabPane):
    DEFAULT_CSS = """
    #log-table { height: 1fr; }
    """

    def __init__(
        self, title: str, format_time: Callable[[str], str], *, id: str | None = None
    ) -> None:
        super().__init__(title, id=id)
        self.format_time = format_time

    def compose(self) -> ComposeResult:
        yield Static("", id="log-title", classes="view-title")
        yield DataTable(id="log-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(
            "At", "Issue or agent", "Action or event", "Outcome", "Detail"
        )

    def show(self, log: ActionLogView | Unavailable) -> None:
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
