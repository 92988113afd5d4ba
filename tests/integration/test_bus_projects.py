"""A project on the bus is its project id: two repositories in folders of the same name (every
`legion demo` is a folder called `repo`) are two projects, each with a name of its own (`app`,
`app-2`) that addresses, channels, the TUI's board and `kill` resolve to. Real `legion`, real
git, the machine's real bus (SQLite)."""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from pathlib import Path

import pytest

from legion.bus import bus_path
from legion.bus import schema as bus_schema
from legion.bus.model import AgentRole, AgentStatus, Channel
from legion.bus.stored import SqliteBus
from legion.config import load_project
from legion.tui.sources import Board, ProjectSources, Unavailable
from tests.support.cli import Result, git, run_legion, write_trusted_config


def one_line_error(result: Result, fragment: str) -> None:
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("legion: error: "), result.stderr
    assert fragment in lines[0], lines[0]


def new_project(folder: Path) -> Path:
    """A repository with one commit, `legion init`ed, its tmux server a private one."""
    folder.mkdir(parents=True)
    git(folder, "init", "--quiet")
    (folder / "README.md").write_text("# app\n", encoding="utf-8")
    git(folder, "add", "README.md")
    git(folder, "commit", "--quiet", "-m", "initial")
    assert run_legion("init", cwd=folder).returncode == 0
    config = folder / ".legion" / "config.toml"
    socket = folder.parent / "tmux.sock"
    write_trusted_config(folder, config.read_text() + f'tmux_socket = "{socket}"\n')
    return folder


def ok(result: Result) -> object:
    assert result.returncode == 0, result
    return json.loads(result.stdout)


