"""The Claude Code hooks Legion installs in its sessions, and what they answer.

Legion delivers messages to a busy session at its turn boundaries, and gives a resumed or
compacted session its context back, through the CLI's hooks (docs/claude-code-cli.md,
"Hooks", says what the pinned CLI does with each answer):

- `Stop`: when the session's inbox holds messages, block the stop with them as the reason.
  The CLI then sends the model another request in the same turn, with a user message
  `"Stop hook feedback:\\n<reason>"`. The CLI honours 8 blocks in a row
  (`CLAUDE_CODE_STOP_HOOK_BLOCK_CAP`) and overrides the next, whose reason would then reach the
  model only with the next prompt; so past the cap the messages stay queued, for the idle
  wake-up.
- `UserPromptSubmit`: the inbox's messages, as `additionalContext` of the prompt (a system
  message after it).
- `SessionStart` with source `resume` or `compact`: the session's context file, as
  `additionalContext`.

Each hook runs `<python> -P -m legion.runtime.claude.hook_entry EVENT [--inbox F] [--context F]`
(`hook_entry` reads the hook's input on stdin and prints the answer). What each hook hands
over is decided by Legion's neutral session-hooks API (`legion.bus.session_hooks`), which
Codex's turn loop calls too; this module and `hook_entry` only translate Claude Code's wire
format (the hook's JSON input, its answer) and its own limit on Stop blocks. The inbox file
is `legion.bus.inbox`.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from legion.bus.inbox import Inbox, hand_over
from legion.bus.session_hooks import SESSION_START_SOURCES

HOOK_MODULE = "legion.runtime.claude.hook_entry"
INBOX_ENV = "LEGION_HOOK_INBOX"
CONTEXT_ENV = "LEGION_HOOK_CONTEXT"
# The CLI's own cap on consecutive Stop blocks (2.1.328: 8 are honoured, the 9th overridden),
# and the variable that changes it; the hook inherits the CLI's environment.
STOP_BLOCK_CAP_ENV = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"
DEFAULT_STOP_BLOCK_CAP = 8
HOOK_TIMEOUT_S = 30

JSON = dict[str, Any]


class HookEvent(StrEnum):
    STOP = "Stop"
    USER_PROMPT_SUBMIT = "UserPromptSubmit"
    SESSION_START = "SessionStart"
    PRE_COMPACT = "PreCompact"


DEFAULT_EVENTS = (HookEvent.STOP, HookEvent.USER_PROMPT_SUBMIT, HookEvent.SESSION_START)

# --------------------------------------------------------------------------------------------
# The settings
# --------------------------------------------------------------------------------------------


def hook_command(
    event: HookEvent | str,
    *,
    python: str | None = None,
    inbox: Path | None = None,
    context: Path | None = None,
) -> str:
    """The command line (run by the CLI with `/bin/sh -c`) of one hook, every word quoted.

    `-P`: the hook runs in the session's workspace, which must not shadow Legion's modules.
    """
    argv = [python or sys.executable, "-P", "-m", HOOK_MODULE, str(HookEvent(event))]
    if inbox is not None:
        argv += ["--inbox", str(inbox)]
    if context is not None:
        argv += ["--context", str(context)]
    return shlex.join(argv)


def hooks_settings(
    *,
    python: str | None = None,
    inbox: Path | None = None,
    context: Path | None = None,
    events: Iterable[HookEvent | str] = DEFAULT_EVENTS,
    session_start_sources: Sequence[str] = SESSION_START_SOURCES,
    timeout: int = HOOK_TIMEOUT_S,
) -> JSON:
    """The settings object (`{"hooks": {...}}`) that installs Legion's hooks in a session.

    Without `inbox`/`context` the hook finds its files through `LEGION_HOOK_INBOX` and
    `LEGION_HOOK_CONTEXT` in the session's environment. Pass the result (merged with any other
    settings, see `merge_settings`) as the one `--settings` of the CLI: with two `--settings`
    only the last counts.
    """
    hooks: JSON = {}
    for raw in events:
        event = HookEvent(raw)
        entry: JSON = {}
        if event == HookEvent.SESSION_START:
            if not session_start_sources:
                continue
            entry["matcher"] = "|".join(session_start_sources)
        command = hook_command(event, python=python, inbox=inbox, context=context)
        entry["hooks"] = [{"type": "command", "command": command, "timeout": timeout}]
        hooks[str(event)] = [entry]
    return {"hooks": hooks}


def merge_settings(base: Mapping[str, Any], extra: Mapping[str, Any]) -> JSON:
    """`base` with `extra` added: hook lists are concatenated per event (base's first), any
    other key of `extra` wins. Neither argument is changed."""
    merged: JSON = dict(base)
    for key, value in extra.items():
        if key == "hooks" and isinstance(merged.get("hooks"), Mapping):
            hooks = {event: list(entries) for event, entries in merged["hooks"].items()}
            for event, entries in value.items():
                hooks[event] = [*hooks.get(event, []), *entries]
            merged["hooks"] = hooks
        else:
            merged[key] = value
    return merged


# --------------------------------------------------------------------------------------------
# The answers (pure)
# --------------------------------------------------------------------------------------------


def additional_context(event: HookEvent, text: str) -> JSON:
    return {"hookSpecificOutput": {"hookEventName": str(event), "additionalContext": text}}


def stop_block_cap(env: Mapping[str, str]) -> int:
    """How many consecutive Stop blocks the CLI honours (its variable, else its default)."""
    try:
        cap = int(env.get(STOP_BLOCK_CAP_ENV, ""))
    except ValueError:
        return DEFAULT_STOP_BLOCK_CAP
    return cap if cap > 0 else DEFAULT_STOP_BLOCK_CAP


def stop_gate(
    hook_input: Mapping[str, Any], inbox: Inbox, *, cap: int
) -> tuple[bool, Inbox | None]:
    """Whether this Stop may be blocked with the queued messages, and the inbox with the
    Stop counted (None: unchanged).

    The CLI sets `stop_hook_active` on a Stop that follows a blocked one (blocked by any hook,
    the user's included), and overrides the block that would be the `cap`+1-th in a row. So
    the hook counts the Stops of the current run (`prompt_id` tells the turn), and past the
    cap leaves the messages queued for the idle wake-up: a block the CLI overrides would only
    reach the model with the next prompt.
    """
    prompt = hook_input.get("prompt_id")
    prompt = prompt if isinstance(prompt, str) else None
    if hook_input.get("stop_hook_active") is not True:
        streak = 0  # no block before this Stop
    elif prompt is not None and prompt == inbox.stop_prompt:
        streak = inbox.stop_streak + 1
    else:
        streak = 1  # at least the block that made it active
    counted = replace(inbox, stop_prompt=prompt, stop_streak=streak)
    return streak < cap, (counted if streak else None)


def stop_answer(messages: str | None) -> JSON | None:
    """Stop: block it with the messages as the reason (the turn goes on with them)."""
    return None if messages is None else {"decision": "block", "reason": messages}


def user_prompt_answer(messages: str | None) -> JSON | None:
    """UserPromptSubmit: the messages as context of the prompt."""
    return None if messages is None else additional_context(HookEvent.USER_PROMPT_SUBMIT, messages)


def session_of(hook_input: Mapping[str, Any]) -> str | None:
    session = hook_input.get("session_id")
    return session if isinstance(session, str) and session else None


def answer_stop(
    hook_input: Mapping[str, Any], inbox: Inbox, *, cap: int, now: float
) -> tuple[JSON | None, Inbox | None]:
    """The Stop hook's answer (None: let the session stop) and the inbox after it (None:
    unchanged): the queued messages, unless `stop_gate` holds them. On an inbox in memory;
    `hook_entry` gives the same answer on the file, through `session_hooks.turn_ended`."""
    messages, after = hand_over(
        inbox,
        via=str(HookEvent.STOP),
        session_id=session_of(hook_input),
        now=now,
        gate=lambda current: stop_gate(hook_input, current, cap=cap),
    )
    return stop_answer(messages), after


def answer_user_prompt(
    hook_input: Mapping[str, Any], inbox: Inbox, *, now: float
) -> tuple[JSON | None, Inbox | None]:
    """UserPromptSubmit: the queued messages as context of the prompt, taken from the inbox
    (None, None when none are queued)."""
    messages, after = hand_over(
        inbox, via=str(HookEvent.USER_PROMPT_SUBMIT), session_id=session_of(hook_input), now=now
    )
    return user_prompt_answer(messages), after


def answer_session_start(
    hook_input: Mapping[str, Any],
    context: str | None,
    sources: Sequence[str] = SESSION_START_SOURCES,
) -> JSON | None:
    """SessionStart: the context file's text when the session was resumed or compacted."""
    if hook_input.get("source") not in sources or not context or not context.strip():
        return None
    return additional_context(HookEvent.SESSION_START, context)
