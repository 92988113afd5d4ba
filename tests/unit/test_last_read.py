"""What the daemon's pass last read of a service, kept and read back (`reconcile.last_read`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from legion.core.model import ChecksState, Status
from legion.forges.base import Check, PrState, PullRequest, Review
from legion.reconcile.last_read import LastRead, SeenForge, SeenTracker
from legion.store.sqlite import SqliteStore
from legion.trackers.base import Issue

ISSUE = Issue(
    "ENG-1",
    "Parse it",
    "a long body",
    Status.NEEDS_REVIEW,
    frozenset({"worker-done", "legion"}),
    parent="ENG-9",
    children=("ENG-2",),
    created_at="c",
    updated_at="u",
    id="uuid",
    url="https://linear.app/x/ENG-1",
    backend_status="In Review",
    links=("https://github.com/a/b/pull/3",),
    blocked_by=("ENG-4",),
)
PR = replace(
    PullRequest(3, "ENG-1", "Parse it", "body", "legion/eng-1", "main", PrState.OPEN, False),
    reviews=(Review("changes_requested", "rev", "no", "t1"), Review("approved", "rev", "ok", "t2")),
    check_runs=(Check("build", ChecksState.FAILING, "https://ci/1"),),
    url="https://github.com/a/b/pull/3",
)


def test_a_reading_comes_back_as_the_pass_saw_it_less_the_bodies(tmp_path: Path) -> None:
    kept = LastRead(SqliteStore(tmp_path / "legion.db"))
    kept.keep([ISSUE], {"ENG-1": PR})
    seen = kept.fresh()
    assert seen is not None
    assert seen.issues == (replace(ISSUE, body=""),)
    [pr] = seen.prs.values()
    assert pr.review == PR.review and pr.checks is ChecksState.FAILING
    assert replace(pr, body="", reviews=()) == replace(PR, body="", reviews=())
    listed = SeenTracker(object(), seen)
    assert listed.list_issues(label="legion") == list(seen.issues)
    assert listed.list_issues(status=Status.TODO) == []
    assert SeenForge(object(), seen).prs_by_issue(["ENG-1"]) == dict(seen.prs)


def test_an_old_or_unreadable_reading_is_not_used(tmp_path: Path) -> None:
    db = SqliteStore(tmp_path / "legion.db")
    kept = LastRead(db)
    kept.keep([ISSUE], {})
    assert kept.fresh(max_age=-1) is None  # older than allowed
    for reading in ('{"issues": [{"identifier": 7}], "prs": {}}', "[" * 5000, "{}", "null"):
        with db.write() as conn:
            conn.execute("UPDATE last_read SET reading = ?", (reading,))
        assert kept.fresh() is None, reading
