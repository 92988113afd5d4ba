"""What the turn loops of the CLIs run as headless turns share (Codex's and Gemini's: their
`session` modules): the session window's keyboard, read between turns.

A turn loop runs its CLI one turn at a time in the session's tmux window; when idle it takes a
prompt typed there (Enter submits; a line feed is a newline inside the prompt), which is how
the daemon delivers to an idle session, and meanwhile polls the session's inbox.
"""

from __future__ import annotations

import contextlib
import os
import select
import termios
from collections.abc import Callable
from typing import IO, Any

PROMPT_MARK = ">"
# How the messages the loop hands over between turns are recorded in the inbox.
TURN_END = "turn_end"
IDLE_POLL_S = 0.5  # how often an idle session looks at its inbox
OUTPUT_LINES = 6  # of a command's output, shown in the window
ENTER, NEWLINE, BACKSPACE, KILL_LINE = b"\r", b"\n", (b"\x7f", b"\x08"), b"\x15"


class Terminal:
    """The window's keyboard: no echo, no line editing by the kernel, and Enter (CR) kept apart
    from a line feed, so a typed prompt may hold newlines."""

    def __init__(self, stream: IO[str], out: IO[str]) -> None:
        self.fd = stream.fileno()
        self.out = out
        self._saved: list[Any] | None = None
        self._buffer = bytearray()
        if os.isatty(self.fd):
            self._saved = termios.tcgetattr(self.fd)
            mode = termios.tcgetattr(self.fd)
            mode[0] &= ~(termios.ICRNL | termios.INLCR | termios.IGNCR)
            mode[3] &= ~(termios.ICANON | termios.ECHO)
            mode[6][termios.VMIN] = 1
            mode[6][termios.VTIME] = 0
            termios.tcsetattr(self.fd, termios.TCSANOW, mode)

    def restore(self) -> None:
        if self._saved is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self.fd, termios.TCSANOW, self._saved)

    def read_prompt(self, poll: Callable[[], str | None]) -> str | None:
        """The next prompt: typed and submitted with Enter, or what `poll` finds meanwhile.
        None at the end of input."""
        while True:
            found = poll()
            if found:
                return found
            ready, _, _ = select.select([self.fd], [], [], IDLE_POLL_S)
            if not ready:
                continue
            chunk = os.read(self.fd, 4096)
            if not chunk:
                return None
            for byte in chunk:
                key = bytes([byte])
                if key == ENTER:
                    text = self._buffer.decode("utf-8", errors="replace")
                    self._buffer.clear()
                    self.out.write("\n")
                    if text.strip():
                        return text
                elif key in BACKSPACE:
                    if self._buffer:
                        del self._buffer[-1]
                elif key == KILL_LINE:
                    self._buffer.clear()
                    self.out.write(f"\n{PROMPT_MARK} ")
                else:
                    self._buffer += key
                    self.out.write(key.decode("utf-8", errors="ignore"))
            self.out.flush()
