"""What the TUI's peek shows of a session: its task list in a line, its screen's last lines,
the last things said in its transcript (a Claude Code transcript or a Codex rollout). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TypeVar

from legion.core.task_list import TaskList
from legion.core.text import for_display

T = TypeVar("T")


def task_line(tasks: TaskList) -> str:
    """A session's task list in a line: `Tasks 2/5, now: Writing the parser`."""
    line = f"Tasks {tasks.progress}"
    return f"{line}, now: {tasks.current}" if tasks.current else line


def by_time(items: Iterable[T], key: Callable[[T], str]) -> list[T]:
    """`items` oldest first by their timestamp (`key`): RFC 3339 times of any precision (the
    action log's seconds, the bus's milliseconds); the order given where two are the same,
    and an unreadable one first."""

    def when(item: T) -> datetime:
        try:
            found = datetime.fromisoformat(key(item).replace("Z", "+00:00"))
        except ValueError:
            return datetime.min.replace(tzinfo=UTC)
        return found if found.tzinfo else found.replace(tzinfo=UTC)

    return sorted(items, key=when)


def last_screen_lines(captured: str, count: int) -> str:
    """The last `count` lines of a captured tmux pane, without the blank rows under the
    cursor (as `legion peek` shows it)."""
    rows = captured.splitlines()
    while rows and not rows[-1].strip():
        rows.pop()
    return "\n".join(rows[-count:])


def transcript_lines(raw_lines: Iterable[str], count: int) -> list[str]:
    """The last `count` things said in a Claude Code transcript or a Codex rollout (JSON
    lines): the user's and the assistant's text, and each tool the assistant called, one line
    each. Lines that are not JSON, or of types this does not know, are skipped (the formats
    change between versions)."""
    said: list[str] = []
    for line in raw_lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        if entry.get("type") in ("user", "assistant"):
            said += _entry_lines(entry)
        elif entry.get("type") == "response_item" and isinstance(entry.get("payload"), dict):
            said += _rollout_item_lines(entry["payload"])
    return said[-count:]


# What Codex adds to the conversation itself, before the prompt: not something anybody said.
_CODEX_CONTEXT = ("<environment_context>", "# AGENTS.md instructions", "<skill>", "<permissions")


def _rollout_item_lines(item: dict[str, object]) -> list[str]:
    """One line per text of a Codex rollout's message, or per function call."""
    if item.get("type") == "function_call":
        try:
            arguments = json.loads(str(item.get("arguments") or "{}"))
        except ValueError:
            arguments = {}
        command = arguments.get("cmd") if isinstance(arguments, dict) else None
        detail = f" {for_display(' '.join(str(command).split()))[:200]}" if command else ""
        return [f"assistant: ({item.get('name', 'tool')}){detail}"]
    role = item.get("role")
    if item.get("type") != "message" or role not in ("user", "assistant"):
        return []
    found = []
    content = item.get("content")
    for block in content if isinstance(content, list) else []:
        text = str(block.get("text", "")) if isinstance(block, dict) else ""
        if text.strip() and not text.lstrip().startswith(_CODEX_CONTEXT):
            found.append(f"{role}: {for_display(' '.join(text.split()))[:500]}")
    return found


def _entry_lines(entry: dict[str, object]) -> list[str]:
    who = str(entry.get("type"))
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    found: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and str(block.get("text", "")).strip():
            first = " ".join(str(block["text"]).split())
            found.append(f"{who}: {for_display(first)[:500]}")
        elif block.get("type") == "tool_use":
            found.append(f"{who}: ({block.get('name', 'tool')})")
    return found
