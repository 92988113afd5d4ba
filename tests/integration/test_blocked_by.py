""" "Blocked by" on the embedded tracker: the relation as data, through the real `legion` CLI,
and as an input of `legion state` (an issue waits until its blockers are Done)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from legion.embedded import db as dbmod
from legion.embedded.db import Database
from legion.errors import InputError
from legion.trackers.local import LocalTracker
from tests.conftest import LegionRunner, Result


def one_line_error(result: Result, fragment: str, code: int = 2) -> None:
    assert result.returncode == code, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("legion: error: "), result.stderr
    assert fragment in lines[0], lines[0]


def state_of(legion: LegionRunner, identifier: str) -> dict[str, object]:
    result = legion("state", "--json")
    assert result.returncode == 0, result.stderr
    entry: dict[str, object] = json.loads(result.stdout)["issues"][identifier]
    return entry


def test_create_blocked_show_state_then_dispatch_once_done(legion: LegionRunner) -> None:
    assert legion("issue", "create", "Schema", "--status", "Done").returncode == 0  # LEG-1
    assert legion("issue", "create", "Parser").stdout.strip() == "LEG-2"
    created = legion(
        "issue", "create", "Wire it", "--blocked-by", "leg-2", "--blocked-by", "LEG-1", "--json"
    )
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["blocked_by"] == ["LEG-1", "LEG-2"]

    shown = json.loads(legion("issue", "show", "LEG-3", "--json").stdout)
    assert shown["blocked_by"] == ["LEG-1", "LEG-2"]
    assert shown["blockers"] == [
        {"identifier": "LEG-1", "status": "Done"},
        {"identifier": "LEG-2", "status": "Todo"},
    ]
    text = legion("issue", "show", "LEG-3").stdout
    assert "Blocked by: LEG-1 (Done), LEG-2 (Todo)" in text

    # LEG-1 is Done: only LEG-2 holds it up.
    entry = state_of(legion, "LEG-3")
    assert (entry["suggested_action"], entry["blocked_by"]) == ("skip", ["LEG-2"])
    assert state_of(legion, "LEG-2")["suggested_action"] == "dispatch_planner"
    table = legion("state").stdout
    assert "skip (blocked by LEG-2)" in " ".join(table.split())

    assert legion("issue", "move", "LEG-2", "Done").returncode == 0
    entry = state_of(legion, "LEG-3")
    assert (entry["suggested_action"], entry["blocked_by"]) == ("dispatch_planner", [])


def test_block_and_unblock_an_existing_issue(legion: LegionRunner) -> None:
    for title in ("One", "Two", "Three"):
        assert legion("issue", "create", title).returncode == 0
    added = legion("issue", "block", "LEG-3", "--by", "LEG-1", "--by", "LEG-2")
    assert added.stdout.strip() == "LEG-3: blocked by LEG-1, LEG-2"
    again = legion("issue", "block", "LEG-3", "--by", "LEG-1")  # present already: a no-op
    assert again.stdout.strip() == "LEG-3: blocked by LEG-1, LEG-2"
    removed = legion("issue", "block", "LEG-3", "--remove", "LEG-1", "--json")
    assert json.loads(removed.stdout)["blocked_by"] == ["LEG-2"]
    assert state_of(legion, "LEG-3")["blocked_by"] == ["LEG-2"]
    assert legion("issue", "block", "LEG-3", "--remove", "LEG-2").stdout.strip() == (
        "LEG-3: blocked by (nothing)"
    )
    assert state_of(legion, "LEG-3")["suggested_action"] == "dispatch_planner"


def test_bad_relations_are_refused_with_one_line(legion: LegionRunner) -> None:
    for title in ("One", "Two", "Three"):
        assert legion("issue", "create", title).returncode == 0
    one_line_error(legion("issue", "block", "LEG-1", "--by", "LEG-1"), "blocked by itself")
    one_line_error(legion("issue", "block", "LEG-1", "--by", "LEG-9"), "no issue LEG-9")
    one_line_error(
        legion("issue", "create", "Four", "--blocked-by", "LEG-9"), "no issue LEG-9 to block"
    )
    assert legion("issue", "list", "--json").stdout.count('"identifier"') == 3  # none created
    assert legion("issue", "block", "LEG-2", "--by", "LEG-1").returncode == 0
    assert legion("issue", "block", "LEG-3", "--by", "LEG-2").returncode == 0
    one_line_error(legion("issue", "block", "LEG-1", "--by", "LEG-3"), "would make a cycle")
    one_line_error(legion("issue", "block", "LEG-1", "--by", "LEG-2"), "LEG-2 already waits")
    one_line_error(legion("issue", "block", "LEG-1"), "nothing to do")
    assert json.loads(legion("issue", "show", "LEG-1", "--json").stdout)["blocked_by"] == []


def test_dispatch_refuses_a_blocked_issue_unless_forced(legion: LegionRunner) -> None:
    assert legion("issue", "create", "First").returncode == 0
    assert legion("issue", "create", "Second", "--blocked-by", "LEG-1").returncode == 0
    refused = legion("dispatch", "LEG-2", "plan")
    one_line_error(refused, "LEG-2 is blocked by LEG-1 (Todo)")
    assert "--force" in refused.stderr


def test_cycle_check_sees_the_whole_chain(tmp_path: Path) -> None:
    tracker = LocalTracker(Database(tmp_path / "legion.db"), issue_key="LEG")
    for title in "ABCD":
        tracker.create_issue(title)
    tracker.set_blocked_by("LEG-2", add=["LEG-1"])
    tracker.set_blocked_by("LEG-3", add=["LEG-2"])
    tracker.set_blocked_by("LEG-4", add=["LEG-3"])
    with pytest.raises(InputError, match=r"LEG-1 -> LEG-4 -> LEG-3 -> LEG-2 -> LEG-1"):
        tracker.set_blocked_by("LEG-1", add=["LEG-4"])
    with pytest.raises(InputError, match="both added and removed"):
        tracker.set_blocked_by("LEG-4", add=["LEG-1"], remove=["LEG-1"])
    # Removing a link makes the same addition fine.
    tracker.set_blocked_by("LEG-3", remove=["LEG-2"])
    assert tracker.set_blocked_by("LEG-1", add=["LEG-4"]).blocked_by == ("LEG-4",)
    assert [i.blocked_by for i in tracker.list_issues()] == [
        ("LEG-4",),
        ("LEG-1",),
        (),
        ("LEG-3",),
    ]


def test_an_older_database_migrates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "legion.db"
    every = dbmod.MIGRATIONS
    monkeypatch.setattr(dbmod, "MIGRATIONS", every[:6])  # before "blocked by"
    old = Database(path)
    with old.write() as conn:  # an issue as the Legion of that schema wrote it
        conn.execute(
            "INSERT INTO issues (number, identifier, title, status, created_at, updated_at) "
            "VALUES (1, 'LEG-1', 'Made before', 'Todo', '2026-01-01', '2026-01-01')"
        )
    old.close()
    monkeypatch.setattr(dbmod, "MIGRATIONS", every)
    tracker = LocalTracker(Database(path), issue_key="LEG")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(every)
    assert tracker.get_issue("LEG-1").blocked_by == ()
    tracker.create_issue("Made after", blocked_by=["LEG-1"])
    assert tracker.get_issue("LEG-2").blocked_by == ("LEG-1",)
