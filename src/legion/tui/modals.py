"""The two boxes over the screen: a y/n question before what cannot be undone, and the help."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.events import Key
from textual.screen import ModalScreen
from textual.widgets import Static

from legion.tui.present import keys_table


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
