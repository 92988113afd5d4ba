"""The wake-up context an agent gets back after a resume or a compaction (pure assembly)."""

from __future__ import annotations

from pathlib import Path

from legion.bus.context import PLAN_LIMIT, Plan, WakeUp, newest_plan, wake_up_context
from legion.bus.model import Agent, AgentRole, AgentStatus, Message, MessageKind, Task


def _agent(name: str, role: AgentRole, branch: str = "legion/leg-7", id_: int = 1) -> Agent:
    return Agent(id_, "app", branch, name, role, "claude-code", "s", AgentStatus.BUSY, 1, "", "")


def _message(seq: int, sender: str, body: str, kind: MessageKind = MessageKind.SAY) -> Message:
    return Message(f"m-{seq}", seq, "app", "legion/leg-7", sender, kind, body, (), "")


def _task(id_: int, title: str, assigned: int | None = None, done: bool = False) -> Task:
    return Task(id_, "app", "legion/leg-7", None, title, assigned, "t" if done else None, "t")


def test_a_workers_context_has_the_seeds_four_sections_in_order() -> None:
    me = _agent("implement", AgentRole.IMPLEMENT)
    wake = WakeUp(
        agent=me,
        mode="implement",
        issue="LEG-7",
        plan=Plan("docs/plans/cache.md", "# Cache\n1. Key by user\n"),
        tasks=[_task(1, "Add the model", 2, done=True), _task(2, "Add the endpoint", 1)],
        recent=[
            _message(4, "app/legion/leg-7/review", "the tests\n  need a case", MessageKind.ASK),
            _message(5, "human", "ship it"),
        ],
        why="compact",
    )
    shown = wake_up_context(wake, {2: "app/legion/leg-7/plan"})
    assert shown.startswith(
        "You are @app/legion/leg-7/implement, the implement worker on app/legion/leg-7. Legion "
        "re-injects your state because your context was compacted:"
    )
    sections = [line for line in shown.splitlines() if line.startswith("## ")]
    assert sections == [
        "## Active Plan",
        "## Current Tasks",
        "## Recent Activity",
        "## Current Skill",
    ]
    assert "docs/plans/cache.md:\n# Cache\n1. Key by user" in shown
    assert "- [x] Task 1: Add the model (@plan, completed)" in shown
    assert "- [ ] Task 2: Add the endpoint (yours)  <-- current" in shown
    assert "- #4 @review (ask): the tests need a case" in shown
    assert "- #5 @human: ship it" in shown
    assert "`legion-worker` in implement mode for LEG-7" in shown


def test_the_orchestrator_gets_its_skill_and_a_worker_without_a_plan_file_its_comment() -> None:
    legion = _agent("legion", AgentRole.CONTROLLER, "main")
    shown = wake_up_context(WakeUp(legion, None, None, None, [], [], "resume"), {})
    assert "because your session was resumed" in shown
    assert "No plan file in docs/plans/." in shown and "(no tasks in this channel" in shown
    assert "You are using `legion-controller`" in shown and "(no messages yet)" in shown
    worker = _agent("plan", AgentRole.PLAN)
    shown = wake_up_context(WakeUp(worker, "plan", "LEG-7", None, [], [], "resume"), {})
    assert "the plan is the `## Plan` comment of LEG-7" in shown


def test_a_long_plan_is_cut_with_a_pointer_and_the_newest_plan_file_wins(tmp_path: Path) -> None:
    assert newest_plan(tmp_path) is None
    plans = tmp_path / "docs" / "plans"
    plans.mkdir(parents=True)
    old = plans / "old.md"
    old.write_text("old")
    new = plans / "new.md"
    new.write_text("x" * (PLAN_LIMIT + 10))
    import os

    os.utime(old, (1, 1))
    found = newest_plan(tmp_path)
    assert found is not None and found.path == "docs/plans/new.md"
    me = _agent("plan", AgentRole.PLAN)
    shown = wake_up_context(WakeUp(me, "plan", "LEG-7", found, [], [], "compact"), {})
    assert "[… the rest is in docs/plans/new.md]" in shown
    assert "x" * (PLAN_LIMIT + 1) not in shown


def test_a_planted_plan_link_fifo_or_huge_file_gives_the_daemon_nothing_of_the_machine(
    tmp_path: Path,
) -> None:
    """Issue 35: `ln -s /proc/self/environ docs/plans/z.md` must not hand the daemon's
    environment to the worker, a fifo must not hang the daemon, a huge file is not read whole."""
    import os

    workspace = tmp_path / "workspace"
    plans = workspace / "docs" / "plans"
    plans.mkdir(parents=True)
    (plans / "a.md").write_text("the real plan")
    os.utime(plans / "a.md", (1, 1))
    (plans / "z.md").symlink_to("/proc/self/environ")
    os.mkfifo(plans / "y.md")
    found = newest_plan(workspace)
    assert found is not None and found == Plan("docs/plans/a.md", "the real plan")
    with (plans / "huge.md").open("wb") as handle:
        handle.truncate(1 << 34)  # 16 GiB, sparse
    found = newest_plan(workspace)
    assert found is not None and found.path == "docs/plans/huge.md"
    assert len(found.text) <= 4 * PLAN_LIMIT + 4


def test_a_plans_folder_linked_elsewhere_is_not_read(tmp_path: Path) -> None:
    secrets = tmp_path / "home" / ".ssh"
    secrets.mkdir(parents=True)
    (secrets / "key.md").write_text("SECRET")
    workspace = tmp_path / "workspace"
    (workspace / "docs").mkdir(parents=True)
    (workspace / "docs" / "plans").symlink_to(secrets)
    assert newest_plan(workspace) is None
