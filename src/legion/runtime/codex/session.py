"""A Codex session's process, in its tmux window: `python -m legion.runtime.codex.session`.

It runs the session as a chain of `codex exec --json` turns (resumed by Codex's session id, so
every turn continues one conversation) and calls, at its boundaries, the session-hooks API
Claude Code's hooks call (`legion.bus.session_hooks`):

- at each turn boundary it hands over the messages queued in the session's inbox
  (`turn_ended`), as the next turn's prompt;
- when idle it takes a prompt typed into its window (Enter submits; a line feed is a newline
  inside the prompt), which is how the daemon delivers to an idle session, as it does to
  Claude Code's;
- a resumed session's first prompt, and the first prompt after Codex compacted the
  conversation, carry Legion's wake-up context (`session_started`), and a compaction is
  recorded on the bus (`compacting`);
- it records the mapping of Legion's session id to Codex's (a link to the rollout) as soon as
  Codex names the session, and says in a state file whether a turn runs.

What Codex does is shown in the window in a few lines per event, for `legion peek`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from legion.runtime.codex.provider import CODEX_OVERRIDES_ENV
from legion.runtime.codex.runtime import (
    EXEC_FLAGS,
    NO_CREDENTIALS,
    codex_home,
    codex_session_id,
    compactions,
    find_rollout,
    last_turn_refused,
    session_link,
)
from legion.runtime.headless import turn_state_file
from legion.runtime.turn_loop import (
    OUTPUT_LINES,
    TurnLoopSession,
    loop_parser,
    one_line,
    serve,
)

# A key refused: what the server said after it (OpenAI's words quote part of the key) is not
# shown in the window.
_KEY_REFUSED = "unexpected status 401"


def _error_text(message: object) -> str:
    text = str(message)
    return text.split(":", 1)[0] if text.startswith(_KEY_REFUSED) else text


def render_event(event: Mapping[str, Any]) -> list[str]:
    """Pure: the window's lines for one `codex exec --json` event."""
    kind = event.get("type")
    item = event.get("item") if isinstance(event.get("item"), dict) else {}
    if kind == "item.completed" and isinstance(item, dict):
        if item.get("type") == "agent_message":
            return [f"• {item.get('text', '')}"]
        if item.get("type") == "command_execution":
            lines = [f"$ {one_line(str(item.get('command', '')))}  (exit {item.get('exit_code')})"]
            output = str(item.get("aggregated_output") or "").rstrip().splitlines()
            return lines + [f"  {line}" for line in output[-OUTPUT_LINES:]]
        if item.get("type") == "error":
            return [f"! {_error_text(item.get('message', ''))}"]
        return []
    if kind == "turn.completed":
        usage = event.get("usage") if isinstance(event.get("usage"), dict) else {}
        assert isinstance(usage, dict)
        return [
            f"─ turn done: {usage.get('input_tokens', 0)} in "
            f"({usage.get('cached_input_tokens', 0)} cached), {usage.get('output_tokens', 0)} out"
        ]
    if kind in ("turn.failed", "error"):
        error = event.get("error") if isinstance(event.get("error"), dict) else event
        assert isinstance(error, dict)
        return [f"! {_error_text(error.get('message', 'the turn failed'))}"]
    return []


class Session(TurnLoopSession):
    cli = "codex"

    def __init__(
        self,
        *,
        codex: str,
        session_id: str,
        inbox: Path | None,
        context: Path | None,
        extra_args: Sequence[str],
        env: Mapping[str, str],
        out: IO[str],
    ) -> None:
        link = session_link(env, session_id)
        super().__init__(
            session_id=session_id, inbox=inbox, context=context, env=env, out=out, link=link,
            state_file=turn_state_file(link),
        )  # fmt: skip
        self.codex = codex
        self.extra_args = list(extra_args)
        self.home = codex_home(env)
        self._codex_id = codex_session_id(self.link)

    # -- the session's record ------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether the session exists: Codex answered at least once (it is linked)."""
        return codex_session_id(self.link) is not None

    def start_failed(self, status: int) -> bool:
        return status != 0 and not self.started and not self._link_refused()

    def _link(self, codex_id: str) -> None:
        """Record which Codex session this is: the link to its rollout."""
        self._codex_id = codex_id
        if codex_session_id(self.link) == codex_id:
            return
        rollout = find_rollout(self.home, codex_id)
        if rollout is None:
            return  # not written yet: tried again at the next event
        self.link_to(rollout)

    def _link_refused(self) -> bool:
        """After a first turn that failed: when the model's server refused Codex's key
        (`runtime.key_refused`), the session is linked and waits, as Claude Code waits at its
        login screen, so that Legion reads why from its rollout at once (it stops the session
        and pauses dispatch); True then. A first turn that made no request (no key, an unknown
        provider) leaves no session (False): its start fails with Codex's reason."""
        if self._codex_id is None:
            return False
        rollout = find_rollout(self.home, self._codex_id)
        if rollout is None:
            return False
        try:
            lines = rollout.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return False
        if not last_turn_refused(lines):
            return False
        self._link(self._codex_id)
        return self.started

    def compactions(self) -> int:
        try:
            return compactions(self.link.read_text(encoding="utf-8", errors="replace").splitlines())
        except OSError:
            return 0

    # -- turns ---------------------------------------------------------------------------------

    def argv(self, prompt: str) -> list[str]:
        hidden = NO_CREDENTIALS if self.env.get("LEGION_MODE") != "controller" else ()
        argv = [self.codex, "exec", *EXEC_FLAGS, *hidden, *self.extra_args, *self._proxied()]
        if self._codex_id is not None:
            argv += ["resume", self._codex_id]
        return [*argv, "--", prompt]

    def _proxied(self) -> list[str]:
        """The overrides that point Codex's provider at the daemon's model proxy, when the
        session was started to go through it (`legion.proxy.session_variables`)."""
        raw = self.env.get(CODEX_OVERRIDES_ENV)
        if not raw:
            return []
        try:
            overrides = json.loads(raw)
        except ValueError:
            return []
        return [str(item) for item in overrides] if isinstance(overrides, list) else []

    def on_event(self, event: Mapping[str, Any]) -> None:
        kind = str(event.get("type", ""))
        if kind == "thread.started" and event.get("thread_id"):
            self._codex_id = str(event["thread_id"])
        elif kind.startswith(("item.", "turn.completed")) and self._codex_id:
            # Linked once the model has answered: a session whose first request fails (no
            # key, no provider) is no session, and its window says why; one whose key was
            # refused is linked after (`_link_refused`).
            self._link(self._codex_id)
        if kind in ("turn.failed", "error") or (
            kind == "item.completed" and event.get("item", {}).get("type") == "error"
        ):
            self.last_error = render_event(event)[-1].removeprefix("! ")
        self.say(*render_event(event))


def _parser() -> argparse.ArgumentParser:
    parser = loop_parser("codex", "legion.runtime.codex.session")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    session = Session(
        codex=args.codex,
        session_id=args.session,
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
