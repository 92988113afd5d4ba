"""The launch spec's handover: through a named pipe, never a file holding the environment."""

from __future__ import annotations

import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from legion.runtime import launch


def test_the_spec_reaches_the_launcher_and_leaves_nothing_behind(tmp_path: Path) -> None:
    folder = tmp_path / "launch"
    env = {"SECRET_SENTINEL": "s3cr3t-value", "PATH": "/usr/bin:/bin"}
    handover = launch.Handover(folder, ["/bin/sh", "-c", "echo ok"], tmp_path, env)
    assert stat.S_ISFIFO(handover.path.stat().st_mode)
    assert stat.S_IMODE(handover.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    handover.start()
    argv, cwd, got = launch.read_spec(handover.path, timeout=5)
    assert (argv, cwd, got) == (["/bin/sh", "-c", "echo ok"], str(tmp_path), env)
    deadline = time.monotonic() + 30
    while handover.pending() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert list(folder.iterdir()) == []
    # Nothing of the environment was ever written to a regular file.
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or b"s3cr3t" not in path.read_bytes()


def test_the_launcher_runs_the_command_with_exactly_the_handed_environment(
    tmp_path: Path,
) -> None:
    out = tmp_path / "env.txt"
    handover = launch.Handover(
        tmp_path / "launch",
        ["/bin/sh", "-c", f'printf "%s|%s" "$ONLY_THIS" "$HOME" > {out}'],
        tmp_path,
        {"ONLY_THIS": "yes"},
    )
    handover.start()
    result = subprocess.run(
        launch.command(handover.path), check=False, capture_output=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert out.read_text() == "yes|"


def test_a_launcher_nobody_hands_a_spec_to_gives_up(tmp_path: Path) -> None:
    handover = launch.Handover(tmp_path / "launch", ["true"], tmp_path, {})
    with pytest.raises(TimeoutError):
        launch.read_spec(handover.path, timeout=0.3)
    handover.cancel()
    assert not handover.path.exists()


def test_a_cancelled_handover_stops_waiting_for_its_reader(tmp_path: Path) -> None:
    handover = launch.Handover(tmp_path / "launch", ["true"], tmp_path, {})
    handover.start()
    started = time.monotonic()
    handover.cancel()
    assert time.monotonic() - started < 2
    assert not handover.pending()
    assert not handover.path.exists()


def test_the_launcher_says_what_is_wrong_with_its_arguments() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "legion.runtime.launch"], check=False, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "usage" in result.stderr


def test_the_starts_cancel_every_spec_still_on_its_way(tmp_path: Path) -> None:
    """An interrupted demo kills its tmux server right after a worker's window opened: the
    spec's thread (not a daemon thread) must not keep `legion demo` alive for 30 s."""
    from legion.sessions.start_watch import StartWatch

    starts = StartWatch(windows=None)  # type: ignore[arg-type]  # not asked for windows here
    waiting = [launch.Handover(tmp_path / "launch", ["true"], tmp_path, {}) for _ in range(2)]
    for number, handover in enumerate(waiting):
        handover.start()
        starts.launched(f"@{number}", handover)
    started = time.monotonic()
    starts.cancel_handovers()
    assert time.monotonic() - started < 10  # not the 30 s a handover waits for its reader
    assert not any(h.pending() or h.path.exists() for h in waiting)
