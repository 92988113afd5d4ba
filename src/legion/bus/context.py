"""The wake-up context: what an agent is given back when it has lost its memory (a resume, a
compaction), in the seed's shape: active plan, current tasks, recent activity, current skill.

`wake_up_context` is pure; `gather` reads what it needs from the bus and the workspace. The
SessionStart hook assembles it fresh when the session resumes or has compacted, the PreCompact
hook snapshots it to the session's context file first (the fallback when the bus cannot be
read at that moment), and the daemon writes it before it resumes a session to deliver to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from legion.bus import Bus
from legion.bus.delivery_text import address_from
from legion.bus.model import Agent, AgentRole, Message, Task, TaskState
from legion.core.task_list import TaskList

PLAN_FOLDER = Path("docs") / "plans"
PLAN_LIMIT = 4000  # characters of the plan shown; the rest is a `cat` away
PLAN_BYTES = 4 * PLAN_LIMIT + 4  # read of it at most: the shown characters, in UTF-8, and one more
RECENT = 10  # messages of recent activity
LINE_LIMIT = 160


@dataclass(frozen=True)
class Plan:
    path: str  # as the agent finds it from its workspace
    text: str


@dataclass(frozen=True)
class WakeUp:
    """What the context is made of."""

    agent: Agent
    mode: str | None  # a worker's mode (LEGION_MODE); None for the orchestrator
    issue: str | None
    plan: Plan | None
    tasks: Sequence[Task]
    recent: Sequence[Message]
    why: str  # "compact", "resume", …
    # The session's own task list in its CLI (Claude Code's TaskCreate), when it keeps one.
    cli_tasks: TaskList | None = None


def _one_line(text: str, limit: int = LINE_LIMIT) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


_STATE_WORDS: dict[TaskState, str | None] = {
    TaskState.DONE: "completed",
    TaskState.ASSIGNED: None,
    TaskState.PENDING: "pending",
}


def _tasks_section(wake: WakeUp, addresses: Mapping[int, str]) -> list[str]:
    if not wake.tasks:
        return ["(no tasks in this channel: `legion task add` records them)"]
    current = next(
        (
            t.id
            for t in wake.tasks
            if t.state is TaskState.ASSIGNED and t.assigned_agent_id == wake.agent.id
        ),
        None,
    )
    lines = []
    for task in wake.tasks:
        mark = "[x]" if task.state is TaskState.DONE else "[ ]"
        who = addresses.get(task.assigned_agent_id or -1)
        if task.assigned_agent_id == wake.agent.id:
            details: list[str | None] = ["yours"]
        else:
            details = [f"@{address_from(who, wake.agent)}" if who else None]
        details.append(
            {"done": "completed", "assigned": None, "pending": "pending"}[task.state.value]
        )
        inside = ", ".join(d for d in details if d)
        suffix = f" ({inside})" if inside else ""
        pointer = "  <-- current" if task.id == current else ""
        lines.append(f"- {mark} Task {task.id}: {_one_line(task.title)}{suffix}{pointer}")
    return lines


def _skill_section(wake: WakeUp) -> str:
    if wake.agent.role is AgentRole.CONTROLLER:
        return (
            "You are using `legion-controller`: you are the project's orchestrator. Re-read the "
            "skill, then `legion state --json` and `legion messages --unread` tell you what "
            "waits for you."
        )
    issue = wake.issue or "your issue"
    mode = wake.mode or wake.agent.name
    return (
        f"You are using `legion-worker` in {mode} mode for {issue}. Re-read its SKILL.md and "
        f"workflows/{mode}.md, check what you already did (`legion issue show {issue} --json`, "
        "`git log`), and continue the workflow from there; finish with its completion protocol."
    )


def wake_up_context(wake: WakeUp, addresses: Mapping[int, str]) -> str:
    """The text re-injected into the agent's session. `addresses`: agent ids to addresses,
    for the tasks' assignees."""
    agent = wake.agent
    who = "the orchestrator" if agent.role is AgentRole.CONTROLLER else f"the {agent.name} worker"
    why = {"compact": "your context was compacted", "resume": "your session was resumed"}.get(
        wake.why, wake.why
    )
    parts = [
        f"You are @{agent.address}, {who} on {agent.channel}. Legion re-injects your state "
        f"because {why}:",
        "",
        "## Active Plan",
    ]
    if wake.plan is not None:
        shown = wake.plan.text[:PLAN_LIMIT]
        more = "" if len(wake.plan.text) <= PLAN_LIMIT else f"\n[… the rest is in {wake.plan.path}]"
        parts += [f"{wake.plan.path}:", shown.rstrip() + more]
    elif wake.issue is not None:
        parts.append(
            f"No plan file in {PLAN_FOLDER}/; the plan is the `## Plan` comment of {wake.issue} "
            f"(`legion issue comments {wake.issue} --json`)."
        )
    else:
        parts.append(f"No plan file in {PLAN_FOLDER}/.")
    parts += ["", "## Current Tasks", *_tasks_section(wake, addresses)]
    if wake.cli_tasks is not None:
        doing = wake.cli_tasks.current
        parts.append(
            f"Your own task list (TaskList): {wake.cli_tasks.progress} done"
            + (f"; in progress: {_one_line(doing)}" if doing else "")
        )
    parts += ["", "## Recent Activity"]
    if wake.recent:
        for message in wake.recent:
            sender = address_from(message.sender, agent)
            kind = "" if message.kind.value == "say" else f" ({message.kind.value})"
            parts.append(f"- #{message.seq} @{sender}{kind}: {_one_line(message.body)}")
    else:
        parts.append("(no messages yet)")
    parts += ["", "## Current Skill", _skill_section(wake)]
    return "\n".join(parts) + "\n"


