"""The TUI's reads outside the bus on a real project (embedded tracker, real git, a private
tmux socket that runs nothing): the board, the action log, and why a peek cannot be had."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from legion.bus.model import AgentRole, AgentStatus, Channel
from legion.bus.stored import SqliteBus
from legion.core.model import Status
from legion.errors import InputError
from legion.tui.commands import ServiceCommands
from legion.tui.sources import ActionLogView, Board, ProjectSources, Unavailable
from tests.support.cli import LegionRunner, git
from tests.unit.test_tui import RecordingApp, settle, until_shown


def environment(cwd: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["LEGION_TMUX_SOCKET"] = str(cwd.parent / "tmux.sock")  # a tmux server nobody started
    return env


def sources(cwd: Path, known: dict[str, Path] | None = None) -> ProjectSources:
    return ProjectSources(environment(cwd), cwd, lambda: known or {})


def commands(cwd: Path) -> ServiceCommands:
    return ServiceCommands(environment(cwd), cwd, dict)


def test_the_board_of_the_project_here(project: Path, legion: LegionRunner) -> None:
    assert legion("issue", "create", "Add a flag").returncode == 0
    assert legion("issue", "create", "Write docs", "--status", "Backlog").returncode == 0
    board = sources(project).board(None)
    assert isinstance(board, Board), board
    assert board.project == "repo"
    assert [(i.phase, i.identifier, i.worker, i.review) for i in board.issues] == [
        (Status.BACKLOG, "LEG-2", "-", "-"),
        (Status.TODO, "LEG-1", "-", "-"),
    ]


def test_the_board_says_loudly_when_workers_run_unconfined(
    project: Path, legion: LegionRunner
) -> None:
    assert legion("issue", "create", "Add a flag").returncode == 0
    env = environment(project) | {"LEGION_SANDBOX": "none"}
    board = ProjectSources(env, project, dict).board(None)
    assert isinstance(board, Board), board
    assert "sandbox NONE: sessions run unconfined (sandbox = none)" in board.warnings
    # A warning of the whole board is not a worker unknown.
    assert [i.worker for i in board.issues] == ["-"]


def test_the_board_says_what_the_egress_proxy_refused_lately(
    project: Path, legion: LegionRunner
) -> None:
    from legion.config import load_project
    from legion.proxy.egress_refusals import Refused, record_refusal
    from legion.store import open_store

    assert legion("issue", "create", "Add a flag").returncode == 0
    env = environment(project)
    store = open_store(load_project(project, env))
    record_refusal(store, Refused("s-1", "LEG-1", "pypi.org", 443))
    record_refusal(store, Refused("s-1", "LEG-1", "pypi.org", 443))
    store.close()
    board = ProjectSources(env, project, dict).board(None)
    assert isinstance(board, Board), board
    assert "egress refused LEG-1: pypi.org:443 (2 times)" in board.warnings


def test_the_board_of_a_project_the_bus_knows(
    project: Path, legion: LegionRunner, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert legion("issue", "create", "Add a flag").returncode == 0
    board = sources(elsewhere, {"repo": project}).board("repo")
    assert isinstance(board, Board) and board.issues[0].identifier == "LEG-1"


def test_outside_a_project_every_view_says_why(tmp_path: Path) -> None:
    here = sources(tmp_path)
    board = here.board(None)
    assert isinstance(board, Unavailable) and board.reason.startswith("no project here")
    assert isinstance(here.action_log(None, 10), Unavailable)
    bus = SqliteBus(tmp_path / "bus.db")
    agent = bus.register_agent(
        Channel("repo", "main"), "implement", role=AgentRole.IMPLEMENT, runtime="t", session_id="s"
    )
    peek = here.peek(agent, 10)
    assert isinstance(peek, Unavailable) and "\n" not in peek.reason
    # A kill (`legion kill`'s) says why in a line, and leaves the agent as it was.
    with pytest.raises(InputError, match="does not know where project 'repo' lives"):
        commands(tmp_path).kill(bus, agent, force=True)
    assert bus.agent(agent.id).status is agent.status
    bus.close()


def test_the_action_log_and_a_peek_without_a_window(project: Path, legion: LegionRunner) -> None:
    assert legion("issue", "create", "Add a flag").returncode == 0
    assert legion("reconcile", "--dry-run").returncode == 0
    log = sources(project).action_log(None, 10)
    assert isinstance(log, ActionLogView), log
    bus = SqliteBus(project.parent / "bus.db")
    agent = bus.register_agent(
        Channel("repo", "main"), "legion", role=AgentRole.CONTROLLER, runtime="t", session_id="s"
    )
    agent = bus.update_agent(agent.id, status=AgentStatus.IDLE)
    bus.close()
    peek = sources(project).peek(agent, 10)
    assert isinstance(peek, Unavailable)
    assert peek.reason == "@repo/main/legion has no window (its session is not running)"


def test_the_log_holds_the_projects_agents_events_among_its_actions(
    project: Path, legion: LegionRunner, tmp_path: Path
) -> None:
    from legion.backends import open_backends
    from legion.bus import bus_path
    from legion.bus.model import EventKind
    from legion.bus.sessions import register_session
    from legion.config import load_project
    from legion.store.actionlog import ActionLog, OutcomeKind

    assert legion("issue", "create", "Add a flag").returncode == 0
    loaded = load_project(project)
    bus = SqliteBus(bus_path(os.environ))
    plan = register_session(
        bus, loaded, mode="plan", session_id="sid-plan", workspace=project, runtime="t"
    )
    backends = open_backends(loaded)
    ActionLog(backends.db).append("LEG-1", "dispatch_planner", OutcomeKind.DONE, "plan started")
    backends.db.close()
    bus.update_agent(plan.id, status=AgentStatus.BLOCKED, detail="which database?")
    # Another project's agent: the bus holds every project's events, the log only this one's.
    bus.register_agent(
        Channel("elsewhere", "main"), "implement", role=AgentRole.IMPLEMENT, runtime="t",
        session_id="sid-elsewhere",
    )  # fmt: skip
    bus.close()

    log = sources(project).action_log(None, 10)
    assert isinstance(log, ActionLogView), log
    about = [(line.about, line.what, line.outcome) for line in log.lines]
    assert sorted(about) == [
        (f"@{plan.address}", "blocked", "event"),
        (f"@{plan.address}", EventKind.AGENT_REGISTERED.short_name, "event"),
        ("LEG-1", "dispatch_planner", "done"),
        ("LEG-1", "issue_create", "done"),  # the person's, by name
    ]
    # By time: the blocked event came after the pass (the registration's place beside the
    # pass's is within the action log's second).
    assert about[-1] == (f"@{plan.address}", "blocked", "event")
    assert log.lines[-1].detail == "which database?"
    assert not any("elsewhere" in line.about for line in log.lines)


def test_a_workers_task_list_is_read_from_its_sessions_own_home(
    project: Path, tmp_path: Path, legion: LegionRunner
) -> None:
    """A worker's task list is read from its session's own home in the project's state, and
    shown in `legion workers` and the TUI's peek whoever asks (the caller's own home has none)."""
    import json

    from legion.backends import open_backends, open_workers
    from legion.config import load_project
    from legion.core.model import Mode
    from legion.sessions.registry import Registry

    loaded = load_project(project)
    home = loaded.state_dir / "cli" / "claude-code" / "sessions" / "sid-impl"  # its own
    tasks = home / "tasks" / "sid-impl"
    tasks.mkdir(parents=True)
    for n, (status, form) in enumerate(
        [("completed", "Reading"), ("in_progress", "Writing the parser"), ("pending", "Docs")], 1
    ):
        document = {"id": str(n), "subject": form, "activeForm": form, "status": status}
        (tasks / f"{n}.json").write_text(json.dumps(document))
    backends = open_backends(loaded)
    try:
        record = Registry(backends.db).start(
            "LEG-1", Mode.IMPLEMENT, "sid-impl", "leg-1-implement", project
        )
        found = open_workers(loaded, backends, dict(os.environ)).roster.task_list(record)
    finally:
        backends.db.close()
    assert found is not None and (found.progress, found.current) == ("1/3", "Writing the parser")
    shown = json.loads(legion("workers", "--json").stdout)
    assert shown[0]["tasks"] == {"done": 1, "total": 3, "current": "Writing the parser"}


def test_the_tuis_dispatch_refuses_what_legion_dispatch_refuses(
    project: Path, legion: LegionRunner
) -> None:
    """The TUI's `d` and `legion dispatch` are one function: a blocked issue is refused in the
    same words, before any session is started."""
    from legion.core.model import Mode
    from legion.errors import InputError

    assert legion("issue", "create", "First").returncode == 0
    assert legion("issue", "create", "Second", "--blocked-by", "LEG-1").returncode == 0
    cli = legion("dispatch", "LEG-2", "plan")
    try:
        commands(project).dispatch("repo", "LEG-2", Mode.PLAN)
    except InputError as refused:
        assert cli.stderr.strip() == f"legion: error: {refused}"
    else:
        raise AssertionError("the TUI started a worker on a blocked issue")


def test_a_project_is_the_one_its_name_on_the_bus_means_never_another(
    project: Path, tmp_path: Path
) -> None:
    """The board's project may be the one here; a command names a project and gets that one
    or a refusal, never the project that happens to be here."""
    from legion.errors import ConflictError
    from legion.tui.projects import NO_PROJECT, ProjectFinder

    here = ProjectFinder(environment(project), project, dict)
    assert here.find(None).root.resolve() == project.resolve()
    assert here.named("repo").settings.project_id == here.find(None).settings.project_id
    with pytest.raises(ConflictError, match="project ghost's folder is not known"):
        here.named("ghost")
    outside = tmp_path / "outside"
    outside.mkdir()
    with pytest.raises(ConflictError) as refused:
        ProjectFinder(environment(outside), outside, dict).find(None)
    assert str(refused.value) == NO_PROJECT


def test_the_board_says_which_prs_were_merged_or_closed(project: Path) -> None:
    from legion.backends import open_backends
    from legion.config import load_project

    backends = open_backends(load_project(project))
    backends.tracker.create_issue("Merged work")
    backends.tracker.create_issue("Dropped work", status=Status.IN_PROGRESS)
    for n in (1, 2):
        git(project, "switch", "--quiet", "-c", f"feature-{n}")
        (project / f"f{n}.txt").write_text(f"{n}\n")
        git(project, "add", f"f{n}.txt")
        git(project, "commit", "--quiet", "-m", f"work {n}")
        git(project, "switch", "--quiet", "main")
        backends.forge.create_pr(f"LEG-{n}", f"feature-{n}")
    backends.forge.add_review("1", "approved", body="", author="person")
    backends.forge.merge("1")
    backends.tracker.set_status("LEG-1", Status.DONE)
    with backends.db.write() as conn:  # the embedded forge has no `close`: as a person would
        conn.execute("UPDATE pull_requests SET state = 'closed' WHERE number = 2")
    backends.db.close()
    board = sources(project).board(None)
    assert isinstance(board, Board), board
    assert {i.identifier: i.review for i in board.issues} == {
        "LEG-1": "#1 merged",  # Done: looked up for the board alone
        "LEG-2": "#2 closed",  # no PR to the decision table, but said
    }

    async def scenario() -> None:  # as the human sees it: F4
        bus_file = project.parent / "tui-bus.db"
        SqliteBus(bus_file).close()
        app = RecordingApp(lambda: SqliteBus(bus_file), sources(project), commands(project))
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("f4")
            await until_shown(pilot, app, "LEG-1  -  #1 merged", "LEG-2  -  #2 closed")

    asyncio.run(scenario())
