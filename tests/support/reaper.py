"""Every process a test starts ends with the test, however the run ends.

A process is the test's when its environment holds the test's mark (`TEST_REAPER_TEST`, set for
each test; every process it starts inherits it, even one in a new session), or when it works in
the test's folders (its working directory or its command line is under them): Legion starts
tmux servers and agents with an environment of their own, but their sockets and worktrees are
the test's. A test's leftovers are killed when the test ends, after its fixtures' own clean-up;
the run's (its mark `TEST_REAPER_RUN`, its base temporary folder) at its end, at exit and on
SIGTERM. The marks are not LEGION_* variables: Legion's own environment rules do not see them.

`python -m tests.support.reaper MARK` reaps a run's leftovers from outside it: `scripts/test`
does so after a pytest that did not end within its grace had to be killed (no clean-up ran).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

RUN_MARK = "TEST_REAPER_RUN"
TEST_MARK = "TEST_REAPER_TEST"


def _ancestors() -> set[int]:
    """This process and its parents: never reaped (a test may chdir into its folder)."""
    found, pid = set(), os.getpid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def find(mark: tuple[str, str], paths: Sequence[str] = ()) -> list[int]:
    """The live processes (not this one nor its parents) marked `name=value` in their
    environment, or whose working directory or command line is under one of `paths`."""
    needle = f"{mark[0]}={mark[1]}".encode()
    prefixes = [str(path).rstrip("/") for path in paths]
    spared = _ancestors()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in spared:
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as handle:
                environ = handle.read()
            if needle in environ.split(b"\0"):
                found.append(int(entry.name))
                continue
            if not prefixes:
                continue
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
            with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                cmdline = handle.read().decode(errors="replace").replace("\0", " ")
        except OSError:
            continue  # gone, or not ours
        if any(cwd == p or cwd.startswith(f"{p}/") or p in cmdline for p in prefixes):
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether `pid` still runs: not gone and not a zombie. (A process on its way out may no
    longer show its environment while it still runs, so `find` cannot tell this.)"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _wait_gone(pids: Sequence[int], seconds: float) -> list[int]:
    """The pids still alive after waiting up to `seconds` for them to end."""
    deadline = time.monotonic() + seconds
    left = [pid for pid in pids if alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [pid for pid in left if alive(pid)]
    return left


def reap(mark: tuple[str, str], paths: Sequence[str] = (), grace: float = 2.0) -> list[int]:
    """SIGTERM every process `find` finds, then SIGKILL what still runs after `grace` seconds,
    and wait until each has ended. Returns the pids it found."""
    pids = find(mark, paths)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    left = _wait_gone(pids, grace)
    left += [pid for pid in find(mark, paths) if pid not in pids]  # started meanwhile
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    _wait_gone(left, grace)
    return pids


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1]:
        sys.exit("usage: python -m tests.support.reaper RUN_MARK")
    found = reap((RUN_MARK, sys.argv[1]))
    if found:
        print(f"killed {len(found)} process(es) the tests left", file=sys.stderr)
