"""Two hosts of one project on a real PostgreSQL store, simulated on this machine: each its own
HOME, state folder, clone of the repository, tmux server, Claude Code config and model server.
One daemon leads (it alone runs the controller); when every process of the leader's host is
killed, the other leads within the lease's time, under a new epoch, and starts the controller;
a drained host gives the lead up."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import git, run_legion
from tests.support.swarm import Daemon, Swarm, open_swarm
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

HOST_TIMEOUT = 4.0


@pytest.fixture
def project(git_repo: Path, postgres_url: str) -> Path:
    """A project made with its store in PostgreSQL, its config committed (every host's clone
    has the same project id)."""
    made = run_legion("init", cwd=git_repo, env={"LEGION_STORE": postgres_url})
    assert made.returncode == 0, made.stderr
    git(git_repo, "add", ".legion")
    git(git_repo, "commit", "--quiet", "-m", "Legion")
    return git_repo


def _on_host(made: Swarm, name: str, home: Path, postgres_url: str) -> Swarm:
    (home / "state").mkdir(parents=True, exist_ok=True)
    made.env |= {
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "LEGION_STORE": postgres_url,
        "LEGION_HOST_NAME": name,
        "LEGION_HOST_TIMEOUT": str(HOST_TIMEOUT),
    }
    return made


@pytest.fixture
def alpha(swarm: Swarm, tmp_path: Path, isolated_env: Path, postgres_url: str) -> Iterator[Swarm]:
    yield _on_host(swarm, "alpha", isolated_env, postgres_url)


@pytest.fixture
def beta(project: Path, tmp_path: Path, postgres_url: str, alpha: Swarm) -> Iterator[Swarm]:
    folder = tmp_path / "beta"
    folder.mkdir()
    home = folder / "home"
    home.mkdir()
    (home / ".gitconfig").write_text((Path(os.environ["HOME"]) / ".gitconfig").read_text())
    clone = folder / "repo"
    git(folder, "clone", "--quiet", str(project), str(clone))
    with open_swarm(folder, clone, home) as made:
        made.env["LEGION_WORKSPACE_ROOT"] = str(folder / "work spaces")
        yield _on_host(made, "beta", home, postgres_url)


def _hosts(swarm: Swarm) -> dict[str, dict[str, object]]:
    found = run_legion("hosts", "--json", cwd=swarm.repo, env=swarm.env)
    assert found.returncode == 0, found.stderr
    import json

    return {host["name"]: host for host in json.loads(found.stdout)}


def _controller_windows(swarm: Swarm) -> list[str]:
    listed = swarm.tmux("list-windows", "-a", "-F", "#{window_name}\t#{pane_dead}")
    return [line for line in listed.splitlines() if line.startswith("main\t0")]


def test_one_leads_and_the_other_takes_over_when_its_host_dies(alpha: Swarm, beta: Swarm) -> None:
    first = Daemon(alpha).start()
    try:
        wait_until("alpha leads", lambda: _hosts(alpha).get("alpha", {}).get("leader") is True)
        with Daemon(beta) as second:
            wait_until("beta joins", lambda: "beta" in _hosts(beta))
            second.ticks(2)
            hosts = _hosts(beta)
            assert hosts["alpha"]["leader"] and hosts["alpha"]["epoch"] == 1
            assert not hosts["beta"]["leader"] and hosts["beta"]["state"] == "up"
            wait_until("alpha's controller", lambda: _controller_windows(alpha))
            assert _controller_windows(beta) == []  # a follower runs no controller
            status = run_legion("status", cwd=beta.repo, env=beta.env).stdout
            assert "hosts:      alpha (up, leads" in status and "beta (up" in status

            # Every process of alpha's host dies: its daemon, its tmux server and sessions.
            assert first.proc is not None
            os.kill(first.proc.pid, signal.SIGKILL)
            first.proc.wait(10)
            alpha.tmux("kill-server")
            wait_until(
                "beta leads",
                lambda: _hosts(beta)["beta"]["leader"] is True,
                timeout=3 * HOST_TIMEOUT + 10,
            )
            assert _hosts(beta)["beta"]["epoch"] == 2
            wait_until("beta's controller", lambda: _controller_windows(beta), timeout=60)
            wait_until(
                "alpha lost",
                lambda: _hosts(beta)["alpha"]["state"] == "lost",
                timeout=2 * HOST_TIMEOUT + 10,
            )
            led = [
                e["detail"] for e in beta.json("log", "-n", "200") if e["action"] == "fleet_lead"
            ]
            assert led == ["host alpha leads (epoch 1)", "host beta leads (epoch 2)"], led

            # Drained, beta gives the lead up and stops its controller; taken back, leads.
            drained = run_legion("host", "drain", "beta", cwd=beta.repo, env=beta.env)
            assert drained.returncode == 0, drained.stderr
            wait_until(
                "beta gives up the lead",
                lambda: not _hosts(beta)["beta"]["leader"],
                timeout=2 * HOST_TIMEOUT + 10,
            )
            wait_until("beta's controller stops", lambda: not _controller_windows(beta))
            run_legion("host", "drain", "beta", "--undo", cwd=beta.repo, env=beta.env)
            wait_until(
                "beta leads again",
                lambda: _hosts(beta)["beta"]["epoch"] == 3,
                timeout=2 * HOST_TIMEOUT + 10,
            )
    finally:
        if first.proc is not None and first.proc.poll() is None:
            first.stop()
    unknown = run_legion("host", "drain", "gamma", cwd=beta.repo, env=beta.env)
    assert unknown.returncode == 2 and "no host 'gamma'" in unknown.stderr
