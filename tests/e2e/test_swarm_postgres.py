"""The whole swarm on a PostgreSQL store: the daemon, its model proxy and relay, the
reconciler, a real controller and workers (scripted model), carrying an issue from Todo to Done
with every record of the project's in a real PostgreSQL server, and the store's URL in no
session's environment. The full cycle runs on Codex: its subject is the store, and a Codex
session costs a tenth of a Claude Code one's CPU (tests/e2e/test_swarm.py runs the same cycle
on Claude Code)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from legion.demo.swarm_script import swarm_script
from tests.fakes.responses_server import FakeResponsesServer
from tests.support.cli import run_legion
from tests.support.postgres import PostgresServer
from tests.support.proxy_watch import session_environments
from tests.support.swarm import Daemon, Swarm, assert_full_cycle, run_full_cycle
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture
def project(git_repo: Path, postgres_url: str) -> Path:
    """A project made with its store in PostgreSQL."""
    made = run_legion("init", cwd=git_repo, env={"LEGION_STORE": postgres_url})
    assert made.returncode == 0, made.stderr
    return git_repo


@pytest.fixture
def swarm_variables(postgres_url: str) -> dict[str, str]:
    return {"LEGION_STORE": postgres_url}


def test_full_cycle_on_a_postgresql_store(
    swarm: Swarm, postgres_url: str, codex_server: FakeResponsesServer
) -> None:
    swarm.env["LEGION_RUNTIME"] = "codex"  # every session, the controller's too
    codex_server.script.scenarios.extend(swarm_script(["LEG-1"], flavor="codex").scenarios)
    with session_environments(swarm.repo) as sessions:
        daemon, seen = run_full_cycle(swarm)
    assert_full_cycle(swarm, daemon, seen)
    # The records are the server's: no SQLite file was made for the project.
    assert list(Path(swarm.env["XDG_STATE_HOME"]).rglob("legion.db")) == []
    with psycopg.connect(postgres_url) as conn:
        schemas = conn.execute(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'issues'"
        ).fetchall()
        [(schema,)] = schemas
        merged = conn.execute(f"SELECT state FROM {schema}.pull_requests").fetchall()
    assert merged == [("merged",)]
    # No process of any session had the URL (it holds the password) or libpq's variable.
    password = postgres_url.split(":")[2].split("@", maxsplit=1)[0]
    everyone = [*sessions.clis.values(), *sessions.others.values()]
    modes = {environ.get("LEGION_MODE") for environ in everyone}
    assert {"controller", "plan", "implement", "review", "finish"} <= modes, modes  # all seen
    for environ in everyone:
        assert "LEGION_STORE" not in environ
        assert not any(password in value for value in environ.values())


def test_the_database_restarted_under_a_running_daemon(
    swarm: Swarm, postgres_server: PostgresServer, postgres_url: str
) -> None:
    """The PostgreSQL server stops and comes back while the daemon runs: the daemon says so
    once, in one line without the password, waits, and goes on when it answers (one more
    line); nothing written before is lost."""
    swarm.legion("issue", "create", "Before the restart")
    with Daemon(swarm, mode="manual", tick=0.5) as daemon:
        daemon.ticks(2)
        postgres_server.stop()
        try:
            wait_until(
                "the daemon says the store is unreachable",
                lambda: "cannot reach the PostgreSQL store" in daemon.output(),
                timeout=30,
            )
            daemon.ticks(1)  # a tick more, still without it: said once
        finally:
            postgres_server.start()
        wait_until(
            "the daemon says the store answers",
            lambda: "the store answers again" in daemon.output(),
            timeout=60,
        )
        swarm.legion("issue", "create", "After the restart")
        daemon.ticks(2)
        hosts = swarm.json("hosts")
        assert [host["state"] for host in hosts] == ["up"]
        output = daemon.output()
    assert output.count("cannot reach the PostgreSQL store") == 1, output
    assert output.count("the store answers again") == 1, output
    password = postgres_url.split(":")[2].split("@", maxsplit=1)[0]
    assert password not in output
    titles = [issue["title"] for issue in swarm.json("issue", "list")]
    assert titles == ["Before the restart", "After the restart"]
    logged = swarm.json("log", "-n", "50")
    assert "store" in [entry["action"] for entry in logged], logged
