"""A daemon's tick is one list of steps, each declaring which daemons run it (`Where`); what
each role runs, in each mode, is what it ran when each role had a list of its own (issue 39):
the real daemon in this process, its store on one machine's SQLite or a fleet's PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from legion.config import load_project
from legion.daemon import Daemon, DaemonConfig
from legion.daemon.steps import Role
from tests.support.cli import run_legion
from tests.support.tmux import start_environment

ONE_MACHINE = {
    "auto": [
        "budget_stop",
        "idle_spend",
        "controller_health",
        "exited_sessions",
        "worker_health",
        "wake_controller",
        "deliver_messages",
        "worker_start",
        "reconcile",
        "wake_controller",
        "checkpoint",
        "task_sync",
        "pause_dispatch",
    ],
    "llm": [
        "budget_stop",
        "idle_spend",
        "controller_health",
        "exited_sessions",
        "worker_health",
        "wake_controller",
        "deliver_messages",
        "wake_controller",
        "checkpoint",
        "task_sync",
        "pause_dispatch",
    ],
    "manual": [
        "budget_stop",
        "idle_spend",
        "exited_sessions",
        "worker_health",
        "deliver_messages",
        "checkpoint",
        "task_sync",
        "pause_dispatch",
    ],
}
# In a fleet the leader also carries out what other hosts asked of it, and reports, last.
LEADER_IN_A_FLEET = ["host_commands", "session_reports"]
FOLLOWER = [
    "host_commands",
    "worker_start",
    "exited_sessions",
    "worker_health",
    "close_retired",
    "session_reports",
    "deliver_messages",
    "checkpoint",
    "task_sync",
    "sweep_workspaces",
]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    with start_environment(tmp_path) as values:
        yield values


def _runs(daemon: Daemon, role: Role) -> list[str]:
    return [step.name for step in daemon.steps if step.where.runs_as(role)]


@pytest.mark.parametrize("mode", ["auto", "llm", "manual"])
def test_on_one_machine_the_leader_runs_every_step_of_its_mode(
    project: Path, env: dict[str, str], mode: str
) -> None:
    daemon = Daemon(load_project(project, env=env), DaemonConfig(mode=mode), env)
    try:
        assert _runs(daemon, Role.LEADER) == ONE_MACHINE[mode]
        # Not leading yet (no lease taken): no step runs; by hand, every step of its mode.
        assert daemon._role() is (Role.LEADER if mode == "manual" else None)
    finally:
        daemon.backends.db.close()


@pytest.mark.parametrize("mode", ["auto", "llm", "manual"])
def test_in_a_fleet_the_leader_and_a_follower_run_their_own_steps(
    git_repo: Path, env: dict[str, str], postgres_url: str, mode: str
) -> None:
    env = env | {"LEGION_STORE": postgres_url}
    assert run_legion("init", cwd=git_repo, env=env).returncode == 0
    daemon = Daemon(load_project(git_repo, env=env), DaemonConfig(mode=mode), env)
    try:
        assert _runs(daemon, Role.LEADER) == ONE_MACHINE[mode] + LEADER_IN_A_FLEET
        assert _runs(daemon, Role.FOLLOWER) == FOLLOWER
        # By hand, a host runs the sessions started on it, leading or not.
        assert daemon._role() is (Role.LEADER if mode == "manual" else Role.FOLLOWER)
    finally:
        daemon.backends.db.close()
