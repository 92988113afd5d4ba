"""tmux, driven through argv lists: one server (optionally private), one session per project.

Nothing here goes through a shell: window commands are argv lists that tmux executes directly,
and text typed into a pane is sent with `send-keys -l` (literal), then Enter as its own key.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from legion.errors import LegionError, ToolMissingError

# Wide panes keep the CLI's layout stable and questions readable in `capture-pane`.
PANE_WIDTH = 200
PANE_HEIGHT = 50


class TmuxError(LegionError):
    """A tmux command failed."""


@dataclass(frozen=True, slots=True)
class Window:
    id: str  # @N, stable for the window's life
    name: str
    pane_dead: bool
    pane_pid: int | None
    current_command: str


@dataclass(frozen=True)
class Tmux:
    """A tmux server: the default one, or a private one at `socket` (tests: `-f /dev/null`)."""

    socket: Path | None = None
    config: Path | None = None

    def argv(self, *args: str) -> list[str]:
        prefix = ["tmux"]
        if self.socket is not None:
            prefix += ["-S", str(self.socket)]
        if self.config is not None:
            prefix += ["-f", str(self.config)]
        return [*prefix, *args]

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            proc = subprocess.run(self.argv(*args), capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise ToolMissingError(
                "tmux is not installed: install it (e.g. apt-get install tmux)"
            ) from None
        if check and proc.returncode != 0:
            detail = proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}"
            raise TmuxError(f"tmux {args[0]} failed: {detail}")
        return proc

    # -- sessions ------------------------------------------------------------------------------

    def has_session(self, session: str) -> bool:
        return self.run("has-session", "-t", f"={session}", check=False).returncode == 0

    def new_session(self, session: str, window: str, command: list[str], cwd: Path) -> None:
        self.run(
            "new-session", "-d", "-s", session, "-n", window, "-c", str(cwd),
            "-x", str(PANE_WIDTH), "-y", str(PANE_HEIGHT), "--", *command,
        )  # fmt: skip

    def kill_session(self, session: str) -> None:
        self.run("kill-session", "-t", f"={session}", check=False)

    # -- windows -------------------------------------------------------------------------------

    def new_window(
        self, session: str, window: str, command: list[str], cwd: Path, *, keep_dead: bool = True
    ) -> str:
        """Start `command` in a new window; returns its id. A dead pane stays for inspection."""
        proc = self.run(
            "new-window", "-d", "-P", "-F", "#{window_id}", "-t", f"={session}:", "-n", window,
            "-c", str(cwd), "--", *command,
        )  # fmt: skip
        window_id = proc.stdout.strip()
        # The window's own option, so a worker that exits leaves its last screen to `peek` at.
        if keep_dead:
            self.run("set-option", "-w", "-t", window_id, "remain-on-exit", "on", check=False)
        return window_id

    def list_windows(self, session: str) -> list[Window]:
        """The session's windows; none when there is no server, no session, or no tmux at all
        (without tmux no worker can be running)."""
        try:
            proc = self._list(session)
        except ToolMissingError:
            return []
        if proc.returncode != 0:
            return []
        windows = []
        for line in proc.stdout.splitlines():
            parts = line.split("\t")
            if len(parts) != 5:
                continue
            window_id, name, dead, pid, command = parts
            windows.append(
                Window(window_id, name, dead == "1", int(pid) if pid.isdigit() else None, command)
            )
        return windows

    def _list(self, session: str) -> subprocess.CompletedProcess[str]:
        return self.run(
            "list-windows", "-t", f"={session}", "-F",
            "#{window_id}\t#{window_name}\t#{pane_dead}\t#{pane_pid}\t#{pane_current_command}",
            check=False,
        )  # fmt: skip

    def find_window(self, session: str, name: str) -> Window | None:
        for window in self.list_windows(session):
            if window.name == name:
                return window
        return None

    def kill_window(self, target: str) -> None:
        self.run("kill-window", "-t", target, check=False)

    # -- panes ---------------------------------------------------------------------------------

    def capture(self, target: str, lines: int = 50) -> str:
        """The pane's last `lines` lines of screen and history, joined where they wrapped."""
        proc = self.run("capture-pane", "-p", "-J", "-t", target, "-S", f"-{lines}")
        return proc.stdout

    def send_text(self, target: str, text: str, *, enter: bool = True) -> None:
        """Type `text` literally (no key names, no shell), then press Enter."""
        if text:
            self.run("send-keys", "-t", target, "-l", "--", text)
        if enter:
            self.run("send-keys", "-t", target, "Enter")

    def send_keys(self, target: str, *keys: str) -> None:
        """Press named keys (Enter, Escape, Down, …)."""
        self.run("send-keys", "-t", target, *keys)