def newest_plan(workspace: Path) -> Plan | None:
    """The most recently changed `docs/plans/*.md` of the workspace, if any. The workspace is
    the worker's (the daemon reads this for it): a link there is never followed, only a
    regular file is read, and only its first `PLAN_BYTES`; a refused file is named, not read."""
    from legion.files.worker_written import read_regular, regular_files

    plans = [
        (entry.stat.st_mtime, entry.path)
        for entry in regular_files(workspace, workspace / PLAN_FOLDER, ".md")
    ]
    if not plans:
        return None
    _, path = max(plans)
    shown = str(path.relative_to(workspace))
    try:
        data = read_regular(workspace, path, cap=PLAN_BYTES, past_cap="head")
    except OSError as exc:
        return Plan(shown, f"(not read: {exc.strerror or exc})")
    return Plan(shown, data.decode("utf-8", errors="replace"))


def recent_activity(bus: Bus, agent: Agent, limit: int = RECENT) -> list[Message]:
    """The channel's last messages and the last ones addressed to the agent, oldest first."""
    channel = bus.messages(channel=agent.channel, last=limit)
    addressed = bus.messages(unread_for=agent.id, last=limit)  # from other channels too
    by_seq = {m.seq: m for m in [*channel, *addressed]}
    return [by_seq[seq] for seq in sorted(by_seq)][-limit:]


def gather(
    bus: Bus,
    agent: Agent,
    *,
    workspace: Path | None,
    mode: str | None,
    issue: str | None,
    why: str,
    cli_tasks: TaskList | None = None,
) -> str:
    """The agent's wake-up context, from the bus and its workspace (and `cli_tasks`, the
    session's own task list, as its runtime read it)."""
    tasks = bus.tasks(agent.channel)
    assignees = {t.assigned_agent_id for t in tasks if t.assigned_agent_id is not None}
    addresses = (
        {a.id: a.address for a in bus.agents(include_archived=True) if a.id in assignees}
        if assignees
        else {}
    )
    plan = newest_plan(workspace) if workspace is not None else None
    recent = recent_activity(bus, agent)
    wake = WakeUp(agent, mode, issue, plan, tasks, recent, why, cli_tasks)
    return wake_up_context(wake, addresses)
