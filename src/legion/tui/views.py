"""The views' tabs (F2 chat, F3 inbox, F4 board, F5 peek, F6 log): which one is shown, and
the widget each gives the focus to when it is shown, so a key typed next goes where the human
looks. What a view shows is its own module's; what is read for it, the watcher's."""

from __future__ import annotations

from textual.widgets import TabbedContent

# The widget that takes the focus when its view is shown.
FOCUS = {
    "chat": "#chat-input",
    "inbox": "#answer-input",
    "board": "#board-scroll",
    "peek": "#peek-scroll",
    "log": "#log-table",
}


class Views(TabbedContent):
    def show(self, view: str) -> None:
        """Show `view` (its `TabActivated` follows), or focus it when shown already."""
        if self.active == view:  # shown already (no TabActivated): its line takes the focus
            self.focus_shown()
            return
        # Focus leaves the pane first: Textual moves the focus of a widget being hidden to a
        # sibling, whose pane would then take the screen back.
        self.screen.set_focus(None)
        self.active = view

    def focus_shown(self) -> None:
        focus = FOCUS.get(self.active)
        if focus is not None:
            self.screen.query_one(focus).focus()
