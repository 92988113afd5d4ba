"""The Peek view (F5): the highlighted agent's live screen, its task list and the tail of
its transcript; one line saying why when it cannot be seen."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static, TabPane

from legion.tui.present import shown
from legion.tui.sources import Peek, Unavailable


class PeekView(TabPane):
    DEFAULT_CSS = """
    #peek-scroll { height: 1fr; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="peek-title", classes="view-title")
        with VerticalScroll(id="peek-scroll"):
            yield Static("", id="peek-screen")

    def show(self, peek: Peek | Unavailable) -> None:
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
