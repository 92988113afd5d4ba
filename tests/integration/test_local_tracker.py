"""The embedded tracker on a real SQLite file, and (where a test takes `open_store`) on a real
PostgreSQL server too."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from legion.core.model import Status
from legion.errors import InputError, NotFoundError, StoreError
from legion.store import Store
from legion.store.sqlite import MIGRATIONS, SqliteStore
from legion.trackers.local import LocalTracker


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "legion.db"


@pytest.fixture
def tracker(open_store: Callable[[], Store]) -> LocalTracker:
    return LocalTracker(open_store(), issue_key="LEG", extra_labels=["bug"])


def test_migrates_from_an_empty_directory(db_path: Path) -> None:
    assert not db_path.parent.exists()
    SqliteStore(db_path).close()
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"issues", "issue_labels", "comments", "pull_requests", "reviews"} <= tables
    SqliteStore(db_path).close()  # opening again is a no-op


def test_create_list_show(tracker: LocalTracker) -> None:
    first = tracker.create_issue("First", body="Body\nline two", labels=["bug", "Worker-Done"])
    second = tracker.create_issue("Second", status=Status.BACKLOG, parent=first.identifier)
    assert (first.identifier, second.identifier) == ("LEG-1", "LEG-2")
    assert first.labels == {"bug", "worker-done"}
    assert tracker.get_issue("leg-1").children == ("LEG-2",)
    assert tracker.get_issue("LEG-2").parent == "LEG-1"
    assert [i.identifier for i in tracker.list_issues(status=Status.BACKLOG)] == ["LEG-2"]
    assert [i.identifier for i in tracker.list_issues(label="bug")] == ["LEG-1"]
    assert tracker.get_issue("LEG-1").body == "Body\nline two"


def test_labels_are_idempotent(tracker: LocalTracker) -> None:
    tracker.create_issue("x")
    tracker.update_labels("LEG-1", add=["worker-active"])
    updated = tracker.update_labels("LEG-1", add=["worker-active"], remove=["worker-done"])
    assert updated.labels == {"worker-active"}
    assert tracker.update_labels("LEG-1", remove=["worker-active"]).labels == frozenset()


def test_status_and_comments(tracker: LocalTracker) -> None:
    tracker.create_issue("x")
    assert tracker.set_status("LEG-1", Status.IN_PROGRESS).status is Status.IN_PROGRESS
    tracker.add_comment("LEG-1", "plan: do it", author="legion-plan")
    tracker.add_comment("LEG-1", "looks fine", author="sami")
    comments = tracker.list_comments("LEG-1")
    assert [(c.author, c.body) for c in comments] == [
        ("legion-plan", "plan: do it"),
        ("sami", "looks fine"),
    ]
    assert [c.body for c in tracker.list_comments("LEG-1", newest=1)] == ["looks fine"]
    assert tracker.list_comments("LEG-1", newest=0) == []


def test_legions_comment_is_edited_in_place_on_its_own_issue(tracker: LocalTracker) -> None:
    tracker.create_issue("x")
    tracker.create_issue("y")
    written = tracker.add_comment("LEG-1", "- [ ] one", author="legion", by_legion=True)
    edited = tracker.edit_comment("leg-1", written.id, "- [x] one", author="legion")
    assert (edited.id, edited.body, edited.by_legion) == (written.id, "- [x] one", True)
    assert [c.body for c in tracker.list_comments("LEG-1")] == ["- [x] one"]
    theirs = tracker.add_comment("LEG-1", "a person's", author="sami")
    for issue, comment_id in (
        ("LEG-2", written.id),
        ("LEG-1", 999),
        ("LEG-1", "x'; --"),
        ("LEG-1", theirs.id),  # not Legion's to edit
    ):
        with pytest.raises(NotFoundError, match=f"no comment .* of Legion's on {issue}"):
            tracker.edit_comment(issue, comment_id, "moved", author="legion")
    assert [c.body for c in tracker.list_comments("LEG-1")] == ["- [x] one", "a person's"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"title": ""}, "the title is empty"),
        ({"title": "two\nlines"}, "single line"),
        ({"title": "x" * 300}, "at most 256"),
        ({"title": "ok", "body": "x" * 1_000_000}, "at most 65,536"),
        ({"title": "ok", "body": "bell \x07"}, "control character"),
        ({"title": "ok", "labels": ["nope"]}, "unknown label 'nope'"),
        ({"title": "ok", "parent": "LEG-9"}, "no issue LEG-9"),
        ({"title": "ok", "parent": "garbage"}, "invalid issue identifier"),
    ],
)
def test_bad_input_writes_nothing(
    tracker: LocalTracker, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises((InputError, NotFoundError), match=message):
        tracker.create_issue(**kwargs)  # type: ignore[arg-type]
    assert tracker.list_issues() == []


def test_unknown_issue(tracker: LocalTracker) -> None:
    with pytest.raises(NotFoundError, match="no issue LEG-3"):
        tracker.set_status("leg-3", Status.DONE)


def test_unicode_and_shell_text_is_stored_verbatim(tracker: LocalTracker) -> None:
    title = "$(rm -rf ~) `id` 'quotes' \"double\" ünïcødé 🎉"
    issue = tracker.create_issue(title, body="tab\there\r\nwindows newline")
    assert tracker.get_issue(issue.identifier).title == title
    assert tracker.get_issue(issue.identifier).body == "tab\there\nwindows newline"


def test_corrupt_database(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="corrupt or not a Legion database"):
        SqliteStore(db_path)


def test_locked_database(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("legion.store.sqlite.BUSY_TIMEOUT_S", 0.2)
    tracker = LocalTracker(SqliteStore(db_path), issue_key="LEG")
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="locked by another process"):
            LocalTracker(SqliteStore(db_path), issue_key="LEG").create_issue("blocked")
    finally:
        blocker.execute("ROLLBACK")
    tracker.create_issue("after")
    assert [i.title for i in tracker.list_issues()] == ["after"]


def test_writers_in_parallel_all_succeed(open_store: Callable[[], Store]) -> None:
    open_store()
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            store = open_store()
            tracker = LocalTracker(store, issue_key="LEG")
            for i in range(20):
                tracker.create_issue(f"writer {n} issue {i}")
            store.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    issues = LocalTracker(open_store(), issue_key="LEG").list_issues()
    assert [i.identifier for i in issues] == [f"LEG-{n}" for n in range(1, 81)]


def test_newer_schema_is_refused(db_path: Path) -> None:
    SqliteStore(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer Legion"):
        SqliteStore(db_path)
