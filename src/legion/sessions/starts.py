"""Waiting for started workers to begin: each is watched until its session records its first
prompt, answering its CLI's first-run dialogs on the way; one whose process ends first is a
failed start, told by its last screen. Starts are collected so a reconcile pass starts several
workers at once and waits for them together.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from legion.core.liveness import transcript_grew
from legion.errors import TmuxError, TmuxUnavailable
from legion.runtime import launch
from legion.runtime.base import AgentRuntime
from legion.sessions.prompting import transcript_size
from legion.sessions.windows import SessionWindows

START_TIMEOUT_S = 30.0

_PANE_DEAD = re.compile(r"^Pane is dead \((status|signal) (\d+)")


def start_failure(screen: str) -> str:
    """Pure: why a worker whose process ended at once did, from its last screen: its own last
    line of output, and the exit status (or signal) tmux noted under it."""
    lines = [line.strip() for line in screen.splitlines() if line.strip()]
    how = ""
    if lines and (dead := _PANE_DEAD.match(lines[-1])):
        how = f" ({'exit status' if dead[1] == 'status' else 'signal'} {dead[2]})"
        lines.pop()
    said = lines[-1] if lines else "(no output)"
    return f"the worker exited as it started{how}: {said}"


@dataclass(eq=False)
class _Starting:
    """A worker window whose session has not yet recorded its first prompt."""

    issue: str
    window_id: str
    transcript: Path
    size_before: int
    runtime: AgentRuntime
    answered_at: float = 0.0  # when keys last went to a first-run dialog


class StartWatch:
    def __init__(self, windows: SessionWindows) -> None:
        self.windows = windows
        self._starting: list[_Starting] = []
        self._handovers: dict[str, launch.Handover] = {}  # window id: its spec, on its way
        # The daemon's "stop now": a wait for starts ends as soon as it says so.
        self.should_stop: Callable[[], bool] = lambda: False

    def launched(self, window_id: str, handover: launch.Handover) -> None:
        """Note the spec on its way to a new window's launcher: cancelled if the window dies
        before reading it."""
        self._handovers[window_id] = handover

    def expect(
        self, issue: str, window_id: str, transcript: Path, size_before: int, runtime: AgentRuntime
    ) -> None:
        """Note a worker's start, for `await_starts` to see through its first-run dialogs."""
        self._starting.append(_Starting(issue, window_id, transcript, size_before, runtime))

    def await_starts(self) -> list[tuple[str, str]]:
        """Wait until every worker started without waiting has recorded its first prompt,
        getting each CLI past any first-run dialog on the way. Returns (issue, why) for those
        whose process died first; a slow start is not a failure, and neither is a moment in
        which tmux cannot be asked."""
        deadline = time.monotonic() + START_TIMEOUT_S
        failures: list[tuple[str, str]] = []
        tmux = self.windows.tmux
        try:
            while self._starting and time.monotonic() < deadline and not self.should_stop():
                try:
                    windows = {w.id: w for w in self.windows.list()}
                except TmuxUnavailable:
                    time.sleep(0.25)
                    continue
                for item in list(self._starting):
                    if transcript_grew(item.size_before, transcript_size(item.transcript)):
                        self._starting.remove(item)
                        continue
                    window = windows.get(item.window_id)
                    try:
                        screen = tmux.capture(item.window_id, lines=60) if window else ""
                    except TmuxError:
                        continue  # closed meanwhile, or tmux did not answer: look again
                    if window is None or window.pane_dead:
                        failures.append((item.issue, start_failure(screen)))
                        self._starting.remove(item)
                        if handover := self._handovers.pop(item.window_id, None):
                            handover.cancel()  # its reader is gone: do not wait for it
                        continue
                    dialog = item.runtime.first_run_dialog(screen)
                    # One answer per dialog: give the screen time to move on before looking again.
                    if dialog is not None and time.monotonic() - item.answered_at > 0.7:
                        for key in dialog[1]:
                            tmux.send_keys(item.window_id, key)
                        item.answered_at = time.monotonic()
                time.sleep(0.1)
        finally:
            self._starting.clear()
            self._handovers = {k: h for k, h in self._handovers.items() if h.pending()}
        return failures
