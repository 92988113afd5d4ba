"""What the turn loops of the CLIs run as headless turns share (Codex's and Gemini's: their
`session` modules): the session window's keyboard, read between turns (`Terminal`), and the
loop itself (`TurnLoopSession`: the turns, the session hooks at their boundaries, the state file,
the link to the CLI's transcript; each CLI says how it runs a turn and when its session exists).

A turn loop runs its CLI one turn at a time in the session's tmux window; when idle it takes a
prompt typed there (Enter submits; a line feed is a newline inside the prompt), which is how
the daemon delivers to an idle session, and meanwhile polls the session's inbox.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import subprocess
import sys
import termios
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, TypeVar

from legion import daemon_link
from legion.bus import session_hooks
from legion.bus.session_hooks import HookedSession
from legion.relay import wake_up_fetcher

T = TypeVar("T")

PROMPT_MARK = ">"
# How the messages the loop hands over between turns are recorded in the inbox.
TURN_END = "turn_end"
IDLE_POLL_S = 0.5  # how often an idle session looks at its inbox
OUTPUT_LINES = 6  # of a command's output, shown in the window
ENTER, NEWLINE, BACKSPACE, KILL_LINE = b"\r", b"\n", (b"\x7f", b"\x08"), b"\x15"


def one_line(text: str, width: int = 160) -> str:
    """`text` on one line, cut at `width` characters: what the window shows of a command."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


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


