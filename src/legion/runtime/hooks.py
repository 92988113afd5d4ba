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

Each hook runs `<python> -P -m legion.runtime.hook_entry EVENT [--inbox F] [--context F]`
(`hook_entry` reads the hook's input on stdin and prints the answer). The inbox and context
files are Legion's, per session, written by Legion and read (the inbox also emptied) by the
hook, under a lock.

The inbox is a JSON object:

    {"messages": [{"id": "m-1", "text": "..."}],
     "delivered": [{"id": "m-1", "via": "Stop", "at": 1700000000.0, "session_id": "..."}],
     "stop_streak": {"prompt_id": "...", "count": 1}}

`enqueue` adds a message (unless its id is queued, or delivered and not yet taken), the hook
moves what it hands to the model to `delivered`, `take_queued` takes the queued messages for
another way in (typed into an idle session), and `take_delivered` gives Legion what was
delivered and forgets it. All but the inbox file's I/O helpers at the end is pure.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

HOOK_MODULE = "legion.runtime.hook_entry"
INBOX_ENV = "LEGION_HOOK_INBOX"
CONTEXT_ENV = "LEGION_HOOK_CONTEXT"
# The CLI's own cap on consecutive Stop blocks (2.1.328: 8 are honoured, the 9th overridden),
# and the variable that changes it; the hook inherits the CLI's environment.
STOP_BLOCK_CAP_ENV = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"
DEFAULT_STOP_BLOCK_CAP = 8
HOOK_TIMEOUT_S = 30
SESSION_START_SOURCES = ("resume", "compact")

JSON = dict[str, Any]
T = TypeVar("T")


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
# The inbox
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InboxMessage:
    id: str
    text: str


@dataclass(frozen=True)
class Inbox:
    messages: tuple[InboxMessage, ...] = ()
    delivered: tuple[JSON, ...] = ()
    # The last Stop seen: its turn (`prompt_id`), and how many blocks came right before it.
    stop_prompt: str | None = None
    stop_streak: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys kept as they are

    def known_ids(self) -> set[str]:
        return {m.id for m in self.messages} | {str(d.get("id")) for d in self.delivered}


_INBOX_KEYS = ("messages", "delivered", "stop_streak")


class InboxError(ValueError):
    """The inbox file is not what Legion writes."""


def parse_inbox(text: str) -> Inbox:
    if not text.strip():
        return Inbox()
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise InboxError(f"not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise InboxError("not a JSON object")
    messages = []
    for item in raw.get("messages") or []:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise InboxError(f"a message is not {{'id', 'text'}}: {item!r}")
        messages.append(InboxMessage(str(item.get("id", "")), item["text"]))
    delivered = tuple(d for d in raw.get("delivered") or [] if isinstance(d, dict))
    streak = raw.get("stop_streak") or {}
    if not isinstance(streak, dict):
        streak = {}
    prompt = streak.get("prompt_id")
    count = streak.get("count")
    return Inbox(
        messages=tuple(messages),
        delivered=delivered,
        stop_prompt=prompt if isinstance(prompt, str) else None,
        stop_streak=count if isinstance(count, int) else 0,
        extra={k: v for k, v in raw.items() if k not in _INBOX_KEYS},
    )


def dump_inbox(inbox: Inbox) -> str:
    raw: JSON = dict(inbox.extra)
    raw["messages"] = [{"id": m.id, "text": m.text} for m in inbox.messages]
    raw["delivered"] = list(inbox.delivered)
    if inbox.stop_streak or inbox.stop_prompt is not None:
        raw["stop_streak"] = {"prompt_id": inbox.stop_prompt, "count": inbox.stop_streak}
    return json.dumps(raw, ensure_ascii=False, indent=1) + "\n"


def with_message(inbox: Inbox, message_id: str, text: str) -> Inbox | None:
    """`inbox` with the message queued; None when that id is queued or delivered already."""
    if message_id in inbox.known_ids():
        return None
    return replace(inbox, messages=(*inbox.messages, InboxMessage(message_id, text)))


def format_messages(messages: Sequence[InboxMessage]) -> str:
    """What the model is shown: the messages' texts, as Legion wrote them, a blank line apart."""
    return "\n\n".join(m.text for m in messages)


def _delivered(
    inbox: Inbox, via: HookEvent, hook_input: Mapping[str, Any], now: float
) -> tuple[JSON, ...]:
    session = hook_input.get("session_id")
    return (
        *inbox.delivered,
        *({"id": m.id, "via": str(via), "at": now, "session_id": session} for m in inbox.messages),
    )


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


def answer_stop(
    hook_input: Mapping[str, Any], inbox: Inbox, *, cap: int, now: float
) -> tuple[JSON | None, Inbox | None]:
    """The Stop hook's answer (None: let the session stop) and the inbox after it (None:
    unchanged).

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
    if not inbox.messages or streak >= cap:
        return None, (counted if streak else None)
    answer: JSON = {"decision": "block", "reason": format_messages(inbox.messages)}
    after = replace(
        counted, messages=(), delivered=_delivered(inbox, HookEvent.STOP, hook_input, now)
    )
    return answer, after


def answer_user_prompt(
    hook_input: Mapping[str, Any], inbox: Inbox, *, now: float
) -> tuple[JSON | None, Inbox | None]:
    """UserPromptSubmit: the queued messages as context of the prompt, taken from the inbox
    (None, None when none are queued)."""
    if not inbox.messages:
        return None, None
    answer = additional_context(HookEvent.USER_PROMPT_SUBMIT, format_messages(inbox.messages))
    after = replace(
        inbox,
        messages=(),
        delivered=_delivered(inbox, HookEvent.USER_PROMPT_SUBMIT, hook_input, now),
    )
    return answer, after


def answer_session_start(
    hook_input: Mapping[str, Any],
    context: str | None,
    sources: Sequence[str] = SESSION_START_SOURCES,
) -> JSON | None:
    """SessionStart: the context file's text when the session was resumed or compacted."""
    if hook_input.get("source") not in sources or not context or not context.strip():
        return None
    return additional_context(HookEvent.SESSION_START, context)


# --------------------------------------------------------------------------------------------
# The inbox file (I/O, under the inbox's lock)
# --------------------------------------------------------------------------------------------

LOCK_TIMEOUT_S = 10.0


def lock_path(inbox: Path) -> Path:
    return inbox.with_name(inbox.name + ".lock")


def update_inbox(path: Path, change: Callable[[Inbox], tuple[T, Inbox | None]]) -> T:
    """Read the inbox, apply `change` (returns a result and the new inbox, None: unchanged),
    write it back atomically, all under the inbox's lock; returns the result."""
    from legion.locking import exclusive
    from legion.statefiles import write_private

    with exclusive(lock_path(path), timeout=LOCK_TIMEOUT_S):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        result, after = change(parse_inbox(text))
        if after is not None:
            write_private(path, dump_inbox(after))
        return result


def enqueue(path: Path, message_id: str, text: str) -> bool:
    """Queue a message for the session; False when that id was queued or delivered before."""

    def change(inbox: Inbox) -> tuple[bool, Inbox | None]:
        after = with_message(inbox, message_id, text)
        return after is not None, after

    return update_inbox(path, change)


def take_queued(path: Path, via: str, session_id: str | None = None) -> list[InboxMessage]:
    """Take the queued messages for delivery another way (typed into an idle session, given
    to a resume), recorded as delivered `via` that; the hooks then no longer hand them over."""

    def change(inbox: Inbox) -> tuple[list[InboxMessage], Inbox | None]:
        if not inbox.messages:
            return [], None
        done = tuple(
            {"id": m.id, "via": via, "at": time.time(), "session_id": session_id}
            for m in inbox.messages
        )
        return list(inbox.messages), replace(
            inbox, messages=(), delivered=(*inbox.delivered, *done)
        )

    if not path.exists():
        return []
    return update_inbox(path, change)


def peek_delivered(path: Path) -> list[JSON]:
    """What the hooks handed to the model and Legion has not yet forgotten (see
    `forget_delivered`)."""

    def change(inbox: Inbox) -> tuple[list[JSON], Inbox | None]:
        return list(inbox.delivered), None

    return update_inbox(path, change)


def forget_delivered(path: Path, message_ids: set[str]) -> None:
    """Forget these delivered entries, once Legion has recorded them."""

    def change(inbox: Inbox) -> tuple[None, Inbox | None]:
        kept = tuple(d for d in inbox.delivered if str(d.get("id")) not in message_ids)
        if len(kept) == len(inbox.delivered):
            return None, None
        return None, replace(inbox, delivered=kept)

    update_inbox(path, change)


def take_delivered(path: Path) -> list[JSON]:
    """The messages the hooks handed to the model since the last call (and forget them)."""

    def change(inbox: Inbox) -> tuple[list[JSON], Inbox | None]:
        if not inbox.delivered:
            return [], None
        return list(inbox.delivered), replace(inbox, delivered=())

    return update_inbox(path, change)
