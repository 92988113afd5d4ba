"""The `store` setting through the real `legion` CLI: a project kept in a real PostgreSQL server
is the same project from two hosts (each its own HOME and state folder, a clone of the
repository), and the store's URL, a credential, is never shown."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from legion.config import load_project
from legion.core.liveness import SessionState
from legion.core.model import Mode
from legion.fleet.hosts import Fleet
from legion.sessions.placement import HostSessions
from legion.sessions.registry import Registry
from legion.store import open_store
from legion.tui.sources import Board, ProjectSources
from tests.support.cli import git, run_legion
from tests.support.postgres import PostgresServer


def _host(tmp_path: Path, name: str, origin: Path | None = None) -> tuple[Path, dict[str, str]]:
    """A host: its HOME and state folder, and a clone of `origin` (else a new repository)."""
    home = tmp_path / name
    home.mkdir()
    env = {
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CONFIG_HOME": str(home / "config"),
    }
    repo = home / "repo"
    if origin is None:
        repo.mkdir()
        git(repo, "init", "--quiet", "--initial-branch=main")
        (repo / "README.md").write_text("# test\n", encoding="utf-8")
        git(repo, "add", "README.md")
        git(repo, "commit", "--quiet", "-m", "initial")
    else:
        git(home, "clone", "--quiet", str(origin), str(repo))
    return repo, env


def test_two_hosts_share_one_project_in_postgresql(tmp_path: Path, postgres_url: str) -> None:
    first, first_env = _host(tmp_path, "one")
    first_env["LEGION_STORE"] = postgres_url
    made = run_legion("init", cwd=first, env=first_env)
    assert made.returncode == 0, made.stderr
    git(first, "add", ".legion")
    git(first, "commit", "--quiet", "-m", "Legion")
    assert run_legion("issue", "create", "Made on one", cwd=first, env=first_env).stdout == (
        "LEG-1\n"
    )
    # Nothing of the project's records is on the host's disk.
    assert list((tmp_path / "one" / "state").rglob("legion.db")) == []

    second, second_env = _host(tmp_path, "two", origin=first)
    second_env["LEGION_STORE"] = postgres_url
    made = run_legion("issue", "create", "Made on two", cwd=second, env=second_env)
    assert (made.returncode, made.stdout) == (0, "LEG-2\n"), made.stderr
    listed = run_legion("issue", "list", "--json", cwd=first, env=first_env)
    assert [issue["title"] for issue in json.loads(listed.stdout)] == ["Made on one", "Made on two"]

    # Each worker says its host; another host's is seen as that host last reported it, and is
    # dead once that host is lost.
    store = open_store(load_project(first, {**os.environ, **first_env}))
    record = Registry(store).start(
        "LEG-1", Mode.PLAN, "sid-1", "leg-1-plan", first, runtime="claude-code", host="one"
    )
    Fleet(store).join("one", 2, 60.0)
    HostSessions(store).report("one", {record.id: (SessionState.IDLE, 5.0, None)}, {})
    [worker] = json.loads(run_legion("workers", "--json", cwd=second, env=second_env).stdout)
    assert (worker["host"], worker["state"]) == ("one", "idle")
    env_two = {**second_env, "LEGION_HOST_NAME": "two"}
    table = run_legion("workers", cwd=second, env=env_two)
    assert table.stdout.split("\n")[0].split()[:4] == ["Issue", "Mode", "Host", "State"]
    assert table.stdout.split("\n")[1].split()[:4] == ["LEG-1", "plan", "one", "idle"]
    # `legion status` and the TUI's board show the hosts: state, sessions of capacity.
    Fleet(store).join("two", 1, 60.0)
    hosts = "one (up, 1/2), two (up, 0/1)"
    status = run_legion("status", cwd=second, env=env_two)
    assert f"hosts:      {hosts}\n" in status.stdout, status.stdout
    [line] = [line for line in status.stdout.splitlines() if line.startswith("  LEG-1 ")]
    assert line.split()[:5] == ["LEG-1", "plan", "idle", "on", "one"], line
    tmux = {"LEGION_TMUX_SOCKET": str(tmp_path / "tmux.sock")}  # a server nobody started
    board = ProjectSources({**os.environ, **env_two, **tmux}, second, dict).board(None)
    assert isinstance(board, Board) and board.hosts == hosts, board
    time.sleep(0.2)  # its heartbeat older than the timeout below: lost
    lost = run_legion(
        "workers", "--json", cwd=second, env={**env_two, "LEGION_HOST_TIMEOUT": "0.1"}
    )
    assert json.loads(lost.stdout)[0]["state"] == "dead"
    store.close()

    # Without the setting, the second host has no project records of its own.
    alone = run_legion("issue", "list", cwd=second, env={**second_env, "LEGION_STORE": ""})
    assert alone.returncode == 1 and "legion init" in alone.stderr

    # `legion config` and `legion doctor` name the server, never the user or password.
    password = postgres_url.split(":")[2].split("@", maxsplit=1)[0]
    shown = run_legion("config", "--json", cwd=first, env=first_env)
    store = json.loads(shown.stdout)["settings"]["store"]
    assert store["source"] == "env" and store["value"].startswith("postgresql://127.0.0.1:")
    doctor = run_legion("doctor", "--json", cwd=first, env=first_env)
    checks = {check["name"]: check for check in json.loads(doctor.stdout)["checks"]}
    assert checks["store"]["ok"] and "PostgreSQL" in checks["store"]["detail"]
    assert checks["clock"]["ok"]
    plain = run_legion("config", cwd=first, env=first_env).stdout
    for text in (shown.stdout, doctor.stdout, plain):
        assert password not in text and "legion_test" not in text


def test_a_store_that_refuses_or_is_not_a_url_is_one_line(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    repo, env = _host(tmp_path, "one")
    url = postgres_server.database()
    assert run_legion("init", cwd=repo, env={**env, "LEGION_STORE": url}).returncode == 0
    wrong = postgres_server.url(url.rsplit("/", 1)[1], password="Wrong-Pass-123")
    for value, message in (
        (wrong, "the PostgreSQL store refused the login"),
        ("mysql://me:Wrong-Pass-123@db/legion", "must be a postgresql:// URL"),
        ("postgresql://me:Wrong-Pass-123@[::1/x", "not a valid PostgreSQL URL"),
    ):
        done = run_legion("issue", "list", cwd=repo, env={**env, "LEGION_STORE": value})
        assert done.returncode == 1, done
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Wrong-Pass-123" not in done.stderr + done.stdout
        assert "Traceback" not in done.stderr


def test_psycopg_missing_is_said_with_the_install_command(
    tmp_path: Path, postgres_url: str
) -> None:
    """A Legion installed without the `postgresql` extra, pointed at a PostgreSQL store."""
    repo, env = _host(tmp_path, "one")
    blocker = tmp_path / "no-psycopg"
    blocker.mkdir()
    # A `psycopg` that fails to import stands before the real one on the path.
    (blocker / "psycopg").mkdir()
    (blocker / "psycopg" / "__init__.py").write_text("raise ImportError('absent')\n")
    done = run_legion(
        "init", cwd=repo, env={**env, "LEGION_STORE": postgres_url, "PYTHONPATH": str(blocker)}
    )
    assert done.returncode == 1
    assert "pip install 'psycopg[binary]>=3.2,<4' 'psycopg-pool>=3.2,<4'" in done.stderr
    # Installed, the same command goes on: nothing was left half-made.
    shutil.rmtree(blocker)
    store = {**env, "LEGION_STORE": postgres_url}
    assert run_legion("init", cwd=repo, env=store).returncode == 0
    assert run_legion("issue", "create", "Now", cwd=repo, env=store).stdout == "LEG-1\n"
