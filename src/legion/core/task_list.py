"""A session's own task list, in short: how many of its tasks are done, and what is in progress.
Pure; each agent runtime reads its CLI's files into it (`AgentRuntime.task_list`), and the
wake-up context, `legion workers` and the TUI show it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TaskList:
    done: int
    total: int
    current: str | None  # what is in progress (its active form), if anything

    @property
    def progress(self) -> str:
        return f"{self.done}/{self.total}"

    def to_json(self) -> dict[str, Any]:
        return {"done": self.done, "total": self.total, "current": self.current}


def summarize_tasks(tasks: Iterable[Mapping[str, Any]]) -> TaskList | None:
    """Pure: the list's progress from its tasks' documents; None when it has none."""
    done = total = 0
    current: str | None = None
    for task in tasks:
        status = task.get("status")
        if status not in ("pending", "in_progress", "completed"):
            continue  # deleted, or no task at all
        total += 1
        done += status == "completed"
        if status == "in_progress" and current is None:
            text = task.get("activeForm") or task.get("subject")
            current = text if isinstance(text, str) and text else None
    return TaskList(done, total, current) if total else None
