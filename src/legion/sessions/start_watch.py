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

from legion.core.liveness import START_S, transcript_grew
from legion.errors import TmuxError, TmuxUnavailable
from legion.runtime import launch
from legion.runtime.base import AgentRuntime
from legion.sessions.prompting import transcript_size
from legion.sessions.windows import SessionWindows

START_TIMEOUT_S = START_S

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
    deadline: float  # past it, the start is slow, not failed: no longer watched
    answered_at: float = 0.0  # when keys last went to a first-run dialog


@dataclass(frozen=True)
class Looked:
    """What one look at the pending starts saw: the issues whose worker began (or that has
    been starting for longer than `START_TIMEOUT_S`: slow, not failed), and (issue, why) for
    each whose process died first."""

    begun: list[str]
    failed: list[tuple[str, str]]


class StartWatch:
    """The workers started and not yet begun. A `legion` command waits for its starts
    (`await_starts`); the daemon looks at them between its ticks (`look`), so that a pass never
    waits for a CLI's start-up while another issue's hand-off is due."""

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
        """Note a worker's start, to be seen through its first-run dialogs."""
        deadline = time.monotonic() + START_TIMEOUT_S
        self._starting.append(
            _Starting(issue, window_id, transcript, size_before, runtime, deadline)
        )

    @property
    def pending(self) -> bool:
        """Whether a start is still being watched."""
        return bool(self._starting)

    def watching(self, window_id: str) -> bool:
        """Whether the start in window `window_id` is still being watched: what becomes of it
        is this watch's to say (a step that closed it meanwhile would make it a failed start)."""
        return any(item.window_id == window_id for item in self._starting)

    def await_starts(self) -> list[tuple[str, str]]:
        """Wait until every worker started without waiting has recorded its first prompt,
        getting each CLI past any first-run dialog on the way. Returns (issue, why) for those
        whose process died first; a slow start is not a failure, and neither is a moment in
        which tmux cannot be asked."""
        failures: list[tuple[str, str]] = []
        try:
            while self._starting and not self.should_stop():
                failures += self.look().failed
                if self._starting:
                    time.sleep(0.1)
        finally:
            self._starting.clear()
            self._forget_delivered()
        return failures

    def look(self) -> Looked:
        """One look at each pending start: begun, died, or at a first-run dialog (answered)."""
        now = time.monotonic()
        slow = [item for item in self._starting if now >= item.deadline]
        self._starting = [item for item in self._starting if item not in slow]
        begun = [item.issue for item in slow]
        failed: list[tuple[str, str]] = []
        try:
            windows = {w.id: w for w in self.windows.list()}
        except TmuxUnavailable:
            return Looked(begun, failed)  # a moment in which tmux cannot be asked: look again
        tmux = self.windows.tmux
        for item in list(self._starting):
            if transcript_grew(item.size_before, transcript_size(item.transcript)):
                self._starting.remove(item)
                begun.append(item.issue)
                continue
            window = windows.get(item.window_id)
            try:
                screen = tmux.capture(item.window_id, lines=60) if window else ""
            except TmuxError:
                continue  # closed meanwhile, or tmux did not answer: look again
            if window is None or window.pane_dead:
                failed.append((item.issue, start_failure(screen)))
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
        if not self._starting:
            self._forget_delivered()
        return Looked(begun, failed)

    def cancel_handovers(self) -> None:
        """The sessions' tmux server is gone: no launcher will read a spec still on its way, so
        its thread (which keeps this process alive while it waits) stops now."""
        for handover in self._handovers.values():
            handover.cancel()
        self._handovers.clear()

    def _forget_delivered(self) -> None:
        self._handovers = {k: h for k, h in self._handovers.items() if h.pending()}
