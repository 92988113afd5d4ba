"""The worker registry: every worker Legion started, until it is retired.

The registry is what lets `legion workers` report a worker whose window was killed from
outside as *dead* rather than forget it, and what makes dispatch refuse a second worker.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from legion.core.model import Mode, normalize_identifier
from legion.errors import ConflictError
from legion.plugins import DEFAULT_RUNTIME
from legion.store import Row, Store, now


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    id: int
    issue: str
    mode: Mode
    session_id: str
    window: str
    workspace: Path
    started_at: str
    runtime: str = DEFAULT_RUNTIME  # the agent CLI its session runs on
    host: str = ""  # the fleet's host whose daemon runs it ("": recorded before the fleet)


class Registry:
    def __init__(self, db: Store) -> None:
        self._db = db

    @property
    def db(self) -> Store:
        return self._db

    def current(self) -> list[WorkerRecord]:
        """Workers not yet retired, oldest first."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT * FROM workers WHERE ended_at IS NULL ORDER BY id"
            ).fetchall()
        return [_record(row) for row in rows]

    def current_for(self, issue: str) -> list[WorkerRecord]:
        identifier = normalize_identifier(issue)
        return [record for record in self.current() if record.issue == identifier]

    def start(
        self,
        issue: str,
        mode: Mode,
        session_id: str,
        window: str,
        workspace: Path,
        runtime: str = DEFAULT_RUNTIME,
        host: str = "",
        seen: Collection[int] | None = None,
    ) -> WorkerRecord:
        """Record a new worker, retiring any earlier record for the same issue and mode.

        `seen`: the issue's current records the caller looked at and found no live worker in.
        Any other is a start recorded meanwhile (another `legion dispatch`, another host of the
        fleet): a ConflictError, in the transaction that would record this one, so that one
        live worker per issue holds in the store, not only in each caller's look."""
        identifier = normalize_identifier(issue)
        with self._db.write() as conn:
            if seen is not None:
                rows = conn.execute(
                    'SELECT id, "window", host FROM workers WHERE issue = ? AND ended_at IS NULL',
                    (identifier,),
                ).fetchall()
                other = [row for row in rows if row["id"] not in seen]
                if other:
                    where = f" on {other[0]['host']}" if other[0]["host"] else ""
                    raise ConflictError(
                        f"{identifier} already has a live worker: window {other[0]['window']}"
                        f"{where} was started meanwhile; see `legion workers`"
                    )
            stamp = now()
            conn.execute(
                "UPDATE workers SET ended_at = ? WHERE issue = ? AND mode = ? AND ended_at IS NULL",
                (stamp, identifier, mode.value),
            )
            row = conn.execute(
                "INSERT INTO workers "
                '(issue, mode, session_id, "window", workspace, started_at, runtime, host) '
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
                (identifier, mode.value, session_id, window, str(workspace), stamp, runtime, host),
            ).fetchone()
        return _record(row)

    def latest(self, issue: str) -> WorkerRecord | None:
        """The most recently started worker of `issue`, retired or not."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT * FROM workers WHERE issue = ? ORDER BY id DESC LIMIT 1",
                (normalize_identifier(issue),),
            ).fetchone()
        return None if row is None else _record(row)

    def latest_modes(self) -> dict[str, Mode]:
        """Each issue's most recently started worker's mode, retired or not (one query)."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT issue, mode FROM workers WHERE id IN "
                "(SELECT MAX(id) FROM workers GROUP BY issue)"
            ).fetchall()
        return {row["issue"]: Mode(row["mode"]) for row in rows}

    def by_session(self, session_id: str) -> WorkerRecord | None:
        """The latest worker that ran session `session_id`, retired or not."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT * FROM workers WHERE session_id = ? ORDER BY id DESC LIMIT 1",
                (session_id,),
            ).fetchone()
        return None if row is None else _record(row)

    def current_by_id(self, record_id: int) -> WorkerRecord | None:
        """Worker `record_id`, unless it is retired."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT * FROM workers WHERE id = ? AND ended_at IS NULL", (record_id,)
            ).fetchone()
        return None if row is None else _record(row)

    def history(self) -> list[tuple[WorkerRecord, str | None]]:
        """Every worker ever started, oldest first, with when it was retired (None: current)."""
        with self._db.read() as conn:
            rows = conn.execute("SELECT * FROM workers ORDER BY id").fetchall()
        return [(_record(row), row["ended_at"]) for row in rows]

    def retire(self, record_id: int) -> None:
        with self._db.write() as conn:
            conn.execute(
                "UPDATE workers SET ended_at = ? WHERE id = ? AND ended_at IS NULL",
                (now(), record_id),
            )


def _record(row: Row) -> WorkerRecord:
    return WorkerRecord(
        id=row["id"],
        issue=row["issue"],
        mode=Mode(row["mode"]),
        session_id=row["session_id"],
        window=row["window"],
        workspace=Path(row["workspace"]),
        started_at=row["started_at"],
        runtime=row["runtime"],
        host=row["host"],
    )
