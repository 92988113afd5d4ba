"""The tests' `legion` runner (`tests/support/cli_forks.py`): a forked command is a process of
its own, as an `exec`ed one is, with the environment, folder, input and exit of its own."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support import cli_forks
from tests.support.cli import LEGION_BIN, Result, legion_process
from tests.support.waits import wait_until


def _both(args: list[str], cwd: Path, env: dict[str, str], text: str | None = None) -> list[Result]:
    """What the command does forked and `exec`ed: the same."""
    forked = legion_process(args, cwd, env, text, 30)
    execed = legion_process(args, cwd, {**env, cli_forks.ENABLED: "0"}, text, 30)
    return [forked, execed]


def test_a_forked_command_is_what_an_execed_one_is(project: Path) -> None:
    env = dict(os.environ)
    assert cli_forks.server_for(env) is not None
    create = ["issue", "create", "From stdin", "--body-file", "-"]
    created, again = _both(create, project, env, "hi\n")
    assert (created.returncode, again.returncode) == (0, 0)
    assert created.stdout == "LEG-1\n" and again.stdout == "LEG-2\n"
    shown = _both(["issue", "show", "LEG-1", "--json"], project, env)
    assert shown[0] == shown[1] and '"body": "hi\\n"' in shown[0].stdout
    # Bad input: the same one line and exit code.
    bad = _both(["issue", "show", "LEG-99"], project, env)
    assert bad[0] == bad[1] and bad[0].returncode == 2
    # Its own folder and environment, not the server's.
    elsewhere = _both(["issue", "list"], project.parent, env)
    assert elsewhere[0] == elsewhere[1] and elsewhere[0].returncode != 0
    home = _both(["config", "--json"], project, {**env, "LEGION_WIP_LIMIT": "7"})
    assert home[0] == home[1] and '"value": 7' in home[0].stdout


def test_what_changes_how_python_starts_is_execed(tmp_path: Path) -> None:
    assert cli_forks.server_for({**os.environ, "PYTHONPATH": str(tmp_path)}) is None
    assert cli_forks.server_for({**os.environ, "LANG": "xx_YY.UTF-8"}) is None
    assert cli_forks.server_for({**os.environ, cli_forks.ENABLED: "0"}) is None
    # Read by Legion on import: a fork would run unarmed.
    assert cli_forks.server_for({**os.environ, "LEGION_TEST_KILL_AT": "merge_after_git"}) is None


def test_a_forked_command_that_outlives_its_time_is_killed(project: Path) -> None:
    server = cli_forks.server_for(dict(os.environ))
    assert server is not None
    argv = [str(LEGION_BIN), "log", "--follow"]
    with pytest.raises(subprocess.TimeoutExpired) as timed_out:
        server.run(argv, project, dict(os.environ), None, 1)
    assert timed_out.value.timeout == 1
    # Killed, and reaped by the server.
    pid = timed_out.value.pid  # type: ignore[attr-defined]
    wait_until("the command is gone", lambda: not Path(f"/proc/{pid}").exists(), timeout=10)


def test_the_shared_server_stops_and_the_next_command_starts_another(project: Path) -> None:
    """`bench/soak.py` stops its own runner before it looks for processes left behind."""
    env = dict(os.environ)
    server = cli_forks.server_for(env)
    assert server is not None
    first = server._proc
    cli_forks.ForkServer.stop_shared()
    assert first.poll() is not None  # ended, and waited for
    listed = legion_process(["issue", "list"], project, env, None, 30)
    assert listed.returncode == 0, listed.stderr
    again = cli_forks.server_for(env)
    assert again is not None and again._proc is not first and again._proc.poll() is None
