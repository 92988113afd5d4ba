"""The TUI's reads outside the bus on a real project (embedded tracker, real git, a private
tmux socket that runs nothing): the board, the action log, and why a peek cannot be had."""

from __future__ import annotations

import os
from pathlib import Path

from legion.bus.model import AgentRole, AgentStatus, Channel
from legion.bus.store import SqliteBus
from legion.core.model import Status
from legion.tui.sources import ActionLogView, Board, ProjectSources, Unavailable
from tests.conftest import LegionRunner


def sources(cwd: Path, known: dict[str, Path] | None = None) -> ProjectSources:
    env = dict(os.environ)
    env["LEGION_TMUX_SOCKET"] = str(cwd.parent / "tmux.sock")  # a tmux server nobody started
    return ProjectSources(env, cwd, lambda: known or {})


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
    bus.close()
    peek = here.peek(agent, 10)
    assert isinstance(peek, Unavailable) and "\n" not in peek.reason
    assert here.stop(agent, force=False) is False


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
