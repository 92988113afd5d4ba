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
import threading
from pathlib import Path

from legion.core.task_list import TaskList, summarize_tasks
from legion.files.worker_written import Listed, read_regular, regular_files


def task_dir(home: Path, session_id: str) -> Path:
    return home / "tasks" / session_id


# A task file is a few hundred bytes; one past this is not the CLI's, and is skipped.
TASK_FILE_BYTES = 64 * 1024


# The lists last read, by task folder, with the files' stats they were read at: a list whose
# files are unchanged is not read again (the daemon looks at every live worker's every few
# seconds). Bounded: the oldest go first.
_READ: dict[Path, tuple[tuple[tuple[str, int, int, int], ...], TaskList | None]] = {}
_READ_AT_MOST = 512
_READ_LOCK = threading.Lock()  # the daemon's steps and the TUI's readers share it
# The most task files of a list that are read, and their most bytes in all: a model's list is
# a handful of files of a few hundred bytes; a session that wrote thousands, or big ones,
# costs no more than this.
MAX_TASK_FILES = 500
# A task folder holding more entries than this (of any kind) is taken as holding no list: a
# session that filled it would otherwise cost the daemon a stat per entry at every look.
FOLDER_AT_MOST = 2 * MAX_TASK_FILES
MAX_LIST_BYTES = 1 << 20
# What Legion reads of a task: the rest of a file (a session's to fill) is not kept.
_FIELDS = ("subject", "status", "activeForm")


def read_tasks(home: Path, session_id: str) -> TaskList | None:
    """Session `session_id`'s task list, or None when it has none (or it cannot be read), from
    the CLI's config folder `home` (the session's own). It is the session's to write: its files
    are read without following a link, and only regular ones under `TASK_FILE_BYTES`
    (`legion.files.worker_written`), at most `MAX_TASK_FILES` of them."""
    folder = task_dir(home, session_id)
    listed = sorted(
        (
            e
            for e in regular_files(home, folder, ".json", at_most=FOLDER_AT_MOST)
            if not e.name.startswith(".")
        ),
        key=_name,
    )[:MAX_TASK_FILES]
    stamp = tuple((e.name, e.stat.st_ino, e.stat.st_mtime_ns, e.stat.st_size) for e in listed)
    with _READ_LOCK:
        kept = _READ.get(folder)
    if kept is not None and kept[0] == stamp:
        return kept[1]
    tasks = _read(home, listed)
    with _READ_LOCK:
        _READ.pop(folder, None)
        _READ[folder] = (stamp, tasks)
        while len(_READ) > _READ_AT_MOST:
            _READ.pop(next(iter(_READ)))
    return tasks


def _read(root: Path, listed: list[Listed]) -> TaskList | None:
    documents = []
    budget = MAX_LIST_BYTES
    for entry in listed:
        budget -= entry.stat.st_size
        if budget < 0:
            break
        try:
            document = json.loads(read_regular(root, entry.path, cap=TASK_FILE_BYTES))
        except (OSError, ValueError, RecursionError):  # nested past the parser's depth
            continue
        if isinstance(document, dict):
            documents.append({key: document.get(key) for key in _FIELDS})
    return summarize_tasks(documents)


def _name(entry: Listed) -> tuple[int, str]:
    """Tasks in the order they were made: by number (`2.json` before `10.json`)."""
    stem = entry.name.removesuffix(".json")
    number = stem.isascii() and stem.isdigit() and len(stem) < 12  # not `².json`
    return (int(stem) if number else 1 << 62), entry.name
