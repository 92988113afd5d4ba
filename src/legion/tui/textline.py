"""A line the human types in: the chat line and the answer line."""

from __future__ import annotations

from textual.events import Focus
from textual.widgets import Input
from textual.widgets.input import Selection


class TextLine(Input):
    """Coming back to it keeps the draft as it was, the cursor at its end: nothing selected
    for the next key to wipe."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(select_on_focus=False, **kwargs)  # type: ignore[arg-type]

    def on_focus(self, event: Focus) -> None:
        self.selection = Selection.cursor(len(self.value))
