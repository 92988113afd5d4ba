"""The files through which `legion` commands find and talk to a project's daemon: its lock and
pid, the wake-up pipe that makes it reconcile at once, and the heartbeat it touches each tick.
Kept apart from the daemon so that every write command can poke it without importing it."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from legion.config import Project


def pid_file(project: Project) -> Path:
    return project.state_dir / "daemon.pid"


def wake_fifo(project: Project) -> Path:
    return project.state_dir / "daemon.wake"


def heartbeat_file(project: Project) -> Path:
    return project.state_dir / "heartbeat"


def running_pid(project: Project) -> int | None:
    """The daemon's pid when one runs for this project (its lock is held), else None."""
    lock = project.state_dir / "daemon.lock"
    if not lock.exists():
        return None
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                return int(pid_file(project).read_text().strip())
            except (OSError, ValueError):
                return -1  # running, pid unknown
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def notify(project: Project) -> None:
    """Tell a running daemon that something changed, so it reconciles now. Never blocks."""
    try:
        fd = os.open(wake_fifo(project), os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return  # no daemon listening
    try:
        os.write(fd, b"!")
    except OSError:
        pass  # the pipe is full: a wake-up is pending already
    finally:
        os.close(fd)