def said(root: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    found = ok(run_legion("say", *args, "--json", cwd=root, env=env))
    assert isinstance(found, dict)
    message = found["message"]
    assert isinstance(message, dict)
    return message


def bodies(root: Path, *args: str) -> list[str]:
    found = ok(run_legion("messages", "--json", *args, cwd=root))
    assert isinstance(found, list)
    return [m["body"] for m in found]


@pytest.fixture
def apps(tmp_path: Path) -> tuple[Path, Path]:
    return new_project(tmp_path / "a" / "app"), new_project(tmp_path / "b" / "app")


def test_two_projects_in_folders_of_the_same_name_are_two_projects(apps: tuple[Path, Path]) -> None:
    a, b = apps
    assert said(a, "from A")["channel"] == "app/main"
    assert said(b, "from B")["channel"] == "app-2/main"
    assert said(b, "B again")["channel"] == "app-2/main"  # kept once given
    assert bodies(a) == ["from A"]
    assert bodies(b) == ["from B", "B again"]

    # Each project's orchestrator is its own agent; `@legion` is the one of the project here.
    ca = {"LEGION_SESSION_ID": "sid-a", "LEGION_MODE": "controller"}
    cb = {"LEGION_SESSION_ID": "sid-b", "LEGION_MODE": "controller"}
    assert said(a, "A's orchestrator", env=ca)["sender"] == "app/main/legion"
    assert said(b, "B's orchestrator", env=cb)["sender"] == "app-2/main/legion"
    wakes = ok(run_legion("say", "@legion ping", "--json", cwd=b))
    assert isinstance(wakes, dict) and wakes["wakes"] == ["app-2/main/legion"]
    assert "ping" not in " ".join(bodies(a))
    agents = ok(run_legion("agents", "--json", cwd=a))
    assert isinstance(agents, list)
    assert sorted(x["address"] for x in agents) == ["app-2/main/legion", "app/main/legion"]

    bus = SqliteBus(bus_path(os.environ))
    try:
        assert bus.projects() == {"app": a, "app-2": b}
        # `kill` ends the agent of the project named, found where that project lives.
        ids = {}
        for name, channel in (("a", Channel("app", "main")), ("b", Channel("app-2", "main"))):
            plan = bus.register_agent(
                channel, "plan", role=AgentRole.PLAN, runtime="t", session_id=f"plan-{name}"
            )
            ids[name] = bus.update_agent(plan.id, status=AgentStatus.IDLE).id
        killed = ok(run_legion("kill", "app-2/main/plan", "--json", cwd=a))
        assert isinstance(killed, dict) and killed["address"] == "app-2/main/plan"
        assert bus.agent(ids["a"]).status is AgentStatus.IDLE
        assert bus.agent(ids["b"]).status is AgentStatus.FAILED
    finally:
        bus.close()

    # The TUI's board of each name is that project's, wherever the TUI was opened.
    def known() -> dict[str, Path]:
        opened = SqliteBus(bus_path(os.environ))
        try:
            return opened.projects()
        finally:
            opened.close()

    here = ProjectSources(dict(os.environ), a, known)
    for name, root in (("app", a), ("app-2", b)):
        board = here.board(name)
        assert isinstance(board, Board), board
        assert board.project == name
        found = here.project(name)
        assert not isinstance(found, Unavailable) and found.root == root


def test_a_channel_of_no_project_is_refused(apps: tuple[Path, Path]) -> None:
    a, _ = apps
    said(a, "hello")
    one_line_error(run_legion("say", "--channel", "ghost/main", "hi", cwd=a), "no project 'ghost'")
    one_line_error(run_legion("messages", "--channel", "nothere/main", cwd=a), "no project")
    one_line_error(run_legion("task", "list", "--channel", "nothere/main", cwd=a), "no project")
    assert bodies(a) == ["hello"]
    # A project known to the bus, on a branch nobody spoke on yet: quiet, not an error.
    quiet = run_legion("messages", "--channel", "app/elsewhere", cwd=a)
    assert quiet.returncode == 0 and "No messages in app/elsewhere" in quiet.stdout


def test_an_older_bus_keeps_its_messages_with_the_project_that_recorded_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bus.db"
    every = bus_schema.MIGRATIONS
    monkeypatch.setattr(bus_schema, "MIGRATIONS", every[:2])  # the bus before project ids
    with sqlite3.connect(path) as conn:
        conn.executescript("PRAGMA journal_mode = WAL;")
    SqliteBus(path).close()
    with sqlite3.connect(path) as conn:  # as the previous release wrote them
        conn.executescript(
            "INSERT INTO projects (name, root, updated_at) "
            "VALUES ('app', '/b/app', '2026-01-01T00:00:00.000Z');"
            "INSERT INTO agents (project, branch, name, role, runtime, status, created_at, "
            "updated_at) VALUES ('app', 'main', 'legion', 'controller', 'claude-code', 'idle', "
            "'2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');"
            "INSERT INTO messages (id, project, branch, sender_id, sender, kind, body, "
            "created_at) VALUES ('m-1', 'app', 'main', 2, 'app/main/legion', 'say', 'before', "
            "'2026-01-01T00:00:00.000Z');"
            # a project whose root an older Legion never recorded (only a human said something)
            "INSERT INTO messages (id, project, branch, sender_id, sender, kind, body, "
            "created_at) VALUES ('m-2', 'repo', 'main', 1, 'human', 'say', 'orphan', "
            "'2026-01-01T00:00:00.000Z');"
        )
    monkeypatch.setattr(bus_schema, "MIGRATIONS", every)
    bus = SqliteBus(path)
    try:
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == len(every)
        assert [m.id for m in bus.messages()] == ["m-1", "m-2"]
        first, second, third = (str(uuid.uuid4()) for _ in range(3))
        # Another project in a folder called `app` does not inherit the old one's channel...
        assert bus.claim_project(first, "app", Path("/a/app")) == "app-2"
        # ...the project at the recorded root does, messages and agents with it,
        assert bus.claim_project(second, "app", Path("/b/app")) == "app"
        assert [m.body for m in bus.messages(channel=Channel("app", "main"))] == ["before"]
        assert [a.address for a in bus.agents()] == ["app/main/legion"]
        # and a name only old messages use is nobody's new name.
        assert bus.claim_project(third, "repo", Path("/c/repo")) == "repo-2"
        # A name, once given, stays, also when the project moves.
        assert bus.claim_project(first, "app", Path("/moved/app")) == "app-2"
        assert bus.projects() == {
            "app": Path("/b/app"),
            "app-2": Path("/moved/app"),
            "repo-2": Path("/c/repo"),
        }
    finally:
        bus.close()


def test_a_late_codex_session_is_registered_as_codex(tmp_path: Path) -> None:
    root = new_project(tmp_path / "app")
    from legion.sessions.registry import Registry
    from legion.store.sqlite import SqliteStore

    project = load_project(root)
    worktree = tmp_path / "wt"
    git(root, "worktree", "add", "-q", "-b", "legion/LEG-1", str(worktree))
    db = SqliteStore(project.db_path, create=False)
    try:  # as the worker manager records a Codex worker it starts
        from legion.core.model import Mode

        Registry(db).start("LEG-1", Mode.IMPLEMENT, "sid-codex", "w", worktree, "codex")
    finally:
        db.close()
    env = {"LEGION_SESSION_ID": "sid-codex", "LEGION_MODE": "implement"}
    # The session was not on the bus when it first spoke: it is registered now, as Codex.
    assert said(worktree, "starting", env=env)["sender"] == "app/legion/LEG-1/implement"
    # A session the registry never saw runs on what the settings give its role.
    controller = {"LEGION_SESSION_ID": "sid-c", "LEGION_MODE": "controller"}
    said(root, "here", env=controller | {"LEGION_RUNTIMES": "controller=codex"})
    agents = ok(run_legion("agents", "--json", cwd=root))
    assert isinstance(agents, list)
    assert {x["address"]: x["runtime"] for x in agents} == {
        "app/legion/LEG-1/implement": "codex",
        "app/main/legion": "codex",
    }
