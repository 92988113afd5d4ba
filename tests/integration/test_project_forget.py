"""`legion project forget`: a project taken off the machine's bus (its agents, channels,
messages, tasks) leaves `legion agents`, `legion project list` and the TUI, and nothing of
another project goes with it. Real `legion`, real git, the machine's real bus."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from legion.bus import bus_path
from legion.bus.model import AgentRole, AgentStatus, Channel
from legion.bus.stored import SqliteBus, StoreBus
from legion.config import load_project
from tests.integration.test_bus_projects import new_project, ok, said
from tests.support.cli import Result, run_legion


def one_line(result: Result, code: int, fragment: str) -> None:
    assert result.returncode == code, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("legion: error: "), result.stderr
    assert fragment in lines[0], lines[0]


@pytest.fixture
def apps(tmp_path: Path) -> tuple[Path, Path]:
    """Two projects in folders of the same name (`app`, `app-2` on the bus), as two demos
    are, each with agents, messages, a task, and talk across them."""
    a, b = new_project(tmp_path / "a" / "app"), new_project(tmp_path / "b" / "app")
    said(a, "from A")
    said(b, "from B")
    said(a, "A's orchestrator", env={"LEGION_SESSION_ID": "sid-a", "LEGION_MODE": "controller"})
    said(b, "B's orchestrator", env={"LEGION_SESSION_ID": "sid-b", "LEGION_MODE": "controller"})
    bus = SqliteBus(bus_path(os.environ))
    try:
        for name, channel in (("a", Channel("app", "main")), ("b", Channel("app-2", "main"))):
            plan = bus.register_agent(
                channel, "plan", role=AgentRole.PLAN, runtime="t", session_id=f"plan-{name}"
            )
            bus.update_agent(plan.id, status=AgentStatus.IDLE)
            bus.add_task(channel, f"task of {name}", assigned_agent_id=plan.id)
        # B's orchestrator speaks to A's planner in A's channel, and A's to B's in B's.
        b_legion = bus.resolve_agent("app-2/main/legion", Channel("app-2", "main"))
        a_legion = bus.resolve_agent("app/main/legion", Channel("app", "main"))
        bus.post(b_legion.id, Channel("app", "main"), "@plan from B's orchestrator")
        bus.post(a_legion.id, Channel("app-2", "main"), "@plan from A's orchestrator")
    finally:
        bus.close()
    return a, b


def addresses(root: Path) -> list[str]:
    found = ok(run_legion("agents", "--all", "--json", cwd=root))
    assert isinstance(found, list)
    return sorted(agent["address"] for agent in found)


def test_a_forgotten_project_leaves_the_bus_and_only_it(apps: tuple[Path, Path]) -> None:
    a, b = apps
    assert addresses(a) == [
        "app-2/main/legion", "app-2/main/plan", "app/main/legion", "app/main/plan",
    ]  # fmt: skip
    listed = ok(run_legion("project", "list", "--json", cwd=a))
    assert [(p["name"], p["root"], p["agents"]) for p in listed] == [  # type: ignore[union-attr]
        ("app", str(a), 2),
        ("app-2", str(b), 2),
    ]
    forgot = ok(run_legion("project", "forget", "app-2", "--yes", "--json", cwd=a))
    # Its two agents; the messages in its channel (3) and by its agents elsewhere (1); its task.
    assert forgot == {
        "name": "app-2",
        "project_id": load_project(b).settings.project_id,
        "agents": 2,
        "messages": 4,
        "tasks": 1,
    }
    assert addresses(a) == ["app/main/legion", "app/main/plan"]
    assert [p["name"] for p in ok(run_legion("project", "list", "--json", cwd=a))] == ["app"]  # type: ignore[union-attr]
    bus = SqliteBus(bus_path(os.environ))
    try:
        assert bus.projects() == {"app": a}
        assert {m.project for m in bus.messages()} == {"app"}
        assert [m.body for m in bus.messages()] == ["from A", "A's orchestrator"]
        (task,) = bus.tasks(Channel("app", "main"))
        assert task.assigned_agent_id is not None  # A's own, still assigned
        known = {agent.id for agent in bus.agents(include_archived=True)} | {bus.human().id}
        assert {e.agent_id for e in bus.events() if e.agent_id is not None} <= known
        assert bus.pending_deliveries() == []  # none to an agent that is gone
    finally:
        bus.close()
    # The project is still a project: it comes back on the bus when it next speaks.
    assert said(b, "back")["channel"] == "app-2/main"
    text = run_legion("project", "forget", "app-2", "--yes", cwd=a)
    assert text.returncode == 0
    assert text.stdout == "Forgot project app-2: 0 agents, 1 messages, 0 tasks.\n"


def test_forget_the_project_here_or_by_its_id(apps: tuple[Path, Path]) -> None:
    a, b = apps
    assert run_legion("-C", str(b), "project", "forget", "--yes", cwd=a).returncode == 0
    assert addresses(a) == ["app/main/legion", "app/main/plan"]
    project_id = load_project(a).settings.project_id
    assert run_legion("project", "forget", project_id, "--yes", cwd=b).returncode == 0
    assert addresses(a) == []
    assert run_legion("project", "list", cwd=a).stdout == "No projects on the bus.\n"


def test_forget_refuses_in_one_line_and_forgets_nothing(apps: tuple[Path, Path]) -> None:
    a, b = apps
    before = addresses(a)
    one_line(
        run_legion("project", "forget", "app-3", "--yes", cwd=a),
        2,
        'the bus knows no project "app-3": did you mean',
    )
    one_line(run_legion("project", "forget", "app-2", cwd=a), 2, "add --yes")
    # A session never forgets a project: it could wipe what others said.
    for env in (
        {"LEGION_SESSION_ID": "sid-b", "LEGION_MODE": "implement", "LEGION_ISSUE_ID": "LEG-1"},
        {"LEGION_SESSION_ID": "sid-b", "LEGION_MODE": "controller"},
    ):
        refused = run_legion("project", "forget", "app-2", "--yes", cwd=b, env=env)
        one_line(refused, 2, "a session may not forget a project")
    # Nor while its daemon runs (its lock held), which would register its agents again.
    project = load_project(b)
    project.state_dir.mkdir(parents=True, exist_ok=True)
    with (project.state_dir / "daemon.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        running = run_legion("project", "forget", "app-2", "--yes", cwd=a)
    one_line(running, 1, 'the daemon of project "app-2" runs')
    assert f"legion -C {b} stop" in running.stderr
    assert addresses(a) == before


def test_forgetting_takes_what_belongs_to_the_project_on_either_engine(
    either_bus: StoreBus,
) -> None:
    bus = either_bus
    one, two = Channel("one", "main"), Channel("two", "main")
    bus.claim_project("id-one", "one", Path("/one"))
    bus.claim_project("id-two", "two", Path("/two"))
    a = bus.register_agent(one, "legion", role=AgentRole.CONTROLLER, runtime="t", session_id="s1")
    b = bus.register_agent(two, "plan", role=AgentRole.PLAN, runtime="t", session_id="s2")
    b_legion = bus.register_agent(
        two, "legion", role=AgentRole.CONTROLLER, runtime="t", session_id="s3"
    )
    parent = bus.add_task(two, "parent")
    bus.add_task(one, "for two's planner", assigned_agent_id=b.id)
    bus.add_task(two, "child", parent_id=parent.id, assigned_agent_id=b.id)
    bus.post(b_legion.id, one, "@legion hello from two")
    bus.post(a.id, two, "@plan hello from one")
    bus.post(a.id, one, "one to itself")
    forgotten = bus.forget_project("two")
    assert forgotten is not None
    assert (forgotten.agents, forgotten.messages, forgotten.tasks) == (2, 2, 2)
    assert [p.name for p in bus.known_projects()] == ["one"]
    assert [m.body for m in bus.messages()] == ["one to itself"]
    (task,) = bus.tasks(one)
    assert task.assigned_agent_id is None  # two's planner is gone: the task stays, unassigned
    assert [agent.address for agent in bus.agents()] == ["one/main/legion"]
    assert bus.forget_project("two") is None
    assert bus.forget_project("") is None  # the human's, who belongs to no project


def test_a_state_home_of_its_own_keeps_the_bus_and_trust_in_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`LEGION_STATE_HOME` (what `legion demo` runs under, so that removing its folder leaves
    nothing behind): the bus, the trust records and the project's state are there, none of it
    in the machine's state folder."""
    import shutil

    from legion.config.paths import state_home

    machine = state_home(os.environ)
    own = tmp_path / "demo" / "state"
    monkeypatch.setenv("LEGION_STATE_HOME", str(own))
    app = new_project(tmp_path / "demo" / "app")  # init, and its config trusted
    said(app, "hello")
    assert ok(run_legion("project", "list", "--json", cwd=app)) == [
        {"name": "app", "project_id": load_project(app).settings.project_id,
         "root": str(app), "exists": True, "agents": 0},
    ]  # fmt: skip
    assert (own / "bus.db").exists() and not machine.exists()
    # Without it, the machine's bus knows nothing of the project.
    monkeypatch.delenv("LEGION_STATE_HOME")
    assert ok(run_legion("project", "list", "--json", cwd=tmp_path)) == []
    shutil.rmtree(tmp_path / "demo")
    assert sorted(path.name for path in machine.iterdir()) == ["bus.db"]  # the last command's
