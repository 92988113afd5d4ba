"""The command Claude Code runs for Legion's hooks: `python -P -m legion.runtime.claude.hook_entry
EVENT [--inbox FILE] [--context FILE]` (see `legion.runtime.claude.hooks`).

It reads the hook's input (JSON) on stdin and prints its answer (JSON) on stdout, or nothing
to let the CLI go on as if there were no hook. It never exits with status 2, which the CLI
takes for "block, with stderr as the reason": any failure is status 1, which the CLI records
as a non-blocking error and ignores, so a broken inbox never stops or garbles a session.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from legion.bus import session_hooks
from legion.bus.session_hooks import HookedSession
from legion.relay import wake_up_fetcher
from legion.runtime.claude import hooks
from legion.runtime.claude.hooks import HookEvent

if TYPE_CHECKING:
    from legion.core.task_list import TaskList

FAILED = 1  # never 2: see the module's docstring


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit with status 2
        raise ValueError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m legion.runtime.claude.hook_entry", add_help=False)
    parser.add_argument("event", choices=[str(e) for e in HookEvent])
    parser.add_argument("--inbox", type=Path, help=f"default: ${hooks.INBOX_ENV}")
    parser.add_argument("--context", type=Path, help=f"default: ${hooks.CONTEXT_ENV}")
    return parser


def _path(given: Path | None, env: Mapping[str, str], name: str) -> Path | None:
    if given is not None:
        return given
    value = env.get(name)
    return Path(value) if value else None


def _read_input(stdin: IO[str]) -> dict[str, Any]:
    try:
        data = json.loads(stdin.read() or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _session(
    hook_input: Mapping[str, Any], inbox: Path | None, context: Path | None, env: Mapping[str, str]
) -> HookedSession:
    """The session this hook runs for, from the hook's input."""
    cwd = hook_input.get("cwd")
    session = hooks.session_of(hook_input)
    return HookedSession(
        session_id=session,
        inbox=inbox,
        context=context,
        env=env,
        workspace=Path(cwd) if isinstance(cwd, str) and cwd else None,
        task_list=lambda agent: _task_list(agent.runtime, env, session),
        remote_context=wake_up_fetcher(env),
    )


def _task_list(runtime: str, env: Mapping[str, str], session: str | None) -> TaskList | None:
    """The session's own task list, for its wake-up context: Claude Code's (its hooks run
    this)."""
    from legion.plugins import CLAUDE_CODE

    if runtime != CLAUDE_CODE or session is None:
        return None
    from legion.runtime.claude.paths import config_dir
    from legion.runtime.claude.tasks import read_tasks

    return read_tasks(config_dir(env), session)  # its own home, inside its sandbox


def answer(
    event: HookEvent,
    hook_input: Mapping[str, Any],
    *,
    inbox: Path | None,
    context: Path | None,
    env: Mapping[str, str],
) -> dict[str, Any] | None:
    """The answer to print for `event` (None: print nothing): what Legion's session-hooks API
    gives the session, in Claude Code's wire format."""
    session = _session(hook_input, inbox, context, env)
    if event == HookEvent.SESSION_START:
        source = str(hook_input.get("source"))
        return hooks.answer_session_start(
            hook_input, session_hooks.session_started(session, source)
        )
    if event == HookEvent.PRE_COMPACT:
        session_hooks.compacting(session, trigger=str(hook_input.get("trigger") or ""))
        return None
    if event == HookEvent.STOP:
        cap = hooks.stop_block_cap(env)
        messages = session_hooks.turn_ended(
            session,
            via=str(HookEvent.STOP),
            gate=lambda current: hooks.stop_gate(hook_input, current, cap=cap),
        )
        if messages is None:  # the turn is over: a finished worker may now be closed
            from legion.daemon_link import turn_ended

            turn_ended(env)
        return hooks.stop_answer(messages)
    if event == HookEvent.USER_PROMPT_SUBMIT:
        messages = session_hooks.prompt_submitted(session, via=str(HookEvent.USER_PROMPT_SUBMIT))
        return hooks.user_prompt_answer(messages)
    return None


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    env = os.environ if env is None else env
    try:
        args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
        event = HookEvent(args.event)
        reply = answer(
            event,
            _read_input(stdin),
            inbox=_path(args.inbox, env, hooks.INBOX_ENV),
            context=_path(args.context, env, hooks.CONTEXT_ENV),
            env=env,
        )
    except Exception as exc:  # any failure: let the session go on
        stderr.write(f"legion hook: {exc}\n")
        return FAILED
    if reply is not None:
        stdout.write(json.dumps(reply, ensure_ascii=False))
        stdout.flush()
    return 0


if __name__ == "__main__":
    from legion.diagnostics.log import setup

    setup(strict=False)  # a hook never fails for its log: its stderr is the CLI's to show
    sys.exit(main())
