"""Claude Code's task list of a session, read from its files: what a worker is in the middle of.

Claude Code (2.1.x) keeps a session's task list, written by its TaskCreate/TaskUpdate tools, as
one JSON file per task in `$CLAUDE_CONFIG_DIR/tasks/<session id>/<n>.json` (beside a `.lock`
and a high-water mark): `{"id", "subject", "description", "activeForm", "status", "blocks",
"blockedBy"}`, status `pending`, `in_progress` or `completed`. It offers those tools only for
some models unless `CLAUDE_CODE_ENABLE_TODO_TOOLS=1` is set; a session without them has no
list, and Legion shows none. Files are read as the CLI writes them: one it is replacing, or
one that is not a task, is skipped, never an error."""

from __future__ import annotations

import json
from pathlib import Path

from legion.core.task_list import TaskList, summarize_tasks
from legion.files.worker_written import Listed, read_regular, regular_files


def task_dir(home: Path, session_id: str) -> Path:
    return home / "tasks" / session_id


# A task file is a few hundred bytes; one past this is not the CLI's, and is skipped.
TASK_FILE_BYTES = 64 * 1024


def read_tasks(home: Path, session_id: str) -> TaskList | None:
    """Session `session_id`'s task list, or None when it has none (or it cannot be read), from
    the CLI's config folder `home` (the session's own). It is the session's to write: its files
    are read without following a link, and only regular ones under `TASK_FILE_BYTES`
    (`legion.files.worker_written`)."""
    root = home
    documents = []
    for entry in sorted(regular_files(root, task_dir(home, session_id), ".json"), key=_name):
        if entry.name.startswith("."):
            continue
        try:
            document = json.loads(read_regular(root, entry.path, cap=TASK_FILE_BYTES))
        except (OSError, ValueError):
            continue
        if isinstance(document, dict):
            documents.append(document)
    return summarize_tasks(documents)


def _name(entry: Listed) -> tuple[int, str]:
    """Tasks in the order they were made: by number (`2.json` before `10.json`)."""
    stem = entry.name.removesuffix(".json")
    return (int(stem) if stem.isdigit() and len(stem) < 12 else 1 << 62), entry.name
