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
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from legion.runtime.gemini.runtime import (
    TURN_FLAGS,
    find_chat,
    gemini_home,
    key_refused,
    session_link,
)
from legion.runtime.headless import TURN_REFUSED, turn_state_file
from legion.runtime.turn_loop import (
    OUTPUT_LINES,
    TurnLoopSession,
    loop_parser,
    one_line,
    serve,
)

# The CLI starts a second node process of itself (for a larger heap) unless told not to: 2.5 s
# of every turn's 8 on a 2-core machine (docs/gemini-cli.md).
NO_RELAUNCH = {"GEMINI_CLI_NO_RELAUNCH": "true"}


def turn_error(event: Mapping[str, Any]) -> str | None:
    """Pure: what a turn's `result` event says went wrong (its `error.message`), or None."""
    error = event.get("error")
    if event.get("status") != "error" or not isinstance(error, dict):
        return None
    return one_line(str(error.get("message") or "the turn failed"), 300)


def render_event(event: Mapping[str, Any]) -> list[str]:
    """Pure: the window's lines for one `gemini -o stream-json` event."""
    kind = event.get("type")
    if kind == "message" and event.get("role") == "assistant":
        return [f"• {event.get('content', '')}"]
    if kind == "tool_use":
        parameters = event.get("parameters")
        shown = parameters.get("command") if isinstance(parameters, dict) else None
        return [f"$ {event.get('tool_name')}: {one_line(str(shown or parameters))}"]
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
        return [f"! {one_line(str(event.get('message', 'error')))}"]

    return []


class Session(TurnLoopSession):
    cli = "gemini"

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
        home = gemini_home(env)
        link = session_link(home, session_id)
        super().__init__(
            session_id=session_id, inbox=inbox, context=context, env=env, out=out, link=link,
            state_file=turn_state_file(link),
        )  # fmt: skip
        self.gemini = gemini
        self.model = model
        self.extra_args = list(extra_args)
        self.home = home

    def _link(self) -> None:
        """Link the session's chat file as Legion's transcript, once Gemini wrote it."""
        if self.started:
            return
        chat = find_chat(self.home, self.session_id)
        if chat is not None:
            self.link_to(chat)

    def idle_state(self) -> str:
        """`refused` when its last turn's key was refused, so that Legion stops it at once
        (`legion.runtime.headless.TURN_REFUSED`)."""
        refused = key_refused(self.last_error) if self.last_error else None
        return f"{TURN_REFUSED} {refused}" if refused else "idle"

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

    def turn_env(self) -> dict[str, str]:
        return {**self.env, **NO_RELAUNCH}

    def on_event(self, event: Mapping[str, Any]) -> None:
        if event.get("type") in ("message", "tool_use", "result"):
            self._link()
        if event.get("type") == "result":
            self.last_error = turn_error(event)
        self.say(*render_event(event))

    def after_turn(self) -> None:
        self._link()


def _parser() -> argparse.ArgumentParser:
    parser = loop_parser("gemini", "legion.runtime.gemini.session")
    parser.add_argument("--model", required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    session = Session(
        gemini=args.gemini,
        session_id=args.session,
        model=args.model,
        inbox=args.inbox,
        context=args.context,
        extra_args=args.cli_args,
        env=dict(os.environ),
        out=sys.stdout,
    )
    return serve(session, args.prompt, resumed=args.resume)


if __name__ == "__main__":
    from legion.diagnostics.log import setup

    setup(strict=False)  # a session is never failed for its log
    sys.exit(main())