class TurnLoopSession:
    """A session run as a chain of its CLI's headless turns, in its tmux window: at each turn's
    end the messages queued in its inbox are the next turn's prompt (`turn_ended`); when idle it
    takes a prompt typed into the window; a resumed session's first prompt carries Legion's
    wake-up context (`session_started`), and so does the first after the CLI compacted the
    conversation; a state file says whether a turn runs. A CLI's loop says how a turn runs
    (`turn`), when its session exists (`started`), and what else it knows (`compactions`,
    `idle_state`, `start_failed`)."""

    cli = "the CLI"  # its name, in what the window says

    def __init__(
        self,
        *,
        session_id: str,
        inbox: Path | None,
        context: Path | None,
        env: Mapping[str, str],
        out: IO[str],
        link: Path,
        state_file: Path,
    ) -> None:
        self.session_id = session_id
        self.inbox = inbox
        self.context = context
        self.env = env
        self.out = out
        self.link = link  # Legion's transcript: a link to the CLI's own file of the session
        self.state_file = state_file
        self.last_error: str | None = None

    # -- what a CLI's loop says ----------------------------------------------------------------

    def argv(self, prompt: str) -> list[str]:
        """The CLI's command line for a turn with `prompt` (headless, its events as JSON lines
        on its output), resuming the session once it exists."""
        raise NotImplementedError

    def turn_env(self) -> dict[str, str]:
        """The CLI's environment for a turn."""
        return dict(self.env)

    def on_event(self, event: Mapping[str, Any]) -> None:
        """What the loop does with one of the turn's events: show it, and learn from it (the
        session's id, its error)."""
        raise NotImplementedError

    def after_turn(self) -> None:
        """What the loop does once a turn ended, whatever its status."""

    def turn(self, prompt: str) -> int:
        """Run one turn to its end, each of its events to `on_event`; the CLI's exit status."""
        self.set_state("running")
        self.say("", f"{PROMPT_MARK} {prompt.strip()}", "")
        process = subprocess.Popen(
            self.argv(prompt),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
            env=self.turn_env(),
        )
        assert process.stdout is not None
        try:
            for line in process.stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    self.say(line.rstrip())
                    continue
                if isinstance(event, dict):
                    self.on_event(event)
            status = process.wait()
        except KeyboardInterrupt:
            process.terminate()
            status = process.wait()
            self.say("! interrupted")
        self.after_turn()
        if status != 0:
            self.say(f"! {self.cli} exited with status {status}")
        return status

    @property
    def started(self) -> bool:
        """Whether the session exists (the CLI wrote it, and it is linked)."""
        return self.link.is_symlink()

    def start_failed(self, status: int) -> bool:
        """Whether the first turn, ended with `status`, left no session to go on with."""
        return status != 0 and not self.started

    def compactions(self) -> int:
        """How often the CLI compacted the conversation so far (0: it never says)."""
        return 0

    def idle_state(self) -> str:
        """What the state file says while the session waits."""
        return "idle"

    # -- the session's record ------------------------------------------------------------------

    def say(self, *lines: str) -> None:
        for line in lines:
            self.out.write(line + "\n")
        self.out.flush()

    def set_state(self, state: str) -> None:
        from legion.files.private import write_private

        with contextlib.suppress(OSError):
            write_private(self.state_file, state + "\n")

    def link_to(self, target: Path) -> None:
        """Make Legion's transcript a link to `target` (the CLI's file of the session), in one
        rename: a reader finds the old link or the new one, never none."""
        self.link.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.link.with_name(f".{self.link.name}.{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        temporary.symlink_to(target)
        temporary.replace(self.link)

    # -- Legion's session hooks (`legion.bus.session_hooks`), called at the loop's boundaries --

    def _hooked(self) -> HookedSession:
        return HookedSession(
            session_id=self.session_id,
            inbox=self.inbox,
            context=self.context,
            env=self.env,
            workspace=Path(os.getcwd()),
            remote_context=wake_up_fetcher(self.env),
        )

    def guarded(self, what: str, call: Callable[[], T]) -> T | None:
        """`call`, or None when it fails: as for a hook, a broken inbox never stops the
        session (the window says why)."""
        try:
            return call()
        except Exception as exc:
            self.say(f"! legion: {what}: {type(exc).__name__}: {exc}")
            return None

    def queued_messages(self) -> str | None:
        """The messages waiting in the inbox, taken out of it (handed over at a turn's end)."""
        if self.inbox is None or not self.inbox.exists():
            return None
        return self.guarded(
            "turn end", lambda: session_hooks.turn_ended(self._hooked(), via=TURN_END)
        )

    def wake_up_context(self, source: str = "resume") -> str | None:
        """What a resumed (`resume`) or compacted (`compact`) session is given back."""
        if source == "compact":  # the event, and a snapshot
            self.guarded(
                "compaction", lambda: session_hooks.compacting(self._hooked(), trigger="auto")
            )
        return self.guarded(
            "session start", lambda: session_hooks.session_started(self._hooked(), source)
        )

    # -- the loop ------------------------------------------------------------------------------

    def run(self, first_prompt: str, *, resumed: bool, terminal: Terminal | None) -> int:
        prompt: str | None = first_prompt
        if resumed:
            context = self.wake_up_context("resume")
            if context:
                prompt = f"{context}\n\n{first_prompt}" if first_prompt.strip() else context
        pending_context: str | None = None
        while True:
            if prompt:
                if pending_context:
                    prompt = f"{pending_context}\n\n{prompt}"
                    pending_context = None
                before = self.compactions()
                status = self.turn(prompt)
                if self.start_failed(status):
                    # Nothing to resume: end here, so that the start fails with the reason.
                    why = self.last_error or f"exit status {status}"
                    self.say(f"{self.cli} could not start the session: {why}")
                    return 1
                if self.compactions() > before:
                    pending_context = self.wake_up_context("compact")
                prompt = self.queued_messages()
                if prompt:
                    continue
            self.set_state(self.idle_state())
            daemon_link.turn_ended(self.env)  # a finished worker may now be closed
            self.say("", f"{PROMPT_MARK} waiting for a message (type it and press Enter)")
            if terminal is None:
                return 0
            prompt = terminal.read_prompt(self.queued_messages)
            if prompt is None:
                return 0


def loop_parser(cli: str, module: str) -> argparse.ArgumentParser:
    """The command line of a turn loop's process (`python -m <module>`): the CLI to run
    (`--<cli>`), Legion's id of the session, whether it ran before, its inbox and context
    files, arguments for the CLI (`--<cli>-arg`, repeated) and the first prompt."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}")
    parser.add_argument(f"--{cli}", required=True, help=f"the {cli} CLI to run")
    parser.add_argument("--session", required=True, help="Legion's id of the session")
    parser.add_argument("--resume", action="store_true", help="the session ran before")
    parser.add_argument("--inbox", type=Path)
    parser.add_argument("--context", type=Path)
    parser.add_argument(f"--{cli}-arg", action="append", default=[], dest="cli_args")
    parser.add_argument("prompt", nargs="?", default="")
    return parser


def serve(session: TurnLoopSession, prompt: str, *, resumed: bool) -> int:
    """Run `session` in this process's window (its keyboard, when it has one) until its input
    ends; the exit status of the session's process."""
    terminal = Terminal(sys.stdin, sys.stdout) if sys.stdin.isatty() else None
    try:
        return session.run(prompt, resumed=resumed, terminal=terminal)
    except KeyboardInterrupt:
        return 130
    finally:
        if terminal is not None:
            terminal.restore()
        session.set_state(session.idle_state())  # no turn runs once this process is gone
