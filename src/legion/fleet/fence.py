"""The fence: in a fleet, a leader's sessions must stop before another host may take the lease
and start them again under the same session ids. The daemon stops them itself when it loses
the lease (`legion.daemon.fleet_step`); this is for when the daemon itself dies (a crash, a
kill) while its host lives on, and its tmux session with it.

A small process of its own, started by the daemon: the daemon tells it, through a pipe, until
when (this machine's monotonic clock, which every process here shares) its lease holds. When
the pipe ends without a word of release (the daemon died), the fence waits until that time,
and then, unless a daemon of the project runs here again (it holds the project's lock, and
leads or not as the store says), closes the daemon's tmux session: every session it ran. A
daemon that stops of itself says what becomes of its sessions first (`FenceProcess.release`).
It ends early once that tmux session is gone (`legion stop --all` closed it after the daemon
stopped): nothing is left for it to close.

Lines on the pipe: `until <monotonic seconds>` (the lease holds until then), `none` (no lease:
nothing to fence), `keep` (the daemon stopped, and its sessions may go on).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from legion.daemon_link import lock_held
from legion.errors import TmuxUnavailable
from legion.runtime.tmux import Tmux

LOOK_S = 1.0  # how often it looks, while it waits, whether the tmux session is still there


class FenceProcess:
    """The daemon's side: starts the fence, tells it the lease's end, and releases it."""

    def __init__(self, tmux: Tmux, session: str, lock: Path) -> None:
        read, self._write = os.pipe()
        argv = [sys.executable, "-P", "-m", "legion.fleet.fence", "--session", session]
        argv += ["--lock", str(lock), "--fd", str(read)]
        if tmux.socket is not None:
            argv += ["--socket", str(tmux.socket)]
        if tmux.config is not None:
            argv += ["--config", str(tmux.config)]
        # A session of its own: a Ctrl-C or a kill of the daemon's process group spares it.
        self._proc = subprocess.Popen(
            argv, pass_fds=(read,), start_new_session=True, stdin=subprocess.DEVNULL
        )
        os.close(read)
        self._said: str | None = None

    def lease_until(self, ends: float | None) -> None:
        """The lease holds until `ends` (monotonic), or there is none."""
        self._say("none" if ends is None else f"until {ends:.3f}")

    def release(self) -> None:
        """The daemon stops, and its sessions may go on (no other host can take them over, or
        they were stopped already): the fence ends without closing anything."""
        self._say("keep")
        self.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=5)

    def close(self) -> None:
        """The daemon stops, and its sessions go on under the lease it keeps: the fence waits
        for its end (not the daemon, which goes now)."""
        with contextlib.suppress(OSError):
            os.close(self._write)
        self._write = -1

    def _say(self, line: str) -> None:
        if line == self._said or self._write < 0:
            return
        self._said = line
        with contextlib.suppress(OSError):
            os.write(self._write, f"{line}\n".encode())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="legion.fleet.fence")
    parser.add_argument("--session", required=True)
    parser.add_argument("--lock", type=Path, required=True)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--socket", type=Path)
    parser.add_argument("--config", type=Path)
    args = parser.parse_args(argv)
    ends: float | None = None
    with os.fdopen(args.fd, "r", encoding="utf-8") as pipe:
        for line in pipe:  # until the daemon closes it, or dies
            word, _, value = line.strip().partition(" ")
            if word == "keep":
                return 0
            ends = float(value) if word == "until" else None
    if ends is None:
        return 0  # it led nothing: nothing runs that another host may start
    tmux = Tmux(socket=args.socket, config=args.config)
    while (left := ends - time.monotonic()) > 0:
        time.sleep(min(left, LOOK_S))
        with contextlib.suppress(TmuxUnavailable):
            if not tmux.has_session(args.session):
                return 0  # closed already (`legion stop --all`): nothing runs to fence
    if lock_held(args.lock):
        return 0  # a daemon runs here again: it leads these sessions, or stops them itself
    tmux.kill_session(args.session)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
