"""The command Claude Code runs for Legion's hooks: `python -P -m legion.runtime.hook_entry
EVENT [--inbox FILE] [--context FILE]` (see `legion.runtime.hooks`).

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
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from legion.runtime import hooks

if TYPE_CHECKING:
    from legion.core.task_list import TaskList
from legion.runtime.hooks import HookEvent, Inbox

FAILED = 1  # never 2: see the module's docstring


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit with status 2
        raise ValueError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m legion.runtime.hook_entry", add_help=False)
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


def _read_context(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _wake_up_context(
    hook_input: Mapping[str, Any], env: Mapping[str, str], *, why: str, event: bool = False
) -> str | None:
    """The session's wake-up context, assembled now from the bus (None: the session is not an
    agent on the bus). `event`: record that the session is about to compact."""
    session = hook_input.get("session_id")
    if not isinstance(session, str) or not session:
        return None
    from legion.bus.context import gather
    from legion.bus.model import EventKind
    from legion.bus.store import open_bus

    bus = open_bus(env)
    try:
        agent = bus.agent_by_session(session)
        if agent is None:
            return None
        if event:
            trigger = hook_input.get("trigger")
            bus.record_event(
                EventKind.COMPACTION_START, agent_id=agent.id, detail=str(trigger or "")
            )
        cwd = hook_input.get("cwd")
        mode = env.get("LEGION_MODE") or None
        return gather(
            bus,
            agent,
            workspace=Path(cwd) if isinstance(cwd, str) and cwd else None,
            mode=None if mode == "controller" else mode,
            issue=env.get("LEGION_ISSUE_ID") or None,
            why=why,
            cli_tasks=_task_list(agent.runtime, env, session),
        )
    finally:
        bus.close()


def _task_list(runtime: str, env: Mapping[str, str], session: str) -> TaskList | None:
    """The session's own task list, for its wake-up context: Claude Code's (its hooks run
    this; Codex's turn loop too, and Codex keeps none)."""
    from legion.plugins import CLAUDE_CODE

    if runtime != CLAUDE_CODE:
        return None
    from legion.runtime.claude_tasks import read_tasks

    return read_tasks(env, session)


def _snapshot(hook_input: Mapping[str, Any], env: Mapping[str, str], context: Path | None) -> None:
    """PreCompact: the state as it is before the compaction, kept in the context file for the
    SessionStart that follows (used if the bus cannot be read then)."""
    text = _wake_up_context(hook_input, env, why="compact", event=True)
    if text is not None and context is not None:
        from legion.statefiles import write_private

        write_private(context, text)


def answer(
    event: HookEvent,
    hook_input: Mapping[str, Any],
    *,
    inbox: Path | None,
    context: Path | None,
    env: Mapping[str, str],
) -> dict[str, Any] | None:
    """The answer to print for `event` (None: print nothing), after updating the inbox."""
    if event == HookEvent.SESSION_START:
        if hook_input.get("source") not in hooks.SESSION_START_SOURCES:
            return None
        fresh = _wake_up_context(hook_input, env, why=str(hook_input.get("source")))
        return hooks.answer_session_start(hook_input, fresh or _read_context(context))
    if event == HookEvent.PRE_COMPACT:
        _snapshot(hook_input, env, context)
        return None
    if event not in (HookEvent.STOP, HookEvent.USER_PROMPT_SUBMIT):
        return None
    if inbox is None or not inbox.exists():
        return None  # nothing was ever queued: no lock, no file
    now = time.time()
    cap = hooks.stop_block_cap(env)

    def change(current: Inbox) -> tuple[dict[str, Any] | None, Inbox | None]:
        if event == HookEvent.STOP:
            return hooks.answer_stop(hook_input, current, cap=cap, now=now)
        return hooks.answer_user_prompt(hook_input, current, now=now)

    return hooks.update_inbox(inbox, change)


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
    sys.exit(main())
