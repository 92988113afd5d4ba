"""The sidebar: each channel with its agents beneath, and the archived agents in a section
that opens and closes; its keys act on the highlighted agent (`legion.tui.agent_actions`).
Its rows are made in `legion.tui.present.sidebar_rows` (pure)."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from legion.bus.model import Agent, Channel
from legion.tui.agent_actions import AgentActions
from legion.tui.present import AgentRow, Row, row_text


class Sidebar(OptionList):
    """Channels, their agents, and the archived agents (a section that opens and closes)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "attach", "Attach"),
        Binding("a", "archive", "Archive"),
        Binding("k", "kill(False)", "Kill"),
        Binding("K", "kill(True)", "Kill -f", show=False),
    ]  # archive and kill ask first (`Confirm`)

    def __init__(self, agent_actions: AgentActions, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.agent_actions = agent_actions
        self.rows: list[Row] = []

    def action_attach(self) -> None:
        """`o`: the highlighted agent's live session in this terminal (`legion attach`)."""
        self.agent_actions.attach(self.highlighted_agent())

    def action_archive(self) -> None:
        self.agent_actions.archive(self.highlighted_agent())

    def action_kill(self, force: bool) -> None:
        self.agent_actions.kill(self.highlighted_agent(), force)

    def show(self, rows: list[Row], selected: Channel | None) -> None:
        """Show `rows`; rebuilt only when rows come or go, so the highlight and the scroll
        survive a count going up."""
        if rows == self.rows:
            return
        same_keys = [r.key for r in rows] == [r.key for r in self.rows]
        self.rows = rows
        if same_keys:  # labels changed only: the list keeps its scroll and highlight
            for index, row in enumerate(rows):
                self.replace_option_prompt_at_index(index, row_text(row))
            return
        highlighted = self.highlighted_option
        keep = highlighted.id if highlighted is not None else None
        self.set_options(Option(row_text(row), id=row.key) for row in rows)
        keys = [row.key for row in rows]
        if keep in keys:
            self.highlighted = keys.index(keep)
        elif selected is not None and f"c:{selected}" in keys:
            self.highlighted = keys.index(f"c:{selected}")

    def row(self, key: str | None) -> Row | None:
        return next((row for row in self.rows if row.key == key), None)

    def highlighted_agent(self) -> Agent | None:
        option = self.highlighted_option
        row = self.row(option.id if option is not None else None)
        return row.agent if isinstance(row, AgentRow) else None

    def highlight(self, channel: Channel) -> None:
        """Keep the highlight on the open channel (or one of its agents)."""
        option = self.highlighted_option
        row = self.row(option.id if option is not None else None)
        if isinstance(row, AgentRow) and row.agent.channel == channel:
            return
        keys = [r.key for r in self.rows]
        if f"c:{channel}" in keys:
            self.highlighted = keys.index(f"c:{channel}")
