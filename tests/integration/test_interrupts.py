"""Ctrl-C stops at once (issue 24, item 12): `legion start --foreground` and `scripts/test`."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import LEGION_BIN, run_legion
from tests.support.reaper import alive

REPO_ROOT = Path(__file__).resolve().parents[2]


def slow_claude(tmp_path: Path) -> Path:
    """A Claude Code that starts and never writes its transcript: its start is awaited."""
    path = tmp_path / "fake" / "claude"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '#!/bin/sh\nif [ "$1" = "--version" ]; then echo "2.1.328 (Claude Code)"; exit 0; fi\n'
        "exec sleep 300\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def windows(socket: Path) -> list[str]:
    listed = subprocess.run(
        ["tmux", "-S", str(socket), "list-windows", "-a", "-F", "#{window_name}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return listed.stdout.split()


def test_start_in_the_foreground_stops_at_once_and_says_what_it_stops(
    project: Path, tmux_socket: Path, tmp_path: Path, isolated_env: Path
) -> None:
    (isolated_env / ".claude.json").write_text('{"hasCompletedOnboarding": true}')
    (isolated_env / ".claude").mkdir()
    (isolated_env / ".claude" / ".credentials.json").write_text("{}")  # logged in
    assert run_legion("issue", "create", "One", cwd=project).returncode == 0
    env = {**os.environ, "LEGION_CLAUDE_BIN": str(slow_claude(tmp_path)), "LEGION_TICK": "1"}
    proc = subprocess.Popen(
        [str(LEGION_BIN), "start", "--foreground"],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 40
        while not any(name.startswith("leg-1") for name in windows(tmux_socket)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        time.sleep(0.5)  # the daemon is now waiting for the worker's start (up to 30 s)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    took = time.monotonic() - sent
    assert took < 25, (took, err)  # not the 30 s the start's wait would take, loaded or not
    assert "stopping" in err, err
    assert "Traceback" not in err
    assert proc.returncode in (0, 130), (proc.returncode, err)
    assert "stopped" in out + err, (out, err)


LEAKY_TEST = """
import os, subprocess, time
from pathlib import Path

OUT = Path(__file__).parent


def test_leaks_processes(tmp_path):
    # As Legion starts them: a tmux server with an environment of its own (no test mark), in
    # the test's folder; a process in a new session; one with no environment at all.
    bare = {"PATH": os.environ["PATH"]}
    sock = tmp_path / "tmux.sock"
    subprocess.run(["tmux", "-S", str(sock), "-f", "/dev/null", "new-session", "-d", "sleep 600"],
                   check=True, env=bare)
    server = subprocess.run(["tmux", "-S", str(sock), "display", "-p", "#{pid}"],
                            capture_output=True, text=True, check=True, env=bare).stdout.strip()
    loose = subprocess.Popen(["sleep", "600"], start_new_session=True)
    bare_one = subprocess.Popen(["sleep", "600"], cwd=tmp_path, env={}, start_new_session=True)
    (OUT / "pids").write_text(f"{server} {loose.pid} {bare_one.pid}")
    if (OUT / "hang").exists():
        time.sleep(600)
"""


@pytest.mark.parametrize("ending", ["normal", "sigterm", "sigint"])
def test_a_tests_processes_end_with_it_however_the_run_ends(tmp_path: Path, ending: str) -> None:
    """A test that leaves a tmux server and a process in its own session behind: both are gone
    when the test ends, or when its run is stopped by SIGTERM or Ctrl-C mid-test."""
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "test_leaky.py").write_text(LEAKY_TEST)
    if ending != "normal":
        (inner / "hang").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEST_REAPER_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "--rootdir", str(inner), str(inner / "test_leaky.py")],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        pids_file = inner / "pids"
        deadline = time.monotonic() + 60
        while not pids_file.exists():
            assert proc.poll() is None or ending == "normal", proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        if ending != "normal":
            time.sleep(0.3)
            proc.send_signal(signal.SIGTERM if ending == "sigterm" else signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    pids = [int(pid) for pid in (inner / "pids").read_text().split()]
    left = [pid for pid in pids if alive(pid)]
    for pid in left:  # not to leave them to the next run when this fails
        os.kill(pid, signal.SIGKILL)
    assert len(pids) == 3, out
    assert left == [], out


def test_a_killed_runs_leftovers_are_swept_by_its_mark_from_outside(tmp_path: Path) -> None:
    """What `scripts/test` does after killing a pytest that did not end in time (no clean-up of
    its own ran): `python -m tests.support.reaper MARK` ends every process marked with the run's
    mark, one in a session of its own included, and nothing else."""
    mark = f"swept-{os.getpid()}-{time.monotonic_ns()}"
    marked = subprocess.Popen(
        ["sleep", "600"], env={**os.environ, "TEST_REAPER_RUN": mark}, start_new_session=True
    )
    other = subprocess.Popen(["sleep", "600"], env={**os.environ, "TEST_REAPER_RUN": "another"})
    try:
        swept = subprocess.run(
            [sys.executable, "-m", "tests.support.reaper", mark],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert swept.returncode == 0, swept.stderr
        assert marked.wait(10) is not None
        assert "killed 1 process" in swept.stderr
        assert other.poll() is None
    finally:
        for proc in (marked, other):
            proc.kill()
            proc.wait()
