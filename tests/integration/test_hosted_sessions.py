"""A session starts only under a daemon: it alone holds the model key and Legion's state, so a
start with none running is refused in one line and leaves nothing behind, a reconcile pass run
by hand defers its starts, and `legion start --mode manual` hosts sessions without a controller
or a reconcile pass of its own. The real `legion`, daemon, tmux (a private server), git and
SQLite; the real Claude Code CLI is never reached."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import LEGION_BIN, Result, run_legion
from tests.support.processes import sleeping
from tests.support.tmux import start_environment
from tests.support.waits import wait_for_ticks, wait_until


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """What `legion start` would run with (`start_environment`), and a `claude` that is there
    (it is never run: every start here is refused or never made)."""
    claude = tmp_path / "bin" / "claude"
    claude.parent.mkdir()
    claude.write_text("#!/bin/sh\necho '2.1.328 (Claude Code)'\n")
    claude.chmod(0o755)
    with start_environment(tmp_path) as values:
        yield values | {"LEGION_CLAUDE_BIN": str(claude)}


def legion(project: Path, env: dict[str, str], *args: str) -> Result:
    return run_legion(*args, cwd=project, env=env)


def test_a_start_with_no_daemon_is_refused_in_one_line_and_leaves_nothing(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    assert legion(project, env, "issue", "create", "Something").returncode == 0
    for args in (("dispatch", "LEG-1", "plan"), ("resume", "LEG-1", "plan", "--prompt", "go on")):
        result = legion(project, env, *args)
        assert result.returncode == 1, result
        [line] = result.stderr.splitlines()
        assert "no daemon runs for" in line and "`legion start`" in line, line
        assert "--mode manual" in line
    assert not (tmp_path / "workspaces").exists()  # no workspace made
    assert json.loads(legion(project, env, "workers", "--json").stdout) == []
    shown = json.loads(legion(project, env, "issue", "show", "LEG-1", "--json").stdout)
    assert shown["labels"] == [] and shown["status"] == "Todo"


def test_a_start_waits_for_a_starting_daemon_to_serve_sessions(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """A daemon holds its lock before its relay and model proxy are up; a session started in
    between would find no proxy and be given the model key. Here one holds the lock, says its
    pid and never says it serves, then stops: `legion status` says it is starting, and the
    start waited for it, then was refused."""
    assert legion(project, env, "issue", "create", "Something").returncode == 0
    config = json.loads(legion(project, env, "config", "--json").stdout)
    state = Path(config["settings"]["state_dir"]["value"])
    starting = (  # holds the lock until its standard input is closed
        "import fcntl, os, sys\n"
        "lock = open(sys.argv[1] + '/daemon.lock', 'a')\n"
        "fcntl.flock(lock, fcntl.LOCK_EX)\n"
        "open(sys.argv[1] + '/daemon.pid', 'w').write(f'{os.getpid()} manual\\n{sys.argv[2]}\\n')\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", starting, str(state), str(project)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        status = json.loads(legion(project, env, "status", "--json").stdout)["daemon"]
        assert status["pid"] == holder.pid and status["serving"] is False, status
        shown = legion(project, env, "status").stdout.splitlines()[0]
        assert f"running (pid {holder.pid}), starting:" in shown, shown
        start = subprocess.Popen(
            [str(LEGION_BIN), "dispatch", "LEG-1", "plan"],
            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        # It waits for the daemon: seen asleep between its looks (however long a loaded machine
        # takes it to get there), and still there a moment later.
        wait_until("the start waiting", lambda: sleeping(start.pid), timeout=60, interval=0.02)
        time.sleep(0.5)
        assert start.poll() is None
        assert holder.stdin is not None
        holder.stdin.close()  # the daemon stops
        out, err = start.communicate(timeout=60)
    finally:
        holder.kill()
        holder.wait()
    assert start.returncode == 1, (out, err)
    [line] = err.splitlines()
    assert "stopped as it started" in line, line
    assert not (tmp_path / "workspaces").exists()
    assert json.loads(legion(project, env, "workers", "--json").stdout) == []


def test_a_reconcile_pass_by_hand_with_no_daemon_defers_its_starts(
    project: Path, env: dict[str, str]
) -> None:
    assert legion(project, env, "issue", "create", "Something").returncode == 0
    outcomes = json.loads(legion(project, env, "reconcile", "--json").stdout)
    (planner,) = [o for o in outcomes if o["action"] == "dispatch_planner"]
    assert planner["outcome"] == "deferred", planner
    assert "no daemon runs to host the worker (`legion start`)" in planner["detail"]
    assert json.loads(legion(project, env, "workers", "--json").stdout) == []


def test_a_daemon_in_manual_mode_hosts_and_never_dispatches(
    project: Path, env: dict[str, str]
) -> None:
    assert legion(project, env, "issue", "create", "Waits for a human").returncode == 0
    argv = [str(LEGION_BIN), "start", "--foreground", "--mode", "manual", "--tick", "0.2"]
    daemon = subprocess.Popen(
        argv, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        status = wait_until(
            "the daemon",
            lambda: (
                (s := json.loads(legion(project, env, "status", "--json").stdout))
                and s["daemon"]["pid"]
                and s
            ),
        )
        assert status["daemon"]["pid"] == daemon.pid
        assert status["controller"]["state"] == "none (manual mode)"
        config = json.loads(legion(project, env, "config", "--json").stdout)
        state = Path(config["settings"]["state_dir"]["value"])
        wait_for_ticks(state / "heartbeat", 5, timeout=30)
        log = json.loads(legion(project, env, "log", "-n", "100", "--json").stdout)
        assert [e["detail"] for e in log if e["action"] == "daemon_start"] == [
            f"pid {daemon.pid}, manual mode"
        ]
        assert not [e for e in log if e["action"].startswith("dispatch")], log
        assert json.loads(legion(project, env, "workers", "--json").stdout) == []
        # A reconcile pass by hand may start workers now: a daemon hosts them.
        dry = json.loads(legion(project, env, "reconcile", "--dry-run", "--json").stdout)
        (planner,) = [o for o in dry if o["action"] == "dispatch_planner"]
        assert "no daemon" not in planner["detail"]
    finally:
        daemon.terminate()
        out, _ = daemon.communicate(timeout=30)
    assert "(manual mode)" in out and "Traceback" not in out
