"""Every process a test starts ends with the test, however the run ends.

Each pytest run marks its environment (`TEST_REAPER_RUN`), and each test its own
(`TEST_REAPER_TEST`): every process a test starts inherits the marks (tmux servers, and through
them the agents in their windows; daemons; Codex turn loops), even one in a new session. A
test's leftovers are killed when the test ends (after its fixtures' own clean-up), the run's at
its end, at exit and on SIGTERM. The marks are not LEGION_* variables: Legion's own environment
rules do not see them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

RUN_MARK = "TEST_REAPER_RUN"
TEST_MARK = "TEST_REAPER_TEST"


def marked(name: str, value: str) -> list[int]:
    """The live processes (not this one) whose environment holds `name=value`."""
    needle = f"{name}={value}".encode()
    me = os.getpid()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue  # gone, or not ours
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def reap(name: str, value: str, grace: float = 2.0) -> list[int]:
    """SIGTERM every process marked `name=value`, then SIGKILL what is left after `grace`
    seconds. Returns the pids it found."""
    pids = marked(name, value)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        alive = [pid for pid in marked(name, value) if pid in pids]
        if not alive:
            return pids
        time.sleep(0.05)
    for pid in marked(name, value):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return pids
