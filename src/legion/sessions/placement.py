"""Workers on other hosts than the leader's, through the store.

The leader decides every start (`legion.core.fleet.place` picks the host). A start on another
host is recorded in the worker registry under that host and asked of it as a command: the host
carries it out (its workspace, restored from the issue's last checkpoint when the issue moved;
its window; its session) and records the workspace it used. Each command carries the epoch it
was decided under: a host carries out only what the current leader asked.

Every host reports the state of each worker it runs (only what changed since its last
report), and the leader's roster reads another host's workers from those reports: a worker is
live while its host is and the host says so (`legion.core.fleet.remote_session_state`).
A prompt for a live worker on another host (a human's answer relayed, a nudge) is a command
too: that host types it in, confirmed by the transcript. Closing is the other way round: a
host closes each window of a worker whose record is retired or no longer its own, so the
leader retires a worker anywhere by its record alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from legion.core.liveness import SessionState
from legion.runtime.transcript import PendingQuestion, question_from_input
from legion.store import Store

START = "start"  # open the worker's window and start its session with the prompt
TYPE = "type"  # type the prompt into the worker's live session (confirmed by its transcript)
ANSWER = "answer"  # answer the question it waits on (the prompt: the answers, a JSON list)
WAKE_PREFIX = "legion-host"  # the NOTIFY payload that wakes a host's daemon: see `wake_name`


def wake_name(project_id: str, host: str) -> str:
    """What a command NOTIFYs (on the bus's channel) to wake host `host` of the project."""
    return f"{WAKE_PREFIX}:{project_id}:{host}"


@dataclass(frozen=True, slots=True)
class HostCommand:
    id: int
    host: str
    epoch: int
    kind: str
    worker_id: int
    prompt: str
    from_host: str  # where the last worker ran ("" for none): restore from there


@dataclass(frozen=True, slots=True)
class Report:
    host: str
    state: SessionState
    last_activity: float | None
    reported_at: float
    question: PendingQuestion | None = None  # the question a blocked worker waits on


# What a host reports of one worker: its state, last transcript activity, pending question.
Seen = tuple[SessionState, float | None, PendingQuestion | None]


def question_text(question: PendingQuestion | None) -> str:
    """A pending question as the report keeps it: its tool call's id and input, as JSON."""
    if question is None:
        return ""
    items = [
        {
            "question": item.question,
            "header": item.header,
            "options": [{"label": label} for label in item.options],
            "multiSelect": item.multi_select,
        }
        for item in question.items
    ]
    return json.dumps({"id": question.tool_use_id, "input": {"questions": items}})


def question_of(text: str) -> PendingQuestion | None:
    if not text:
        return None
    try:
        held = json.loads(text)
        return question_from_input(str(held["id"]), held["input"])
    except (ValueError, KeyError, TypeError):
        return None


class HostSessions:
    """The commands to hosts and the hosts' reports, in the store. `notify_sql`: the statement
    that wakes a host's daemon when a command is written (PostgreSQL's NOTIFY), or None."""

    def __init__(self, db: Store, notify_sql: str | None = None) -> None:
        self._db = db
        self._notify_sql = notify_sql

    def ask(
        self,
        host: str,
        epoch: int,
        kind: str,
        worker_id: int,
        prompt: str,
        *,
        wake: str,
        from_host: str = "",
    ) -> int:
        """Ask `host` to start the worker recorded as `worker_id` with `prompt` (`START`), or
        to type `prompt` into it (`TYPE`)."""
        with self._db.write() as conn:
            row = conn.execute(
                "INSERT INTO host_commands "
                "(host, epoch, kind, worker_id, prompt, from_host, created_at) "
                f"VALUES (?, ?, ?, ?, ?, ?, {self._db.clock_sql}) RETURNING id",
                (host, epoch, kind, worker_id, prompt, from_host),
            ).fetchone()
            if self._notify_sql is not None:
                conn.execute(self._notify_sql, (wake,))
        return int(row[0])

    def pending(self, host: str) -> list[HostCommand]:
        """The commands `host` has not carried out yet, oldest first."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT * FROM host_commands WHERE host = ? AND done_at IS NULL ORDER BY id",
                (host,),
            ).fetchall()
        return [
            HostCommand(
                int(row["id"]),
                row["host"],
                int(row["epoch"]),
                row["kind"],
                int(row["worker_id"]),
                row["prompt"],
                row["from_host"],
            )
            for row in rows
        ]

    def finish(self, command_id: int, outcome: str) -> None:
        with self._db.write() as conn:
            conn.execute(
                f"UPDATE host_commands SET done_at = {self._db.clock_sql}, outcome = ? "
                "WHERE id = ? AND done_at IS NULL",
                (outcome, command_id),
            )

    def outcome(self, command_id: int) -> str | None:
        """How a command went ("" while it waits; None for no such command)."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT outcome, done_at FROM host_commands WHERE id = ?", (command_id,)
            ).fetchone()
        return None if row is None else str(row["outcome"])

    def placed(self, worker_id: int, workspace: Path) -> None:
        """The host that started worker `worker_id` records the workspace it runs in."""
        with self._db.write() as conn:
            conn.execute(
                "UPDATE workers SET workspace = ? WHERE id = ?", (str(workspace), worker_id)
            )

    def report(self, host: str, states: dict[int, Seen], before: dict[int, Report]) -> None:
        """Host `host` runs the workers `states` names (worker id: state, last activity,
        pending question): write what changed since `before` (what it last reported), and
        drop its other reports."""
        changed = [
            (worker_id, state, activity, question)
            for worker_id, (state, activity, question) in states.items()
            if (seen := before.get(worker_id)) is None
            or seen.host != host
            or seen.state is not state
            or seen.last_activity != activity
            or question_text(seen.question) != question_text(question)
        ]
        gone = [
            worker_id
            for worker_id, seen in before.items()
            if seen.host == host and worker_id not in states
        ]
        if not changed and not gone:
            return
        with self._db.write() as conn:
            for worker_id in gone:
                conn.execute(
                    "DELETE FROM session_reports WHERE worker_id = ? AND host = ?",
                    (worker_id, host),
                )
            for worker_id, state, activity, question in changed:
                conn.execute(
                    "INSERT INTO session_reports "
                    "(worker_id, host, state, last_activity, question, reported_at) "
                    f"VALUES (?, ?, ?, ?, ?, {self._db.clock_sql}) ON CONFLICT (worker_id) DO "
                    "UPDATE SET host = excluded.host, state = excluded.state, "
                    "last_activity = excluded.last_activity, question = excluded.question, "
                    "reported_at = excluded.reported_at",
                    (worker_id, host, state.value, activity, question_text(question)),
                )

    def reports(self) -> dict[int, Report]:
        """Every host's last report, by worker id."""
        with self._db.read() as conn:
            rows = conn.execute("SELECT * FROM session_reports").fetchall()
        return {
            int(row["worker_id"]): Report(
                row["host"],
                SessionState(row["state"]),
                None if row["last_activity"] is None else float(row["last_activity"]),
                float(row["reported_at"]),
                question_of(row["question"]),
            )
            for row in rows
        }
