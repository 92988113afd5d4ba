"""Whether a session (a worker's or the controller's) runs, waits, is stuck or has died: every
rule Legion judges liveness by, on facts already observed. Pure: the observer reads tmux and
the transcripts, the caller passes `now`; nothing here touches a clock, a file or a process.

Two clocks meet here, each in its own argument: transcript activity is wall-clock time (a
file's mtime, a record's timestamp), while "the screen has not changed since" is measured on
the monotonic clock of the process that looked.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

# A prompt typed into an idle session may take this long to show in its transcript. The CLI
# drops an Enter that comes while its input is not ready (just after a turn ended), leaving the
# text in the input box: Enter is pressed once more, and if that is not taken either, the box is
# cleared and the prompt tried again later.
ACCEPT_S = 3.0
# A session idle for less than this has only just ended its turn: typing into it now races the
# CLI getting its input ready, so it is come back to in a moment.
SETTLE_S = 1.0
# A worker that said it is done but wrote to its transcript this recently is still finishing
# its last message: its window is not closed yet.
FINISHING_GRACE_S = 30.0
# How long a CLI may take to start (load, draw, record its first prompt): the start watch
# waits this long before it calls a start slow, and a worker with no transcript yet is not
# stuck before it, whatever `stale_after` says (a short one would kill a slow start).
START_S = 30.0


class SessionState(Enum):
    """A session's one state vocabulary (the bus's agent statuses are mapped from it once)."""

    RUNNING = "running"  # mid-turn (or starting)
    IDLE = "idle"  # finished its turn, waiting for input
    BLOCKED = "blocked"  # asked a question (AskUserQuestion) nobody has answered
    DEAD = "dead"  # its window is gone or its process exited

    @property
    def is_live(self) -> bool:
        return self is not SessionState.DEAD


def session_state(window_alive: bool, *, question_open: bool, turn_ended: bool) -> SessionState:
    """A session's state from whether its process runs and what its transcript's tail says
    (nothing, for a session that has written none yet: it is starting)."""
    if not window_alive:
        return SessionState.DEAD
    if question_open:
        return SessionState.BLOCKED
    if turn_ended:
        return SessionState.IDLE
    return SessionState.RUNNING


def transcript_grew(size_before: int, size_now: int) -> bool:
    """Whether a session took what was given to it: its transcript recorded something since."""
    return size_now > size_before


def settling(last_activity: float | None, now: float) -> bool:
    """Whether an idle session ended its turn too recently to be typed into yet."""
    return last_activity is not None and now - last_activity < SETTLE_S


def finishing(state: SessionState, last_activity: float | None, now: float) -> bool:
    """Whether a worker that said it is done is still writing its last message."""
    return (
        state is SessionState.RUNNING
        and last_activity is not None
        and now - last_activity < FINISHING_GRACE_S
    )


def stale_mid_turn(
    state: SessionState, last_activity: float | None, now: float, stale_after: float
) -> bool:
    """Whether a session has been mid-turn, writing nothing, for longer than `stale_after`."""
    return (
        state is SessionState.RUNNING
        and last_activity is not None
        and (now - last_activity > stale_after)
    )


@dataclass(frozen=True)
class ScreenSeen:
    """What a window's screen showed (a digest; "" for a blank screen) and since when
    (monotonic seconds) it has shown exactly that."""

    window_id: str
    digest: str
    since: float


def screen_seen(before: ScreenSeen | None, window_id: str, digest: str, now: float) -> ScreenSeen:
    """The screen as seen now: unchanged since `before.since` when it is the same window
    showing the same thing, else changed just now. A blank screen (a CLI still loading) counts
    as changing every time."""
    if before is not None and digest and (before.window_id, before.digest) == (window_id, digest):
        return before
    return ScreenSeen(window_id, digest, now)


def screen_stuck(seen: ScreenSeen, now: float, stale_after: float) -> bool:
    """Whether a screen that shows something has shown the same for `stale_after` seconds."""
    return bool(seen.digest) and now - seen.since >= stale_after


def worker_stuck(
    last_activity: float | None,
    started: float,
    now: float,
    seen: ScreenSeen,
    monotonic_now: float,
    stale_after: float,
) -> bool:
    """The two-signal rule: a worker is stuck only when its transcript has been quiet and its
    screen unchanged, both for `stale_after` seconds. (Either alone misleads: a long tool call
    writes nothing; a thinking CLI's spinner shows the same frame again within seconds.)
    `last_activity`: its last transcript activity; None for one that has written none yet,
    which is starting: quiet since `started`, and for `START_S` at least."""
    if last_activity is None:
        quiet_for = max(stale_after, START_S)
        last_activity = started
    else:
        quiet_for = stale_after
    return now - last_activity > quiet_for and screen_stuck(seen, monotonic_now, stale_after)
