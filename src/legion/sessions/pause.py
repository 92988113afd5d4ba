"""The dispatch pause: fail fast when workers cannot start.

Every failed start of a Claude Code session (a worker's, or the controller's when it fails
before its window exists) is counted against its cause, with ids taken out so that the same
fault on two issues is one cause. `PAUSE_AFTER` failures in a row with the same cause (no
successful start, no other cause in between) pause dispatch: the reconciler starts no worker
until the pause is cleared, which the next `legion start` does. The pause is a row in the project
database, so `legion status`, `legion reconcile` and a restarted daemon all see it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from legion.store import Store, now

PAUSE_AFTER = 2

_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_IDENTIFIER = re.compile(r"\b[A-Za-z][A-Za-z0-9]*-\d+\b")
# tmux's line under a dead pane: "Pane is dead (status 3, Mon Nov 23 04:29:23 2026)".
_DEAD_PANE_TIME = re.compile(r"(Pane is dead \([^,)]*), [^)]*\)")


def normalize_cause(cause: str) -> str:
    """The cause with what differs between workers (session ids, issue identifiers, window
    names, the time tmux says a pane died) taken out, and whitespace folded."""
    text = _UUID.sub("<id>", " ".join(cause.split()))
    text = _DEAD_PANE_TIME.sub(r"\1)", text)
    return _IDENTIFIER.sub("<issue>", text)


def pause_reason(cause: str, streak: int, hint: str = "") -> str:
    """The one line that says why dispatch stopped and what to do."""
    cause = " ".join(cause.split()).rstrip(".")
    return (
        f"dispatch paused: {streak} worker starts in a row failed: {cause}{hint}. "
        "Fix that (`legion doctor` checks the setup), then start Legion again "
        "(`legion stop`, `legion start`): a new start clears the pause"
    )


@dataclass(frozen=True, slots=True)
class PauseState:
    reason: str | None  # the pause line while paused, else None
    paused_at: str | None
    cause: str | None  # the normalized cause of the latest failed start
    streak: int  # failed starts in a row with that cause

    def to_json(self) -> dict[str, object]:
        return {"reason": self.reason, "since": self.paused_at}


class DispatchPause:
    def __init__(self, db: Store) -> None:
        self._db = db

    def state(self) -> PauseState:
        with self._db.read() as conn:
            row = conn.execute("SELECT * FROM dispatch_pause WHERE id = 1").fetchone()
        if row is None:
            return PauseState(None, None, None, 0)
        return PauseState(row["reason"], row["paused_at"], row["cause"], row["streak"])

    def reason(self) -> str | None:
        return self.state().reason

    def start_failed(self, cause: str, hint: str = "") -> str | None:
        """Count a failed start. Returns the pause line when this failure paused dispatch (only
        then: a pause already in force is not reported again)."""
        key = normalize_cause(cause)
        with self._db.write() as conn:
            row = conn.execute("SELECT * FROM dispatch_pause WHERE id = 1").fetchone()
            same = row is not None and row["cause"] == key
            streak = (row["streak"] + 1) if same else 1
            paused = row is not None and row["reason"] is not None
            reason = None
            if not paused and streak >= PAUSE_AFTER:
                reason = pause_reason(cause, streak, hint)
            conn.execute(
                "INSERT INTO dispatch_pause (id, cause, streak, reason, paused_at) "
                "VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET cause = excluded.cause, "
                "streak = excluded.streak, "
                "reason = COALESCE(dispatch_pause.reason, excluded.reason), "
                "paused_at = COALESCE(dispatch_pause.paused_at, excluded.paused_at)",
                (key, streak, reason, now() if reason else None),
            )
        return reason

    def hold(self, reason: str) -> str | None:
        """Pause dispatch now, for `reason` (a tracker or forge refused Legion's credential).
        Returns the line when this paused dispatch, None when a pause was already in force."""
        with self._db.write() as conn:
            row = conn.execute("SELECT reason FROM dispatch_pause WHERE id = 1").fetchone()
            if row is not None and row["reason"] is not None:
                return None
            conn.execute(
                "INSERT INTO dispatch_pause (id, cause, streak, reason, paused_at) "
                "VALUES (1, NULL, 0, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "reason = excluded.reason, paused_at = excluded.paused_at",
                (reason, now()),
            )
        return reason

    def start_succeeded(self) -> None:
        """A session started: the streak is broken (a pause in force stays until cleared)."""
        with self._db.write() as conn:
            conn.execute("UPDATE dispatch_pause SET cause = NULL, streak = 0 WHERE id = 1")

    def clear(self) -> str | None:
        """Lift the pause and forget the streak; returns the pause line that was in force."""
        with self._db.write() as conn:
            row = conn.execute("SELECT reason FROM dispatch_pause WHERE id = 1").fetchone()
            conn.execute(
                "UPDATE dispatch_pause SET cause = NULL, streak = 0, reason = NULL, "
                "paused_at = NULL WHERE id = 1"
            )
        return None if row is None else row["reason"]
