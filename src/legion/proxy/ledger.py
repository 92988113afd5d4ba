"""The usage ledger: every model response a session's requests got through the proxy, with
what it used, by session, issue, phase (mode), runtime and model (`model_usage` in the project
database). Written by the daemon's proxy as each response ends; read by `legion usage`. A
model's answer whose usage the proxy could not read is a row marked unread, with no tokens:
what it used is not known, and no budget counts it (`legion usage` says how many)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from legion.core.usage import Usage
from legion.store import Store, now

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
    used: Usage
    # Of `responses`, those whose usage could not be read (their tokens are not in `used`).
    unread: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "issue": self.issue or None,
            "phase": self.mode,
            "role": Spender(issue=self.issue, mode=self.mode).role,
            "runtime": self.runtime,
            "model": self.model,
            "responses": self.responses,
            "unread_responses": self.unread,
            "input_tokens": self.used.input,
            "output_tokens": self.used.output,
            "cache_creation_tokens": self.used.cache_write,
            "cache_read_tokens": self.used.cache_read,
            "total_tokens": self.used.total,
        }


class UsageLedger:
    def __init__(self, db: Store) -> None:
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

    def record_unread(self, spender: Spender) -> None:
        """A model's answer that reported no usage the proxy could read."""
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO model_usage (at, session_id, issue, mode, runtime, model, "
                "input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens, unread) "
                "VALUES (?, ?, ?, ?, ?, '', 0, 0, 0, 0, 1)",
                (now(), spender.session_id, spender.issue, spender.mode, spender.runtime),
            )

    def total(
        self, *, issue: str | None = None, since: str | None = None, session: str | None = None
    ) -> int:
        """Every token counted once (what a budget is measured in), over `issue`'s responses
        (or `session`'s) from `since` on (each optional, as in `rows`)."""
        where, params = _filter(issue, since, session)
        query = (
            "SELECT COALESCE(SUM(input_tokens + output_tokens + cache_creation_tokens "
            "+ cache_read_tokens), 0) FROM model_usage" + where
        )
        with self._db.read() as conn:
            return int(conn.execute(query, params).fetchone()[0])

    def rows(self, *, issue: str | None = None, since: str | None = None) -> list[UsageRow]:
        """Sums by issue, phase, runtime and model; `issue`: that issue's only; `since`: an
        ISO time (UTC, as recorded): responses from then on."""
        where, params = _filter(issue, since)
        query = (
            "SELECT issue, mode, runtime, model, COUNT(*) AS responses, "
            "SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens, "
            "SUM(cache_creation_tokens) AS cache_creation_tokens, "
            "SUM(cache_read_tokens) AS cache_read_tokens, SUM(unread) AS unread FROM model_usage"
            + where
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
                Usage(
                    input=r["input_tokens"],
                    output=r["output_tokens"],
                    cache_read=r["cache_read_tokens"],
                    cache_write=r["cache_creation_tokens"],
                ),
                int(r["unread"]),
            )
            for r in found
        ]

    def by_day(self, since: str) -> list[tuple[str, int]]:
        """Every token counted once, by UTC day (`YYYY-MM-DD`) from `since` on, oldest first;
        a day with none is not listed."""
        query = (
            "SELECT substr(at, 1, 10) AS day, SUM(input_tokens + output_tokens "
            "+ cache_creation_tokens + cache_read_tokens) AS used FROM model_usage "
            "WHERE at >= ? GROUP BY substr(at, 1, 10) ORDER BY day"
        )
        with self._db.read() as conn:
            found = conn.execute(query, (since,)).fetchall()
        return [(str(r["day"]), int(r["used"])) for r in found]

    def by_phase(self, issue: str | None = None) -> dict[str, dict[str, Usage]]:
        """Tokens by issue and phase (mode), as `WorkerRoster.usage` reads them from the
        transcripts; the controller's own are not an issue's, and are left out."""
        found: dict[str, dict[str, Usage]] = {}
        for row in self.rows(issue=issue):
            if not row.issue:
                continue
            phases = found.setdefault(row.issue, {})
            phases[row.mode] = phases.get(row.mode, Usage()) + row.used
        return found


def _filter(
    issue: str | None, since: str | None, session: str | None = None
) -> tuple[str, list[str]]:
    """The WHERE clause (with its leading space; "" for none) and its parameters."""
    where, params = [], []
    if session is not None:
        where.append("session_id = ?")
        params.append(session)
    if issue is not None:
        where.append("issue = ?")
        params.append(issue)
    if since is not None:
        where.append("at >= ?")
        params.append(since)
    return (f" WHERE {' AND '.join(where)}" if where else ""), params
