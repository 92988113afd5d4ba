"""A Gemini session's process, in its tmux window: `python -m legion.runtime.gemini.session`.

It runs the session as a chain of headless `gemini` turns (`--session-id` with Legion's own
id, then `--resume` with it, so every turn continues one conversation) and calls, at its
boundaries, the session-hooks API Claude Code's hooks call (`legion.bus.session_hooks`), as
Codex's turn loop does:

- at each turn boundary it hands over the messages queued in the session's inbox
  (`turn_ended`), as the next turn's prompt;
- when idle it takes a prompt typed into its window (`legion.runtime.turn_loop.Terminal`);
- a resumed session's first prompt carries Legion's wake-up context (`session_started`);
- it links the session's chat file as Legion's transcript once Gemini wrote it, and says in a
  state file whether a turn runs.

What Gemini does is shown in the window in a few lines per event, for `legion peek`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

from legion import daemon_link
from legion.bus import session_hooks
from legion.bus.session_hooks import HookedSession
from legion.relay import wake_up_fetcher
from legion.runtime.gemini.runtime import (
    TURN_FLAGS,
    TURN_REFUSED,
    find_chat,
    gemini_home,
    key_refused,
    session_link,
    turn_state_file,
)
from legion.runtime.turn_loop import OUTPUT_LINES, PROMPT_MARK, TURN_END, Terminal

T = TypeVar("T")
# The CLI starts a second node process of itself (for a larger heap) unless told not to: 2.5 s
# of every turn's 8 on a 2-core machine (docs/gemini-cli.md).
NO_RELAUNCH = {"GEMINI_CLI_NO_RELAUNCH": "true"}


def _short(text: str, width: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def turn_error(event: Mapping[str, Any]) -> str | None:
    """Pure: what a turn's `result` event says went wrong (its `error.message`), or None."""
    error = event.get("error")
    if event.get("status") != "error" or not isinstance(error, dict):
        return None
    return _short(str(error.get("message") or "the turn failed"), 300)


def render_event(event: Mapping[str, Any]) -> list[str]:
    """Pure: the window's lines for one `gemini -o stream-json` event."""
    kind = event.get("type")
    if kind == "message" and event.get("role") == "assistant":
        return [f"• {event.get('content', '')}"]
    if kind == "tool_use":
        parameters = event.get("parameters")
        shown = parameters.get("command") if isinstance(parameters, dict) else None
        return [f"$ {event.get('tool_name')}: {_short(str(shown or parameters))}"]
    if kind == "tool_result":
        output = str(event.get("output") or "").rstrip().splitlines()
        return [f"  ({event.get('status')})"] + [f"  {line}" for line in output[-OUTPUT_LINES:]]
    if kind == "result" and turn_error(event):
        return [f"! {turn_error(event)}"]
    if kind == "result":
        stats = event.get("stats") if isinstance(event.get("stats"), dict) else {}
        assert isinstance(stats, dict)
        return [
            f"─ turn {event.get('status')}: {stats.get('input_tokens', 0)} in "
            f"({stats.get('cached', 0)} cached), {stats.get('output_tokens', 0)} out"
        ]
    if kind == "error":
        return [f"! {_short(str(event.get('message', 'error')))}"]

    return []


