"""The usage ledger: every model response a session's requests got through the proxy, with
what it used, by session, issue, phase (mode), runtime and model (`model_usage` in the project
database). Written by the daemon's proxy as each response ends; read by `legion usage`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from legion.embedded.db import Database, now

from .metering import Metered

# The phase recorded for the controller's own requests.
CONTROLLER = "controller"


@dataclass(frozen=True, slots=True)
class Spender:
    """Whose request it was: the session, and the issue and phase it works on ("" issue: the
    controller's, or a session Legion does not know)."""

    session_id: str = ""
    issue: str = ""
    mode: str = ""
    runtime: str = ""

    @property
    def role(self) -> str:
        return "controller" if self.mode == CONTROLLER else ("worker" if self.issue else "")


@dataclass(frozen=True, slots=True)
class UsageRow:
    """Tokens summed over the responses of one issue, phase, runtime and model."""

    issue: str
    mode: str
    runtime: str
    model: str
    responses: int
    input_tokens: int
    output_tokens: int
    cache_creation_tokens: int
    cache_read_tokens: int

    @property
    def total(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_creation_tokens
            + self.cache_read_tokens
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "issue": self.issue or None,
            "phase": self.mode,
            "role": Spender(issue=self.issue, mode=self.mode).role,
            "runtime": self.runtime,
            "model": self.model,
            "responses": self.responses,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_tokens": self.cache_creation_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "total_tokens": self.total,
        }


class UsageLedger:
    def __init__(self, db: Database) -> None:
        self._db = db

    def record(self, spender: Spender, used: Metered) -> None:
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO model_usage (at, session_id, issue, mode, runtime, model, "
                "input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    now(),
                    spender.session_id,
                    spender.issue,
                    spender.mode,
                    spender.runtime,
                    used.model,
                    used.input_tokens,
                    used.output_tokens,
                    used.cache_creation_tokens,
                    used.cache_read_tokens,
                ),
            )

    def rows(self, *, issue: str | None = None, since: str | None = None) -> list[UsageRow]:
        """Sums by issue, phase, runtime and model; `issue`: that issue's only; `since`: an
        ISO time (UTC, as recorded): responses from then on."""
        where, params = [], []
        if issue is not None:
            where.append("issue = ?")
            params.append(issue)
        if since is not None:
            where.append("at >= ?")
            params.append(since)
        query = (
            "SELECT issue, mode, runtime, model, COUNT(*) AS responses, "
            "SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens, "
            "SUM(cache_creation_tokens) AS cache_creation_tokens, "
            "SUM(cache_read_tokens) AS cache_read_tokens FROM model_usage"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + " GROUP BY issue, mode, runtime, model ORDER BY issue, MIN(id), model"
        )
        with self._db.read() as conn:
            found = conn.execute(query, params).fetchall()
        return [
            UsageRow(
                r["issue"],
                r["mode"],
                r["runtime"],
                r["model"],
                r["responses"],
                r["input_tokens"],
                r["output_tokens"],
                r["cache_creation_tokens"],
                r["cache_read_tokens"],
            )
            for r in found
        ]
