"""The judgment queue: what needs the controller's judgment, kept in the project database.

Some situations are not the decision table's to resolve: a new issue in Triage, a human's answer
on an issue the table skips, a review that finished with no pull request, a worker blocked on a
question. Each is a *need*, computed from one observation (`judgment_needs`, pure). A reconcile
pass syncs the needs into the queue: a need with no open item opens one (at most one open item
per issue and kind, enforced by a unique index); an open item whose need is gone is closed. The
daemon delivers open items to the controller when it is idle, retrying until they are delivered,
and notes when the controller has ended a turn after receiving them (handled). Everything is in
the database, so a daemon that restarts carries on with the same queue.

An item's `ref` says which occurrence of the condition it is about (for an `oracle` item, the
id of the question): a new question on the same issue supersedes the old item instead of being
mistaken for it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from legion.core.decide import Action
from legion.core.liveness import SessionState
from legion.core.model import Label, Status
from legion.reconcile.observe import IssueState
from legion.sessions.roster import WorkerView
from legion.store import Connection, Row, Store, now

REASON_CHARS = 200


class JudgmentKind(StrEnum):
    TRIAGE = "triage"  # a new issue in Triage: route it
    FEEDBACK = "feedback"  # a human answered on a Triage, Icebox or Done issue: act on it
    INVESTIGATE_NO_PR = "investigate_no_pr"  # the reviewer finished, no pull request found
    ORACLE = "oracle"  # a worker is blocked on a question: answer it, or ask a human


class JudgmentState(StrEnum):
    PENDING = "pending"  # not yet delivered to the controller
    DELIVERED = "delivered"  # typed into the controller (or given with its start prompt)
    HANDLED = "handled"  # the controller ended a turn after receiving it
    CLOSED = "closed"  # the need is gone (or Legion escalated it)


@dataclass(frozen=True, slots=True)
class Need:
    issue: str
    kind: JudgmentKind
    reason: str
    ref: str = ""

    @property
    def key(self) -> str:
        return f"{self.issue}:{self.kind.value}"


@dataclass(frozen=True, slots=True)
class Judgment:
    id: int
    issue: str
    kind: JudgmentKind
    ref: str
    reason: str
    created_at: str
    attempts: int
    delivered_at: str | None
    delivered_mark: int | None
    handled_at: str | None
    closed_at: str | None
    closed_reason: str | None

    @property
    def key(self) -> str:
        return f"{self.issue}:{self.kind.value}"

    @property
    def state(self) -> JudgmentState:
        if self.closed_at is not None:
            return JudgmentState.CLOSED
        if self.handled_at is not None:
            return JudgmentState.HANDLED
        if self.delivered_at is not None:
            return JudgmentState.DELIVERED
        return JudgmentState.PENDING

    def age(self, at: float) -> float:
        """Seconds since the item was queued."""
        return max(0.0, at - timestamp(self.created_at))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "issue": self.issue,
            "kind": self.kind.value,
            "state": self.state.value,
            "reason": self.reason,
            "created_at": self.created_at,
            "attempts": self.attempts,
            "delivered_at": self.delivered_at,
            "handled_at": self.handled_at,
            "closed_at": self.closed_at,
            "closed_reason": self.closed_reason,
        }


def timestamp(iso: str) -> float:
    """Seconds since the epoch of one of the database's timestamps."""
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= REASON_CHARS else flat[: REASON_CHARS - 1] + "\u2026"


_WAITING_FOR_HUMAN = frozenset({Label.USER_INPUT_NEEDED, Label.USER_FEEDBACK_GIVEN})
_SKIPPED_BY_TABLE = frozenset({Status.TRIAGE, Status.ICEBOX, Status.DONE})


def judgment_needs(states: Sequence[IssueState], views: Iterable[WorkerView]) -> list[Need]:
    """Pure: what needs the controller's judgment in one observation, at most one need per
    issue and kind."""
    needs: dict[str, Need] = {}

    def add(need: Need) -> None:
        needs.setdefault(need.key, need)

    labels_of = {state.issue.identifier: state.issue.workflow_labels for state in states}
    for state in states:
        issue = state.issue
        labels = issue.workflow_labels
        if issue.status in _SKIPPED_BY_TABLE and Label.USER_FEEDBACK_GIVEN in labels:
            add(Need(issue.identifier, JudgmentKind.FEEDBACK, "a human answered"))
        elif issue.status is Status.TRIAGE and Label.USER_INPUT_NEEDED not in labels:
            add(Need(issue.identifier, JudgmentKind.TRIAGE, _short(f"new issue: {issue.title}")))
        if state.decision.action is Action.INVESTIGATE_NO_PR:
            add(
                Need(
                    issue.identifier,
                    JudgmentKind.INVESTIGATE_NO_PR,
                    "the reviewer finished and no pull request was found",
                )
            )
    for view in views:
        question = view.question
        labels_or_none = labels_of.get(view.record.issue)
        if view.state is not SessionState.BLOCKED or question is None or labels_or_none is None:
            continue
        if labels_or_none & _WAITING_FOR_HUMAN:
            continue  # a human owns the question already
        reason = _short(f"the {view.record.mode.value} worker asks: {question.text}")
        add(Need(view.record.issue, JudgmentKind.ORACLE, reason, ref=question.tool_use_id))
    return list(needs.values())


