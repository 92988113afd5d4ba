"""The last question each session's model asked, as the proxy saw it pass (`model_questions`
in the project database).

Why: Claude Code shows an `AskUserQuestion` call on its screen as soon as the call has
streamed in, but at times (a burst of events on a loaded machine; seen with 2.1.x) it writes
that turn to its transcript only once the question is answered. Read from the transcript
alone, such a worker looks mid-turn for good: nobody sees its question, and it waits until it
is taken for stuck. Every model response of a session passes through the daemon's proxy, which
keeps the session's last question here, until the session asks the model again (the question
answered, or left); the roster (`legion.sessions.roster`) takes it for the session's open
question while the transcript, waiting on the model, does not say one.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from legion.plugins import question_tools
from legion.store import Store

from .metering import ToolCall

# The tools whose call is the model asking (each runtime declares its own: `legion.plugins`).
QUESTION_TOOLS = question_tools()


@dataclass(frozen=True, slots=True)
class AskedQuestion:
    """A question call as the proxy saw it: its tool call's id and input, and when."""

    tool_use_id: str
    input: Any
    at: float


class AskedQuestions:
    def __init__(self, db: Store) -> None:
        self._db = db

    def record(self, session_id: str, call: ToolCall) -> None:
        """Session `session_id`'s model asked `call`, now (its earlier question is replaced)."""
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO model_questions (session_id, tool_use_id, input, at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET "
                "tool_use_id = excluded.tool_use_id, input = excluded.input, at = excluded.at",
                (session_id, call.id, json.dumps(call.input), time.time()),
            )

    def last(self, session_id: str) -> AskedQuestion | None:
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT tool_use_id, input, at FROM model_questions WHERE session_id = ?",
                (session_id,),
            ).fetchone()
        if row is None:
            return None
        try:
            raw = json.loads(row["input"])
        except ValueError:
            return None
        return AskedQuestion(str(row["tool_use_id"]), raw, float(row["at"]))

    def forget(self, session_id: str) -> None:
        """The session asks the model again: its last question was answered, or left (a
        resumed session that never wrote it). Only a read when it has none."""
        if self.last(session_id) is None:
            return
        with self._db.write() as conn:
            conn.execute("DELETE FROM model_questions WHERE session_id = ?", (session_id,))
