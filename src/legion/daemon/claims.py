"""What a running daemon holds, so that no second one runs beside it: the project's lock
(`daemon.lock` in its state folder), its session on the tmux server, and the pid file that
tells `legion` commands which daemon runs and in which mode (`legion.daemon_link`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Callable, Iterator

from legion.config import Project
from legion.daemon_link import READY_LINE, own_short_folder, pid_file, start_refusal, tmux_claim
from legion.errors import ConflictError
from legion.files.private import open_private, write_private

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def project_claimed(project: Project, mode: str) -> Iterator[Callable[[], None]]:
    """Hold the project's lock and its tmux session, and say in the pid file that this
    process runs the project's daemon in `mode`; a daemon already running is refused in one
    line. Yields what says, in the pid file, that the daemon now serves sessions
    (`daemon_link.daemon_ready`)."""
    state = project.state_dir
    with open_private(state / "daemon.lock") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ConflictError(
                start_refusal(project) or "Legion is already running for this project"
            ) from None
        try:
            with _tmux_claimed(project):
                said = f"{os.getpid()} {mode}\n{project.root}\n"
                write_private(pid_file(project), said)
                try:
                    yield lambda: write_private(pid_file(project), f"{said}{READY_LINE}\n")
                finally:
                    pid_file(project).unlink(missing_ok=True)
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _tmux_claimed(project: Project) -> Iterator[None]:
    """Hold this project's session on its tmux server (`daemon_link.tmux_claim`): a second
    daemon on this machine with a state folder of its own but the same tmux server is
    refused, rather than closing this one's sessions."""
    claim = tmux_claim(project)
    try:
        own_short_folder()  # this user's, never through a link planted in /tmp
        handle = open_private(claim)
    except OSError as exc:  # a safeguard, not a reason not to run
        logger.warning("the tmux session is not claimed: %s", exc)
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ConflictError(
                start_refusal(project) or "the project's tmux session is in use"
            ) from None
        try:
            handle.truncate(0)
            handle.write(f"{project.state_dir}\n")
            handle.flush()
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
