"""What the daemon keeps in the project database, on real SQLite files: schema migrations run as
whole scripts in one transaction; the judgment queue (one open item per issue and kind, closed
when its need is gone, surviving any process); the dispatch pause (failed starts counted by
cause). And the pure part: which situations need the controller's judgment."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from legion.core.decide import Action, Decision
from legion.core.liveness import SessionState
from legion.core.model import Mode, ReviewOutcome, Status
from legion.errors import StoreError
from legion.reconcile.judgments import (
    JudgmentKind,
    JudgmentQueue,
    JudgmentState,
    Need,
    judgment_needs,
)
from legion.reconcile.observe import IssueState
from legion.runtime.transcript import PendingQuestion, QuestionItem
from legion.sessions.pause import PAUSE_AFTER, DispatchPause, normalize_cause
from legion.sessions.registry import WorkerRecord
from legion.sessions.roster import WorkerView
from legion.store import Store
from legion.store import sqlite as dbmod
from legion.store.sqlite import SqliteStore
from legion.trackers.base import Issue

# -- migrations ------------------------------------------------------------------------------------


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def test_a_new_database_gets_every_migration(tmp_path: Path) -> None:
    path = tmp_path / "legion.db"
    SqliteStore(path).close()
    assert version(path) == len(dbmod.MIGRATIONS)
    assert {"issues", "workers", "actions", "judgments", "dispatch_pause"} <= tables(path)
    assert not any(name.startswith("legion_migration") for name in tables(path))


def test_migrations_are_whole_scripts_in_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "legion.db"
    SqliteStore(path).close()
    # A later migration whose text holds a ';' in a string and a trigger body (both would be
    # cut apart by splitting on ';'), then a statement that fails: nothing of it may land.
    good = """
        CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL DEFAULT 'a; b');
        CREATE TRIGGER notes_stamp AFTER INSERT ON notes BEGIN
            UPDATE notes SET text = text || '; seen' WHERE id = new.id;
        END;
        INSERT INTO notes (id) VALUES (1);
    """
    bad = good + "INSERT INTO no_such_table VALUES (1);"
    n = len(dbmod.MIGRATIONS)
    monkeypatch.setattr(dbmod, "MIGRATIONS", (*dbmod.MIGRATIONS, bad))
    with pytest.raises(StoreError, match="no_such_table"):
        SqliteStore(path)
    assert version(path) == n and "notes" not in tables(path)  # all or nothing
    monkeypatch.setattr(dbmod, "MIGRATIONS", (*dbmod.MIGRATIONS[:n], good))
    SqliteStore(path).close()
    assert version(path) == n + 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT text FROM notes").fetchall() == [("a; b; seen",)]


def test_processes_opening_an_old_database_at_once_migrate_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "legion.db"
    SqliteStore(path).close()
    n = len(dbmod.MIGRATIONS)
    # Not idempotent on purpose: run twice, it would count 2.
    counting = "CREATE TABLE IF NOT EXISTS runs (n INTEGER); INSERT INTO runs VALUES (1);"
    monkeypatch.setattr(dbmod, "MIGRATIONS", (*dbmod.MIGRATIONS, counting))
    errors: list[Exception] = []

    def open_it() -> None:
        try:
            SqliteStore(path).close()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert version(path) == n + 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "legion.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {len(dbmod.MIGRATIONS) + 1}")
    with pytest.raises(StoreError, match="newer Legion"):
        SqliteStore(path)


# -- the judgment queue --------------------------------------------------------------------------

ALL = set(JudgmentKind)


def queue(open_store: Callable[[], Store]) -> JudgmentQueue:
    return JudgmentQueue(open_store())


def test_sync_opens_one_item_per_need_and_closes_it_when_the_need_is_gone(
    open_store: Callable[[], Store],
) -> None:
    q = queue(open_store)
    triage = Need("LEG-1", JudgmentKind.TRIAGE, "new issue: One")
    oracle = Need("LEG-2", JudgmentKind.ORACLE, "the plan worker asks: Which?", ref="toolu_1")
    first = q.sync([triage, oracle, triage], ALL)
    assert [(i.issue, i.kind) for i in first.opened] == [
        ("LEG-1", JudgmentKind.TRIAGE),
        ("LEG-2", JudgmentKind.ORACLE),
    ]
    assert all(i.state is JudgmentState.PENDING and i.attempts == 0 for i in first.opened)
    # Idempotent: the same needs change nothing.
    again = q.sync([triage, oracle], ALL)
    assert again.opened == [] and again.closed == []
    # Another process sees the same queue (it is in the database).
    assert [i.key for i in queue(open_store).open_items()] == ["LEG-1:triage", "LEG-2:oracle"]
    # A need that is gone closes its item; one whose kind could not be observed does not.
    gone = q.sync([oracle], {JudgmentKind.ORACLE})
    assert gone.closed == []
    gone = q.sync([oracle], ALL)
    assert [(i.key, i.closed_reason) for i in gone.closed] == [("LEG-1:triage", "resolved")]
    # A new question on the same issue is a new item, not the old one.
    newer = Need("LEG-2", JudgmentKind.ORACLE, "the plan worker asks: And?", ref="toolu_2")
    moved = q.sync([newer], ALL)
    assert [(i.ref, i.closed_reason) for i in moved.closed] == [("toolu_1", "superseded")]
    assert [i.ref for i in moved.opened] == ["toolu_2"]
    (item,) = q.open_items()
    assert item.reason == "the plan worker asks: And?"


def test_one_open_item_per_issue_and_kind_is_enforced_by_the_database(
    open_store: Callable[[], Store],
) -> None:
    database = open_store()
    q = JudgmentQueue(database)
    q.sync([Need("LEG-1", JudgmentKind.TRIAGE, "x")], ALL)
    with pytest.raises(StoreError), database.write() as conn:
        conn.execute(
            "INSERT INTO judgments (issue, kind, created_at) VALUES ('LEG-1', 'triage', 'now')"
        )


def test_delivery_attempts_and_handling_are_recorded(open_store: Callable[[], Store]) -> None:
    q = queue(open_store)
    (item,) = q.sync([Need("LEG-1", JudgmentKind.TRIAGE, "x")], ALL).opened
    q.attempted([item.id])
    (item,) = q.open_items()
    assert (item.state, item.attempts) == (JudgmentState.PENDING, 1)
    q.delivered([item.id], mark=123)
    (item,) = q.open_items()
    assert (item.state, item.attempts, item.delivered_mark) == (JudgmentState.DELIVERED, 2, 123)
    q.handled([item.id])
    (item,) = q.open_items()
    assert item.state is JudgmentState.HANDLED
    assert item.to_json()["state"] == "handled"
    assert q.close(item.id, "escalated to a human: test") is True
    assert q.close(item.id, "again") is False
    assert q.open_items() == [] and q.recent()[-1].closed_reason == "escalated to a human: test"


# -- which situations need judgment (pure) -----------------------------------------------------


def state(
    identifier: str, status: Status, *labels: str, action: Action = Action.SKIP
) -> IssueState:
    issue = Issue(identifier, f"Title of {identifier}", "", status, frozenset(labels))
    return IssueState(issue, None, ReviewOutcome.NONE, False, Decision(action), None)


def blocked(identifier: str, *, state_: SessionState = SessionState.BLOCKED) -> WorkerView:
    record = WorkerRecord(1, identifier, Mode.PLAN, "sid", "leg-x-plan", Path("/w"), "t")
    question = PendingQuestion("toolu_9", (QuestionItem("Which one?", "Q", ("A", "B"), False),))
    return WorkerView(record, None, state_, Path("/t"), None, question)


def test_judgment_needs() -> None:
    states = [
        state("LEG-1", Status.TRIAGE),
        state("LEG-2", Status.TRIAGE, "user-input-needed"),  # a human owns it
        state("LEG-3", Status.ICEBOX, "user-input-needed", "user-feedback-given"),
        state("LEG-4", Status.NEEDS_REVIEW, "worker-done", action=Action.INVESTIGATE_NO_PR),
        state("LEG-5", Status.TODO),
        state("LEG-6", Status.TODO, "user-input-needed"),
        state("LEG-7", Status.DONE, "user-feedback-given"),
    ]
    views = [
        blocked("LEG-5"),
        blocked("LEG-6"),  # already asked a human
        blocked("LEG-8"),  # no such issue
        blocked("LEG-1", state_=SessionState.RUNNING),
    ]
    needs = {need.key: need for need in judgment_needs(states, views)}
    assert set(needs) == {
        "LEG-1:triage",
        "LEG-3:feedback",
        "LEG-4:investigate_no_pr",
        "LEG-5:oracle",
        "LEG-7:feedback",
    }
    assert needs["LEG-5:oracle"].ref == "toolu_9"
    assert needs["LEG-5:oracle"].reason == "the plan worker asks: Which one?"
    assert needs["LEG-1:triage"].reason == "new issue: Title of LEG-1"


# -- the dispatch pause --------------------------------------------------------------------------


def test_the_same_cause_twice_in_a_row_pauses_once_and_a_start_clears_it(
    open_store: Callable[[], Store],
) -> None:
    pause = DispatchPause(open_store())
    assert PAUSE_AFTER == 2
    missing = "Claude Code CLI not found ('/x/claude'): install it"
    assert pause.start_failed(missing) is None
    # Another cause in between breaks the streak; so does a start that worked.
    assert pause.start_failed("something else") is None
    assert pause.start_failed(missing) is None
    pause.start_succeeded()
    assert pause.start_failed(missing) is None
    reason = pause.start_failed(missing, " (see the log)")
    assert reason is not None and pause.reason() == reason
    assert reason.startswith(f"dispatch paused: 2 worker starts in a row failed: {missing}")
    assert "(see the log)" in reason and "`legion start`" in reason
    # Reported once: more failures, or a success, leave the pause as it is.
    assert pause.start_failed(missing) is None
    pause.start_succeeded()
    assert pause.reason() == reason
    assert DispatchPause(open_store()).state().paused_at is not None
    assert pause.clear() == reason
    assert pause.reason() is None and pause.clear() is None


def test_causes_are_the_same_across_workers() -> None:
    one = "Error: Session ID 1b4e28ba-2fa1-11d2-883f-0016cb00a1b2 is already in use (LEG-3)"
    two = "Error: Session ID 6fa459ea-ee8a-3ca4-894e-db77e160355e is already in use (LEG-12)"
    assert normalize_cause(one) == normalize_cause(two)
    dead = "exited as it started: Pane is dead (status 3, Mon Nov 23 04:29:{} 2026)"
    assert normalize_cause(dead.format(13)) == normalize_cause(dead.format(59))
    assert normalize_cause(dead.format(13)) != normalize_cause(dead.replace("3,", "4,").format(1))
