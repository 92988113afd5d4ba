"""A worker's Claude Code task list in `legion workers` and on its issue: the real CLI (its
TaskCreate and TaskUpdate tools, opted in with `CLAUDE_CODE_ENABLE_TODO_TOOLS=1`, since for the
newest models the CLI offers them only then) writes the list; Legion reads its files."""

from __future__ import annotations

import pytest

from legion.demo.model_server import tool_use
from tests.e2e.test_bus_wakeups import _texts, _type
from tests.fakes.model_server import text
from tests.support.swarm import Swarm, screen, window_id
from tests.support.waits import wait_until

# Every test starts its sessions by hand, under a daemon in manual mode (`host`).
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("host")]

TESTING = {"subject": "Test the parser", "description": "Tests", "activeForm": "Testing the parser"}


def test_workers_shows_a_workers_task_list_progress(swarm: Swarm) -> None:
    swarm.legion("issue", "create", "Parse it", "--status", "In Progress")
    swarm.server.add_scenario(
        "implement mode for LEG-1",
        [
            [tool_use("TaskCreate", {"subject": "Write the parser", "description": "The parser"})],
            [tool_use("TaskCreate", TESTING)],
            [tool_use("TaskCreate", {"subject": "Document it", "description": "README"})],
            [tool_use("TaskUpdate", {"taskId": "1", "status": "completed"})],
            [tool_use("TaskUpdate", {"taskId": "2", "status": "in_progress"})],
            [text("Working on the tests.")],
        ],
    )
    swarm.env["CLAUDE_CODE_ENABLE_TODO_TOOLS"] = "1"
    swarm.legion("dispatch", "LEG-1", "implement")
    worker = wait_until("idle", lambda: (w := swarm.worker("LEG-1")) and w["state"] == "idle" and w)
    assert worker["tasks"] == {"done": 1, "total": 3, "current": "Testing the parser"}
    table = swarm.legion("workers").stdout
    row = next(line for line in table.splitlines() if line.startswith("LEG-1"))
    assert "1/3" in row.split()  # the Tasks column
    header = table.splitlines()[0]
    assert "Tasks" in header
    # The daemon mirrors the list into one comment on the issue, edited in place as it goes.
    listed = wait_until(
        "the task list on the issue",
        lambda: [
            c
            for c in swarm.json("issue", "show", "LEG-1")["comments"]
            if c["body"].startswith("## Task list")
        ],
    )
    assert len(listed) == 1 and listed[0]["author"] == "legion-tasks", listed
    assert "The implement worker's tasks" in listed[0]["body"]
    assert "`Write the parser`" in listed[0]["body"], listed


def test_a_worker_without_a_task_list_shows_none(swarm: Swarm) -> None:
    swarm.legion("issue", "create", "Plan it")
    swarm.server.add_scenario("plan mode for LEG-1", [[text("Planned.")]])
    swarm.legion("dispatch", "LEG-1", "plan")
    worker = wait_until("idle", lambda: (w := swarm.worker("LEG-1")) and w["state"] == "idle" and w)
    assert worker["tasks"] is None
    row = next(line for line in swarm.legion("workers").stdout.splitlines() if "LEG-1" in line)
    assert row.split()[-1] == "-"  # no task list: the Tasks column says so


def test_a_compacted_worker_is_given_its_task_list_back(swarm: Swarm) -> None:
    swarm.legion("issue", "create", "Parse it")
    # The next prompt's scenario first: its request holds the first prompt too.
    swarm.server.add_scenario("next step", [[text("Next step done.")]], name="next")
    swarm.server.add_scenario(
        "plan mode for LEG-1",
        [
            [tool_use("TaskCreate", {"subject": "Read the grammar", "description": "Grammar"})],
            [tool_use("TaskCreate", TESTING)],
            [tool_use("TaskUpdate", {"taskId": "1", "status": "completed"})],
            [tool_use("TaskUpdate", {"taskId": "2", "status": "in_progress"})],
            [text("Planning.")],
        ],
    )
    swarm.env["CLAUDE_CODE_ENABLE_TODO_TOOLS"] = "1"
    swarm.legion("dispatch", "LEG-1", "plan")
    worker = wait_until("idle", lambda: (w := swarm.worker("LEG-1")) and w["state"] == "idle" and w)
    window = window_id(swarm, worker["window"])
    _type(swarm, window, "/compact")
    # Whatever the summary says (no scenario is the compaction's), the screen says it is done.
    wait_until("compacted", lambda: "Compacted" in screen(swarm, window), timeout=30)
    _type(swarm, window, "next step")
    wait_until("the next prompt", lambda: swarm.server.requests_for_scenario("next"), timeout=30)
    [request] = swarm.server.requests_for_scenario("next")
    context = [
        block
        for m in request.messages
        for block in _texts(m)
        if "SessionStart hook additional context" in block
    ]
    assert len(context) == 1
    assert "Your own task list (TaskList): 1/2 done; in progress: Testing the parser" in context[0]
