"""Ctrl-C stops at once (issue 24, item 12): `legion start --foreground` and `scripts/test`."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LEGION_BIN, run_legion

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tmux_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    socket = tmp_path / "tmux.sock"
    monkeypatch.setenv("LEGION_TMUX_SOCKET", str(socket))
    yield socket
    subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True, check=False)


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
    assert took < 5, (took, err)
    assert "stopping" in err, err
    assert "Traceback" not in err
    assert proc.returncode in (0, 130), (proc.returncode, err)
    assert "stopped" in out + err, (out, err)
