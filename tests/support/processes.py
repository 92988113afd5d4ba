"""Processes seen from /proc: which run a session (read once, or sampled in a thread while a
test runs), and whether one waits on its file descriptors."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

# The calls a process waits in for a file descriptor with a timeout: select, pselect6 and the
# epoll waits (a selector's), by number on x86_64 and aarch64. The daemon waits in one only for
# its next tick or a wake-up (`Daemon._wait`); what a tick does blocks in other calls (poll, for
# a subprocess's output or a socket's).
_WAIT_CALLS = {
    "x86_64": {"23", "270", "232", "281", "441"},
    "aarch64": {"72", "22", "441"},
}


def _in_call(pid: int, calls: dict[str, set[str]], what: str) -> bool:
    """Whether the main thread of `pid` is in one of `calls` (by machine) now
    (/proc/PID/syscall); `what` they are, for a machine not listed."""
    try:
        call = Path(f"/proc/{pid}/syscall").read_text().split(" ", 1)[0]
    except OSError:
        return False
    machine = os.uname().machine
    assert machine in calls, f"which system calls are {what} on {machine}?"
    return call in calls[machine]


def waiting_on_descriptors(pid: int) -> bool:
    """Whether the main thread of `pid` is blocked in select or an epoll wait now."""
    return _in_call(pid, _WAIT_CALLS, "select and epoll")


# The calls a process sleeps in (`time.sleep`): nanosleep and clock_nanosleep, by number.
_SLEEP_CALLS = {"x86_64": {"35", "230"}, "aarch64": {"101", "115"}}


def sleeping(pid: int) -> bool:
    """Whether the main thread of `pid` is in a sleep now: a process that polls between
    sleeps is seen waiting, not working."""
    return _in_call(pid, _SLEEP_CALLS, "nanosleep")


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return raw.decode(errors="replace").split("\0")


def _stat(pid: str) -> list[str]:
    """The fields of /proc/PID/stat after the command name: state, ppid, …; [] when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return []
    return stat.rpartition(")")[2].split()


def ancestors(pid: int) -> list[int]:
    """`pid`'s parent, its parent's parent, … up to init."""
    found = []
    while (stat := _stat(str(pid))) and int(stat[1]) > 1:
        pid = int(stat[1])
        found.append(pid)
    return found


def session_processes(session_ids: set[str]) -> dict[str, list[int]]:
    """The running processes started on each of `session_ids` (Claude Code's `--session-id`
    or `--resume`, the Codex turn loop's `--session`, before any `--`: what runs a confined
    session's CLI, bubblewrap and the sandbox's first process, names it only after theirs). A
    child that is the CLI's own fork (same command line, parent on the same session: it is
    about to run a tool) is part of its parent, not a second process on the session."""
    found: dict[str, dict[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        args = cmdline(int(entry))
        args = args[: args.index("--")] if "--" in args else args
        for flag in ("--session-id", "--resume", "--session"):
            if flag in args[:-1]:
                sid = args[args.index(flag) + 1]
                stat = _stat(entry)
                if sid in session_ids and stat[:1] not in ([], ["Z"]):
                    found.setdefault(sid, {})[int(entry)] = int(stat[1])
    return {
        sid: sorted(pid for pid, parent in pids.items() if parent not in pids)
        for sid, pids in found.items()
    }


class SessionWatch:
    """Samples, in a thread, which processes run each session; remembers every moment two did."""

    def __init__(self, session_ids: set[str], interval: float = 0.1) -> None:
        self.session_ids = session_ids
        self.interval = interval
        self.overlaps: list[dict[str, list[int]]] = []
        # For each overlap: every process seen on the session then (pid, ppid, state, argv head).
        self.details: list[list[tuple[int, int, str, str]]] = []
        self.seen: dict[str, set[int]] = {}
        self.first_seen: dict[int, float] = {}  # pid: when it was first seen (monotonic)
        # pid: when it started (seconds since boot, from /proc: its window's creation, since
        # the window's first process execs the CLI)
        self.started: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            found = session_processes(self.session_ids)
            for sid, pids in found.items():
                self.seen.setdefault(sid, set()).update(pids)
                for pid in pids:
                    self.first_seen.setdefault(pid, time.monotonic())
                    if pid not in self.started and (stat := _stat(str(pid))):
                        self.started[pid] = int(stat[19]) / os.sysconf("SC_CLK_TCK")
            both = {sid: pids for sid, pids in found.items() if len(pids) > 1}
            if both:
                self.overlaps.append(both)
                self.details.append(
                    [
                        (pid, int(stat[1]) if (stat := _stat(str(pid))) else 0, stat[0] if stat
                         else "?", " ".join(cmdline(pid)[:3]))
                        for pids in both.values()
                        for pid in pids
                    ]
                )  # fmt: skip
            self._stop.wait(self.interval)

    def __enter__(self) -> SessionWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
