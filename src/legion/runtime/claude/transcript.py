"""Reading a Claude Code transcript (`<session id>.jsonl`) for what a supervisor needs: is the
worker mid-turn, waiting for input, or waiting on a question it asked (`AskUserQuestion`)? And
the tokens each response used.

Tolerant by design: the CLI adds line types between versions, and the last line may be torn
while it is being written. Unknown types and lines that are not JSON are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from legion.core.usage import Usage, anthropic_usage
from legion.files.worker_written import (
    Listed,
    read_transcript,
    regular_files,
    transcript_file,
    transcript_stat,
)
from legion.runtime.transcript import (
    TAIL_BYTES,
    TranscriptSummary,
    Turn,
    question_from_input,
    read_tail,
)

ASK_USER_QUESTION = "AskUserQuestion"
SHORT_TAIL_BYTES = 32 * 1024


def _content_blocks(entry: dict[str, Any]) -> list[dict[str, Any]]:
    message = entry.get("message")
    if not isinstance(message, dict):
        return []
    content = message.get("content")
    if isinstance(content, list):
        return [block for block in content if isinstance(block, dict)]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return []


# Only lines naming one of these are parsed: most of a transcript is bookkeeping
# (attachments, snapshots, request shapes) that says nothing about the turn.
_RELEVANT = ('"assistant"', '"user"', '"turn_duration"')
# How the pinned CLI records a request it could not make for want of a working credential: an
# assistant entry marked `isApiErrorMessage`, with `"error": "authentication_failed"` and its
# screen's words ("Not logged in · Please run /login", "Invalid API key · Please run /login").
_UNREACHABLE_ERRORS = frozenset({"authentication_failed"})
_UNREACHABLE_WORDS = ("Please run /login", "Invalid API key", "Not logged in")


def unreachable(entry: dict[str, Any]) -> str | None:
    """What an assistant entry says when it is the CLI's own note that it could not reach the
    model (no credential, or one refused), else None."""
    if not entry.get("isApiErrorMessage"):
        return None
    texts = [block for block in _content_blocks(entry) if block.get("type") == "text"]
    said = " ".join(str(block.get("text", "")) for block in texts).strip()
    if entry.get("error") in _UNREACHABLE_ERRORS or any(w in said for w in _UNREACHABLE_WORDS):
        return said or str(entry.get("error"))
    return None


def summarize(lines: Iterable[str]) -> TranscriptSummary:
    entries = 0
    turn = Turn.NONE
    last_tool_use: tuple[str, str, Any] | None = None  # (id, name, input)
    answered: set[str] = set()
    cannot: str | None = None  # the last entry's word that the model cannot be reached
    for line in lines:
        if not any(marker in line for marker in _RELEVANT):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a torn last line, or not JSON at all
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        if kind in ("assistant", "user"):
            cannot = unreachable(entry) if kind == "assistant" else None
        if kind == "assistant":
            entries += 1
            turn = Turn.OPEN
            for block in _content_blocks(entry):
                if block.get("type") == "tool_use":
                    last_tool_use = (
                        str(block.get("id")),
                        str(block.get("name")),
                        block.get("input"),
                    )
            message = entry.get("message")
            if isinstance(message, dict) and message.get("stop_reason") == "end_turn":
                turn = Turn.ENDED
        elif kind == "user":
            entries += 1
            turn = Turn.OPEN
            for block in _content_blocks(entry):
                if block.get("type") == "tool_result":
                    answered.add(str(block.get("tool_use_id")))
        elif kind == "system" and entry.get("subtype") == "turn_duration":
            turn = Turn.ENDED  # the interactive CLI writes this when a turn is over
    pending = None
    if last_tool_use is not None:
        tool_use_id, name, raw_input = last_tool_use
        if name == ASK_USER_QUESTION and tool_use_id not in answered:
            pending = question_from_input(tool_use_id, raw_input)
    return TranscriptSummary(entries, turn, pending, cannot)


# Summaries by transcript, kept while the file is unchanged (same size and mtime): an idle
# session's transcript does not change, and the daemon looks at every one each tick.
_SUMMARIES: dict[Path, tuple[tuple[int, int], TranscriptSummary]] = {}
_SUMMARIES_KEPT = 512


def summarize_file(path: Path) -> TranscriptSummary | None:
    """`summarize_tail`, remembered while the transcript stays as it was."""
    try:
        stat = transcript_stat(path)  # the session's: a link or a fifo there is refused
    except OSError:
        _SUMMARIES.pop(path, None)
        return None
    key = (stat.st_size, stat.st_mtime_ns)
    known = _SUMMARIES.get(path)
    if known is not None and known[0] == key:
        return known[1]
    summary = summarize_tail(path)
    if summary is not None:
        if len(_SUMMARIES) >= _SUMMARIES_KEPT:
            _SUMMARIES.clear()
        _SUMMARIES[path] = (key, summary)
    return summary


def summarize_tail(path: Path) -> TranscriptSummary | None:
    """The summary of the transcript's tail: a short one first, a longer one when the short
    one holds no message at all (one huge tool result can fill it)."""
    lines = read_tail(path, SHORT_TAIL_BYTES)
    if not lines and not _is_transcript(path):
        return None
    summary = summarize(lines)
    if summary.entries == 0:
        summary = summarize(read_tail(path, TAIL_BYTES))
    return summary


# --------------------------------------------------------------------------------------------
# Token usage
# --------------------------------------------------------------------------------------------

# Responses by transcript, kept while the file is unchanged, then read on from where it was.
_RESPONSES: dict[Path, tuple[int, int, dict[str, tuple[str, Usage]]]] = {}


def responses(path: Path) -> dict[str, tuple[str, Usage]]:
    """Each model response the transcript recorded, by its message id: (when, usage). The CLI
    writes one line per content block of a response, each with the response's usage: counted
    once. Read incrementally: a transcript only grows, so a second look reads what was added."""
    try:
        size = transcript_stat(path).st_size
    except OSError:
        return {}
    known = _RESPONSES.get(path)
    start, found = 0, {}
    if known is not None and known[0] <= size:
        start, found = known[1], dict(known[2])
    if start == size:
        return found
    try:
        data = read_transcript(path, start=start, cap=size - start, past_cap="head")
    except OSError:
        return found
    end = data.rfind(b"\n") + 1  # a torn last line is read next time, whole
    for raw in data[:end].splitlines():
        if b'"usage"' not in raw:
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if not isinstance(message, dict) or not isinstance(message.get("usage"), dict):
            continue
        key = str(message.get("id") or entry.get("requestId") or entry.get("uuid"))
        found[key] = (str(entry.get("timestamp") or ""), anthropic_usage(message["usage"]))
    _RESPONSES[path] = (size, start + end, found)
    return found


def session_usage(transcript: Path) -> list[tuple[str, Usage]]:
    """(when, usage) of every response of the session, its subagents' included."""
    files = [transcript, *subagent_transcripts(transcript)]
    return [item for path in files for item in responses(path).values()]


def _is_transcript(path: Path) -> bool:
    try:
        transcript_stat(path)
    except OSError:
        return False
    return True


def subagent_transcripts(transcript: Path) -> list[Path]:
    """The session's subagents' transcripts (regular files only, no link followed), by name."""
    root, _ = transcript_file(transcript)
    listed = regular_files(root, transcript.with_suffix("") / "subagents", ".jsonl")
    return [entry.path for entry in sorted(listed, key=_name)]


def _name(entry: Listed) -> str:
    return entry.name
