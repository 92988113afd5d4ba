"""A session's own task list: its tasks in order, how many are done, and what is in progress.
Pure; each agent runtime reads its CLI's files into it (`AgentRuntime.task_list`), and the
wake-up context, `legion workers`, the TUI and the tracker's task list comment
(`core.task_sync`) show it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# The states of a task, as Claude Code's TaskCreate/TaskUpdate and Codex's plan name them.
PENDING, IN_PROGRESS, COMPLETED = "pending", "in_progress", "completed"
_STATES = (PENDING, IN_PROGRESS, COMPLETED)


@dataclass(frozen=True, slots=True)
class Task:
    subject: str  # what the task is, in the model's words
    status: str  # pending, in_progress or completed


@dataclass(frozen=True)
class TaskList:
    done: int
    total: int
    current: str | None  # what is in progress (its active form), if anything
    tasks: tuple[Task, ...] = ()  # every task, in the list's order

    @property
    def progress(self) -> str:
        return f"{self.done}/{self.total}"

    def to_json(self) -> dict[str, Any]:
        return {"done": self.done, "total": self.total, "current": self.current}


def summarize_tasks(tasks: Iterable[Mapping[str, Any]]) -> TaskList | None:
    """Pure: the list from its tasks' documents (`subject`, `status`, `activeForm`), in their
    order; None when it has none."""
    items: list[Task] = []
    current: str | None = None
    for task in tasks:
        status = task.get("status")
        if status not in _STATES:
            continue  # deleted, or no task at all
        subject = task.get("subject")
        items.append(Task(subject if isinstance(subject, str) else "", str(status)))
        if status == IN_PROGRESS and current is None:
            text = task.get("activeForm") or subject
            current = text if isinstance(text, str) and text else None
    if not items:
        return None
    done = sum(item.status == COMPLETED for item in items)
    return TaskList(done, len(items), current, tuple(items))
