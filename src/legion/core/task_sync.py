"""A worker's task list mirrored into its issue: one comment Legion edits in place as the list
changes, so a person in the tracker sees how far the worker is. Pure: what the comment says,
and when it is written. The daemon's `task_sync` step (`legion.daemon.task_sync_step`) reads
the lists and writes the comment.

One comment per issue, whatever worker is on it: each worker's list replaces the last one's
(the comment names its mode). It is written at most once per `SYNC_EVERY_S` per issue (a model
ticks tasks off faster than a tracker should be written), and the last change is always
written once that time is up. When the issue is Done the comment stays: the last list."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from legion.core.marks import quoted_span
from legion.core.task_list import COMPLETED, IN_PROGRESS, Task

HEADING = "## Task list"
# Who the comment is by: Legion, as a record (`trackers.base.Comment.speaks`): edited in place,
# it may be made after a question was asked, and must never pass for the question a person's
# answer follows.
TASKS_AUTHOR = "legion-tasks"
# At most one write per issue this often.
SYNC_EVERY_S = 30.0
# What the comment shows of a list: a model may make hundreds of tasks, or one long one.
MAX_TASKS = 50
MAX_SUBJECT_CHARS = 200


def checklist(mode: str, tasks: Sequence[Task], at: str) -> str:
    """The comment: a checklist of the worker's tasks in order, with its mode and the time
    (`at`, e.g. `2026-11-30 23:10 UTC`). A task's words are the model's: each is quoted."""
    done = sum(task.status == COMPLETED for task in tasks)
    lines = [
        HEADING,
        "",
        f"The {mode} worker's tasks, {done} of {len(tasks)} done (as of {at}):",
        "",
    ]
    for task in tasks[:MAX_TASKS]:
        box = "x" if task.status == COMPLETED else " "
        now = " (in progress)" if task.status == IN_PROGRESS else ""
        lines.append(f"- [{box}] {quoted_span(task.subject, MAX_SUBJECT_CHARS)}{now}")
    if len(tasks) > MAX_TASKS:
        lines.append(f"- … and {len(tasks) - MAX_TASKS} more")
    lines += ["", "Legion keeps this comment up to date as the worker goes."]
    return "\n".join(lines)


def list_digest(mode: str, tasks: Sequence[Task]) -> str:
    """What the comment shows, less its time: a list whose digest is unchanged is not
    written again."""
    shown = "\n".join(f"{task.status}\t{task.subject}" for task in tasks)
    # A model's words may hold a lone surrogate (read from JSON): hashed as they are.
    return hashlib.sha256(f"{mode}\n{shown}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Synced:
    """The comment as last written for an issue: its id, the digest of the list it shows, and
    when (seconds since the epoch)."""

    comment_id: str
    digest: str
    at: float


def due(last: Synced | None, digest: str, now: float, every: float = SYNC_EVERY_S) -> bool:
    """Whether the list with `digest` is written now: it changed since the comment was last
    written, and that was at least `every` seconds ago (a first list at once)."""
    if last is None:
        return True
    return digest != last.digest and now - last.at >= every
