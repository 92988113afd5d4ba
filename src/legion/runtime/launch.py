"""The first process of a worker window: `python -m legion.runtime.launch SPEC`.

The spec (argv, working directory, environment) goes from the dispatcher to this process
through a named pipe (mode 0600, in a 0700 folder): the environment, which may hold an API
key, is never on a command line `ps` can show and never on disk, not even for the moment
between writing a file and reading it, and a crash in between leaves nothing behind. It also
lets the worker inherit the dispatcher's environment rather than whatever the tmux server
started with.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType

logger = logging.getLogger(__name__)

# How long either end waits for the other: the window's process has to start (a Python
# interpreter), and a launcher whose dispatcher died must not wait forever.
HANDOVER_TIMEOUT_S = 30.0


class Handover:
    """A spec on its way to one launcher: a named pipe and the thread that writes into it
    once the launcher has opened it. The thread is not a daemon thread, so a short-lived
    `legion` process does not exit before its worker has its environment."""

    def __init__(self, folder: Path, argv: Sequence[str], cwd: Path, env: Mapping[str, str]):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = folder / f"{secrets.token_hex(8)}.pipe"
        os.mkfifo(self.path, 0o600)
        self._payload = json.dumps({"argv": list(argv), "cwd": str(cwd), "env": dict(env)})
        self._cancelled = threading.Event()
        self._thread = threading.Thread(target=self._deliver, name="legion-launch-handover")

    def start(self) -> None:
        self._thread.start()

    def pending(self) -> bool:
        return self._thread.is_alive()

    def cancel(self) -> None:
        """The window never started: nobody will read the pipe."""
        self._cancelled.set()
        if self._thread.is_alive():
            self._thread.join(2)
        self.path.unlink(missing_ok=True)

    def _deliver(self) -> None:
        deadline = time.monotonic() + HANDOVER_TIMEOUT_S
        try:
            while not self._cancelled.is_set() and time.monotonic() < deadline:
                try:
                    # Non-blocking: fails with ENXIO until the launcher has the pipe open.
                    fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
                except OSError as exc:
                    if exc.errno not in (errno.ENXIO, errno.EINTR):
                        return
                    time.sleep(0.01)
                    continue
                os.set_blocking(fd, True)
                with os.fdopen(fd, "w", encoding="utf-8") as pipe, contextlib.suppress(OSError):
                    pipe.write(self._payload)
                return
        finally:
            self.path.unlink(missing_ok=True)


def command(spec: Path) -> list[str]:
    """The window's argv: this module under the same Python that runs Legion."""
    return [sys.executable, "-m", "legion.runtime.launch", str(spec)]


def _timed_out(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError("nobody handed the launch spec over")


def read_spec(
    path: Path, timeout: float = HANDOVER_TIMEOUT_S
) -> tuple[list[str], str, dict[str, str]]:
    """(argv, cwd, env) from the pipe at `path`."""
    previous = signal.signal(signal.SIGALRM, _timed_out)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with path.open(encoding="utf-8") as pipe:  # blocks until the dispatcher opens it
            text = pipe.read()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    spec = json.loads(text)
    try:
        argv, cwd, env = spec["argv"], spec["cwd"], spec["env"]
        return [str(arg) for arg in argv], str(cwd), {str(k): str(v) for k, v in env.items()}
    except (TypeError, KeyError, AttributeError) as exc:
        raise ValueError("not a launch spec") from exc


def main(args: Sequence[str]) -> int:
    if len(args) != 1:
        logger.error("usage: python -m legion.runtime.launch SPEC")
        return 2
    path = Path(args[0])
    try:
        argv, cwd, env = read_spec(path)
    except (OSError, ValueError, TimeoutError) as exc:
        logger.error("cannot read launch spec %s: %s", path, exc)
        return 1
    os.chdir(cwd)
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        logger.error("cannot start %s: %s", argv[0], exc)
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    from legion.diagnostics.log import setup

    setup(strict=False)  # a session is never failed for its log
    sys.exit(main(sys.argv[1:]))