@dataclass
class SyncResult:
    opened: list[Judgment] = field(default_factory=list)
    closed: list[Judgment] = field(default_factory=list)


class JudgmentQueue:
    def __init__(self, db: Store) -> None:
        self._db = db

    def open_items(self) -> list[Judgment]:
        """Every open item, oldest first."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT * FROM judgments WHERE closed_at IS NULL ORDER BY id"
            ).fetchall()
        return [_judgment(row) for row in rows]

    def open_item(self, issue: str, kind: JudgmentKind) -> Judgment | None:
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT * FROM judgments WHERE issue = ? AND kind = ? AND closed_at IS NULL",
                (issue, kind.value),
            ).fetchone()
        return None if row is None else _judgment(row)

    def recent(self, limit: int = 20) -> list[Judgment]:
        """The latest items, open or closed, newest last."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT * FROM judgments ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        return [_judgment(row) for row in reversed(rows)]

    def sync(self, needs: Iterable[Need], known: Collection[JudgmentKind]) -> SyncResult:
        """Make the open items match `needs`, in one transaction. Only items of the kinds in
        `known` are closed for lack of a need: a kind whose condition could not be observed
        (the forge did not answer) keeps its items."""
        wanted: dict[tuple[str, str], Need] = {}
        for each in needs:
            wanted.setdefault((each.issue, each.kind.value), each)
        result = SyncResult()
        stamp = now()
        with self._db.write() as conn:
            rows = conn.execute("SELECT * FROM judgments WHERE closed_at IS NULL").fetchall()
            current = {(row["issue"], row["kind"]): _judgment(row) for row in rows}
            for key, item in current.items():
                need = wanted.get(key)
                if need is None:
                    if item.kind in known:
                        result.closed.append(_close(conn, item, "resolved", stamp))
                elif need.ref != item.ref:
                    result.closed.append(_close(conn, item, "superseded", stamp))
                    result.opened.append(_insert(conn, need, stamp))
            for key, fresh in wanted.items():
                if key not in current:
                    result.opened.append(_insert(conn, fresh, stamp))
        return result

    def close(self, item_id: int, reason: str) -> bool:
        """Close an open item; False when it was closed already."""
        with self._db.write() as conn:
            cursor = conn.execute(
                "UPDATE judgments SET closed_at = ?, closed_reason = ? "
                "WHERE id = ? AND closed_at IS NULL",
                (now(), reason, item_id),
            )
        return cursor.rowcount > 0

    def delivered(self, ids: Iterable[int], mark: int) -> None:
        """The items went to the controller; `mark` is its transcript's size just before."""
        self._update(
            "UPDATE judgments SET attempts = attempts + 1, delivered_at = ?, delivered_mark = ? "
            "WHERE id = ? AND closed_at IS NULL",
            lambda item_id: (now(), mark, item_id),
            ids,
        )

    def attempted(self, ids: Iterable[int]) -> None:
        """A delivery was tried and failed: count it; the items stay as they were."""
        self._update(
            "UPDATE judgments SET attempts = attempts + 1 WHERE id = ? AND closed_at IS NULL",
            lambda item_id: (item_id,),
            ids,
        )

    def handled(self, ids: Iterable[int]) -> None:
        self._update(
            "UPDATE judgments SET handled_at = ? "
            "WHERE id = ? AND closed_at IS NULL AND handled_at IS NULL",
            lambda item_id: (now(), item_id),
            ids,
        )

    def _update(self, sql: str, params: Any, ids: Iterable[int]) -> None:
        todo = list(ids)
        if not todo:
            return
        with self._db.write() as conn:
            for item_id in todo:
                conn.execute(sql, params(item_id))


def _insert(conn: Connection, need: Need, stamp: str) -> Judgment:
    row = conn.execute(
        "INSERT INTO judgments (issue, kind, ref, reason, created_at) VALUES (?, ?, ?, ?, ?) "
        "RETURNING *",
        (need.issue, need.kind.value, need.ref, need.reason, stamp),
    ).fetchone()
    return _judgment(row)


def _close(conn: Connection, item: Judgment, reason: str, stamp: str) -> Judgment:
    conn.execute(
        "UPDATE judgments SET closed_at = ?, closed_reason = ? WHERE id = ?",
        (stamp, reason, item.id),
    )
    row = conn.execute("SELECT * FROM judgments WHERE id = ?", (item.id,)).fetchone()
    return _judgment(row)


def _judgment(row: Row) -> Judgment:
    return Judgment(
        id=row["id"],
        issue=row["issue"],
        kind=JudgmentKind(row["kind"]),
        ref=row["ref"],
        reason=row["reason"],
        created_at=row["created_at"],
        attempts=row["attempts"],
        delivered_at=row["delivered_at"],
        delivered_mark=row["delivered_mark"],
        handled_at=row["handled_at"],
        closed_at=row["closed_at"],
        closed_reason=row["closed_reason"],
    )


def wake_reason(items: Sequence[Judgment]) -> str:
    """How a wake-up names its items: `LEG-3:triage, LEG-4:oracle`."""
    return ", ".join(sorted({item.key for item in items}))
