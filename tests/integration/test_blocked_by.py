""" "Blocked by" on the embedded tracker: the relation as data, through the real `legion` CLI,
and as an input of `legion state` (an issue waits until its blockers are Done)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path

import pytest

from legion.core.model import Status
from legion.errors import InputError
from legion.forges.local import LocalForge
from legion.reconcile.observe import BLOCKER_LOOKUPS, KnownLiveWorkers, Snapshot, observe
from legion.store import sqlite as dbmod
from legion.store.sqlite import SqliteStore
from legion.trackers.base import Issue
from legion.trackers.local import LocalTracker
from tests.support.cli import LegionRunner, Result


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


def test_dispatch_refuses_past_the_wip_limit_unless_forced(legion: LegionRunner) -> None:
    assert legion("issue", "create", "First").returncode == 0
    full = {"LEGION_WIP_LIMIT": "0"}  # no code worker more may start
    refused = legion("dispatch", "LEG-1", "plan", env=full)
    one_line_error(refused, "WIP limit 0 reached (--force starts it anyway)")
    # Forced, the WIP limit is no reason: what stops it now is further on (no CLI, no daemon).
    forced = legion("dispatch", "LEG-1", "plan", "--force", env=full)
    assert forced.returncode != 0 and "WIP limit" not in forced.stderr, forced.stderr


def test_cycle_check_sees_the_whole_chain(tmp_path: Path) -> None:
    tracker = LocalTracker(SqliteStore(tmp_path / "legion.db"), issue_key="LEG")
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
    old = SqliteStore(path)
    with old.write() as conn:  # an issue as the Legion of that schema wrote it
        conn.execute(
            "INSERT INTO issues (number, identifier, title, status, created_at, updated_at) "
            "VALUES (1, 'LEG-1', 'Made before', 'Todo', '2026-01-01', '2026-01-01')"
        )
    old.close()
    monkeypatch.setattr(dbmod, "MIGRATIONS", every)
    tracker = LocalTracker(SqliteStore(path), issue_key="LEG")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(every)
    assert tracker.get_issue("LEG-1").blocked_by == ()
    tracker.create_issue("Made after", blocked_by=["LEG-1"])
    assert tracker.get_issue("LEG-2").blocked_by == ("LEG-1",)


# -- `legion.reconcile.observe`: blockers outside the listing --------------------------------------


class CountingTracker:
    """The real embedded tracker, counting the issues read one by one."""

    def __init__(self, tracker: LocalTracker) -> None:
        self.tracker = tracker
        self.reads: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.tracker, name)

    def get_issue(self, identifier: str) -> Issue:
        self.reads.append(identifier)
        return self.tracker.get_issue(identifier)


def observe_listed(tmp_path: Path, tracker: CountingTracker, listed: list[Issue]) -> Snapshot:
    # The same database.
    forge = LocalForge(tracker.tracker._db, tmp_path, merge_lock=tmp_path / "merge.lock")
    return observe(
        str(uuid.uuid4()),
        tracker,  # type: ignore[arg-type]
        forge,
        KnownLiveWorkers(set()),
        issues=listed,
        epic_children={},
    )


def test_a_blocker_outside_the_listing_is_looked_up_once(tmp_path: Path) -> None:
    real = LocalTracker(SqliteStore(tmp_path / "legion.db"), issue_key="LEG")
    real.create_issue("Done long ago", status=Status.DONE)  # LEG-1
    real.create_issue("Still open")  # LEG-2
    real.create_issue("Waits for both", blocked_by=["LEG-1", "LEG-2"])  # LEG-3
    real.create_issue("Waits for the first", blocked_by=["LEG-1"])  # LEG-4
    tracker = CountingTracker(real)
    listed = [real.get_issue("LEG-3"), real.get_issue("LEG-4")]  # as if LEG-1, 2 fell off it
    snapshot = observe_listed(tmp_path, tracker, listed)
    states = {s.issue.identifier: s for s in snapshot.issues}
    assert states["LEG-3"].open_blockers == ("LEG-2",)
    assert states["LEG-3"].decision.action.value == "skip"
    assert states["LEG-4"].open_blockers == ()
    assert states["LEG-4"].decision.action.value == "dispatch_planner"
    assert sorted(tracker.reads) == ["LEG-1", "LEG-2"]  # each once, for both issues
    assert snapshot.warnings == []


def test_lookups_outside_the_listing_are_bounded(tmp_path: Path) -> None:
    real = LocalTracker(SqliteStore(tmp_path / "legion.db"), issue_key="LEG")
    count = BLOCKER_LOOKUPS + 2
    for n in range(count):
        real.create_issue(f"blocker {n}", status=Status.DONE)
    waiting = real.create_issue("waits", blocked_by=[f"LEG-{n + 1}" for n in range(count)])
    tracker = CountingTracker(real)
    snapshot = observe_listed(tmp_path, tracker, [waiting])
    [state] = snapshot.issues
    assert len(tracker.reads) == BLOCKER_LOOKUPS
    # Past the bound a blocker counts as not Done (waiting a pass is cheap), with a warning.
    assert state.open_blockers == (f"LEG-{count - 1}", f"LEG-{count}")
    assert state.decision.action.value == "skip"
    assert len(snapshot.warnings) == 2 and "not looked up this pass" in snapshot.warnings[0]
    # Issues Legion leaves alone cost no lookup at all.
    tracker.reads.clear()
    idle = real.create_issue("someday", status=Status.ICEBOX, blocked_by=["LEG-1"])
    assert observe_listed(tmp_path, tracker, [idle]).issues[0].open_blockers == ()
    assert tracker.reads == []
