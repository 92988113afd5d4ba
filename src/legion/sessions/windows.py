"""The project's tmux session and its windows: what every caller needs of a session's window
(list, find, read the screen, type, close, attach) goes through here, so none reaches for tmux.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from legion.config import Project
from legion.core.ids import short_id
from legion.errors import TmuxError
from legion.runtime.tmux import Attach, Tmux, Window
from legion.sessions import prompting
from legion.sessions.observer import CONTROLLER_WINDOW

# The window that keeps the project's tmux session open while no session runs.
ANCHOR_WINDOW = "legion"


class SessionWindows:
    def __init__(self, project: Project, tmux: Tmux) -> None:
        self.project = project
        self.tmux = tmux

    @property
    def session(self) -> str:
        """The project's tmux session."""
        return f"legion-{short_id(self.project.settings.project_id)}"

    def ensure_session(self) -> None:
        """Open the project's tmux session (its anchor window) unless it is open."""
        if self.tmux.has_session(self.session):
            return
        anchor = [sys.executable, "-m", "legion.runtime.anchor"]
        try:
            self.tmux.new_session(self.session, ANCHOR_WINDOW, anchor, self.project.root)
        except TmuxError:
            if not self.tmux.has_session(self.session):  # else another process made it first
                raise

    def list(self) -> list[Window]:
        """The project's windows. Raises `TmuxUnavailable` when tmux cannot say which run: that
        is unknown, never "none"."""
        return self.tmux.list_windows(self.session)

    def controller_window(self) -> Window | None:
        """The controller's window (dead or alive), or None when there is none."""
        return self.tmux.find_window(self.session, CONTROLLER_WINDOW)

    def live_window(self, sid: str) -> Window | None:
        """The live window running session `sid`, or None."""
        return self.tmux.live_tagged(self.session, sid)

    def screen(self, window_id: str, lines: int = 60) -> str:
        """What the window shows (its last `lines`), as text: what the terminal has already
        acted on."""
        return self.tmux.capture(window_id, lines=lines)

    def send_text(self, window_id: str, text: str) -> None:
        """Type `text` into the window as it is (`send-keys -l`) and press Enter."""
        self.tmux.send_text(window_id, text)

    def type_prompt(self, window_id: str, text: str, transcript: Path, mark: int) -> bool:
        """Type a prompt into an idle session, confirmed (`legion.sessions.prompting`)."""
        return prompting.type_prompt(self.tmux, window_id, text, transcript, mark)

    def close_window(self, window_id: str) -> None:
        """Close a window (a stuck worker's: the reconciler restarts its session)."""
        self.tmux.kill_window(window_id)

    def close_and_wait(self, window: Window) -> None:
        """Close a window and wait for its process (a retired worker's, a leftover's)."""
        pid = None if window.pane_dead else window.pane_pid
        self.tmux.kill_window(window.id, pane_pid=pid)

    def attach_command(self, window_id: str, environ: Mapping[str, str]) -> Attach:
        """How this terminal opens the window read-write (`legion attach`, the TUI)."""
        return self.tmux.attach_command(self.session, window_id, environ)

    def check_tmux(self) -> None:
        """Raise when tmux cannot be run."""
        self.tmux.run("-V")

    def close_all(self) -> bool:
        """Close the project's tmux session, every window in it; False when there was none."""
        if not self.tmux.has_session(self.session):
            return False
        self.tmux.kill_session(self.session)
        return True