class Session:
    def __init__(
        self,
        *,
        gemini: str,
        session_id: str,
        model: str,
        inbox: Path | None,
        context: Path | None,
        extra_args: Sequence[str],
        env: Mapping[str, str],
        out: IO[str],
    ) -> None:
        self.gemini = gemini
        self.session_id = session_id
        self.model = model
        self.inbox = inbox
        self.context = context
        self.extra_args = list(extra_args)
        self.env = env
        self.out = out
        self.home = gemini_home(env)
        self.link = session_link(self.home, session_id)
        self.last_error: str | None = None

    def _say(self, *lines: str) -> None:
        for line in lines:
            self.out.write(line + "\n")
        self.out.flush()

    def _state(self, state: str) -> None:
        from legion.files.private import write_private

        with contextlib.suppress(OSError):
            write_private(turn_state_file(self.link), state + "\n")

    @property
    def started(self) -> bool:
        """Whether the session exists: Gemini wrote its chat (it is linked)."""
        return self.link.is_symlink()

    def _link(self) -> None:
        """Link the session's chat file as Legion's transcript, once Gemini wrote it."""
        if self.started:
            return
        chat = find_chat(self.home, self.session_id)
        if chat is None:
            return
        self.link.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.link.with_name(f".{self.link.name}.{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        temporary.symlink_to(chat)
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

    def _guarded(self, what: str, call: Callable[[], T]) -> T | None:
        """`call`, or None when it fails: a broken inbox never stops the session."""
        try:
            return call()
        except Exception as exc:
            self._say(f"! legion: {what}: {type(exc).__name__}: {exc}")
            return None

    def queued_messages(self) -> str | None:
        """The messages waiting in the inbox, taken out of it (handed over at a turn's end)."""
        if self.inbox is None or not self.inbox.exists():
            return None
        return self._guarded(
            "turn end", lambda: session_hooks.turn_ended(self._hooked(), via=TURN_END)
        )

    def wake_up_context(self) -> str | None:
        """What a resumed session is given back."""
        return self._guarded(
            "session start", lambda: session_hooks.session_started(self._hooked(), "resume")
        )

    # -- turns ---------------------------------------------------------------------------------

    def argv(self, prompt: str) -> list[str]:
        which = "--resume" if self.started else "--session-id"
        return [
            self.gemini,
            "--model",
            self.model,
            *TURN_FLAGS,
            *self.extra_args,
            which,
            self.session_id,
            f"--prompt={prompt}",  # joined: a prompt that begins with `-` is no flag
        ]

    def turn(self, prompt: str) -> int:
        """Run one turn to its end; Gemini's exit status."""
        self._state("running")
        self._say("", f"{PROMPT_MARK} {prompt.strip()}", "")
        process = subprocess.Popen(
            self.argv(prompt),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
            env={**self.env, **NO_RELAUNCH},
        )
        assert process.stdout is not None
        try:
            for line in process.stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    self._say(line.rstrip())
                    continue
                if isinstance(event, dict):
                    if event.get("type") in ("message", "tool_use", "result"):
                        self._link()
                    if event.get("type") == "result":
                        self.last_error = turn_error(event)
                    self._say(*render_event(event))
            status = process.wait()
        except KeyboardInterrupt:
            process.terminate()
            status = process.wait()
            self._say("! interrupted")
        self._link()
        if status != 0:
            self._say(f"! gemini exited with status {status}")
        return status

    def _idle(self) -> None:
        """Say the session waits: `refused` when its last turn's key was refused, so that
        Legion stops it at once (`runtime.TURN_REFUSED`)."""
        refused = key_refused(self.last_error) if self.last_error else None
        self._state(f"{TURN_REFUSED} {refused}" if refused else "idle")

    def run(self, first_prompt: str, *, resumed: bool, terminal: Terminal | None) -> int:
        prompt: str | None = first_prompt
        if resumed:
            context = self.wake_up_context()
            if context:
                prompt = f"{context}\n\n{first_prompt}" if first_prompt.strip() else context
        while True:
            if prompt:
                status = self.turn(prompt)
                if status != 0 and not self.started:
                    # Nothing to resume: end here, so that the start fails with the reason.
                    why = self.last_error or f"exit status {status}"
                    self._say(f"gemini could not start the session: {why}")
                    return 1
                prompt = self.queued_messages()
                if prompt:
                    continue
            self._idle()
            daemon_link.turn_ended(self.env)  # a finished worker may now be closed
            self._say("", f"{PROMPT_MARK} waiting for a message (type it and press Enter)")
            if terminal is None:
                return 0
            prompt = terminal.read_prompt(self.queued_messages)
            if prompt is None:
                return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m legion.runtime.gemini.session")
    parser.add_argument("--gemini", required=True, help="the Gemini CLI to run")
    parser.add_argument("--session", required=True, help="Legion's id of the session")
    parser.add_argument("--model", required=True)
    parser.add_argument("--resume", action="store_true", help="the session ran before")
    parser.add_argument("--inbox", type=Path)
    parser.add_argument("--context", type=Path)
    parser.add_argument("--gemini-arg", action="append", default=[], dest="gemini_args")
    parser.add_argument("prompt", nargs="?", default="")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    session = Session(
        gemini=args.gemini,
        session_id=args.session,
        model=args.model,
        inbox=args.inbox,
        context=args.context,
        extra_args=args.gemini_args,
        env=dict(os.environ),
        out=sys.stdout,
    )
    terminal = Terminal(sys.stdin, sys.stdout) if sys.stdin.isatty() else None
    try:
        return session.run(args.prompt, resumed=args.resume, terminal=terminal)
    except KeyboardInterrupt:
        return 130
    finally:
        if terminal is not None:
            terminal.restore()
        session._idle()  # no turn runs once this process is gone


if __name__ == "__main__":
    from legion.diagnostics.log import setup

    setup(strict=False)  # a session is never failed for its log
    sys.exit(main())
