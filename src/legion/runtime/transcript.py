"""What a supervisor reads from any runtime's transcript, in one vocabulary: is the session
mid-turn, waiting for input, or waiting on a question it asked (`TranscriptSummary`)? And
reading a transcript's tail, whole lines only. Each runtime parses its own CLI's format
(`legion.runtime.claude.transcript`, `legion.runtime.codex.runtime`) into these.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from legion.files.worker_written import open_regular, read_transcript, transcript_file

# Enough for the last several turns of a busy session; the whole file can be many megabytes.
TAIL_BYTES = 512 * 1024
# What is read past a mark for a typed prompt: a prompt is recorded within moments of it.
RECORDS_BYTES = 8 * 1024 * 1024
# How much of a typed prompt's end is looked for in the transcript (`prompt_fingerprint`).
FINGERPRINT_CHARS = 48


@dataclass(frozen=True, slots=True)
class QuestionItem:
    question: str
    header: str
    options: tuple[str, ...]
    multi_select: bool


@dataclass(frozen=True, slots=True)
class PendingQuestion:
    tool_use_id: str
    items: tuple[QuestionItem, ...]

    @property
    def text(self) -> str:
        return " / ".join(item.question for item in self.items)


def question_from_input(tool_use_id: str, raw: Any) -> PendingQuestion:
    """A question call's input (`AskUserQuestion`'s: its questions, each with its header and
    options) in this vocabulary; what is not in that shape is left out."""
    items = []
    questions = raw.get("questions") if isinstance(raw, dict) else None
    for item in questions if isinstance(questions, list) else []:
        if not isinstance(item, dict):
            continue
        options = item.get("options")
        labels = tuple(
            str(option.get("label", ""))
            for option in (options if isinstance(options, list) else [])
            if isinstance(option, dict)
        )
        items.append(
            QuestionItem(
                question=str(item.get("question", "")),
                header=str(item.get("header", "")),
                options=labels,
                multi_select=bool(item.get("multiSelect", False)),
            )
        )
    return PendingQuestion(tool_use_id, tuple(items))


class Turn(Enum):
    NONE = "none"  # nothing said yet
    OPEN = "open"  # the model is working (or about to)
    ENDED = "ended"  # the model finished its turn and waits for input


@dataclass(frozen=True, slots=True)
class TranscriptSummary:
    entries: int
    turn: Turn
    pending_question: PendingQuestion | None
    # What the CLI said when its last request could not reach the model for want of a working
    # credential ("Not logged in · Please run /login"): it waits for a person to fix that, so
    # the session will do nothing however long it is left. None when its last word was not that.
    unreachable: str | None = None


def read_tail(path: Path, max_bytes: int = TAIL_BYTES) -> list[str]:
    """The transcript's last lines (whole lines only); [] when it does not exist or is refused
    (a link, a fifo, a device planted by the session: `transcript_file`)."""
    try:
        root, below = transcript_file(path)
        fd = open_regular(root, below)
    except OSError:
        return []
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - max_bytes)
        os.lseek(fd, start, os.SEEK_SET)
        data = os.read(fd, max_bytes)
    except OSError:
        return []
    finally:
        os.close(fd)
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[1:] if start > 0 else lines  # the first line was probably cut


def prompt_fingerprint(text: str) -> str:
    """What shows that a session took a typed prompt: the prompt's last words, whitespace
    collapsed. The end, because a CLI records a skill's arguments apart from its name
    (`/legion-controller x` becomes a command name and `x`); collapsed, because it may
    reflow what was typed."""
    return " ".join(text.split())[-FINGERPRINT_CHARS:]


def records_prompt(path: Path, mark: int, fingerprint: str) -> bool:
    """Whether the transcript's whole lines written past byte `mark` record a prompt ending in
    `fingerprint` (in any of a line's JSON strings, whitespace collapsed). Growth alone is no
    proof: a CLI can still be writing the last turn's tail when a prompt is typed, and drop the
    prompt's Enter meanwhile."""
    try:
        data = read_transcript(path, start=mark, cap=RECORDS_BYTES, past_cap="head")
    except OSError:
        return False
    for line in data.split(b"\n")[:-1]:  # the last piece is a line still being written, or ""
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if any(fingerprint in " ".join(text.split()) for text in _strings(entry)):
            return True
    return False


def _strings(value: Any) -> list[str]:
    """Every string in a parsed JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []
