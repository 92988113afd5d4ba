"""The reconciler's bookkeeping on real SQLite and git, with no worker started (WIP limit 0):
failures are logged and retried, and every pass is safe to repeat."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.core.model import Status
from legion.errors import BackendError, BackendErrorKind, NotFoundError, StoreError
from legion.reconcile import Reconciler, human_answer
from legion.reconcile.answers import plain
from legion.store.actionlog import ActionLog, OutcomeKind
from legion.trackers.local import LocalTracker
from legion.trackers.splits import Splits
from tests.support.cli import run_legion


class FlakyTracker(LocalTracker):
    """The embedded tracker, failing to move the issues named in `broken`."""

    broken: ClassVar[set[str]] = set()
    gone: ClassVar[set[str]] = set()  # deleted between the pass's read and its write

    def set_status(self, identifier: str, status: Status):  # type: ignore[no-untyped-def]
        if identifier in self.broken:
            raise StoreError("the tracker is unreachable (simulated)")
        if identifier in self.gone:
            raise NotFoundError(f"no issue {identifier} (simulated)")
        return super().set_status(identifier, status)


@pytest.fixture
def reconciler(project: Path) -> Reconciler:
    loaded = load_project(project, flags={"wip_limit": 0})
    backends = open_backends(loaded)
    tracker = FlakyTracker(backends.db, issue_key="LEG")
    backends.tracker = tracker
    workers = open_workers(loaded, backends)
    return Reconciler(loaded, tracker, backends.forge, workers, ActionLog(backends.db))


def test_a_failing_call_is_logged_and_retried_without_harm(reconciler: Reconciler) -> None:
    tracker = reconciler.tracker
    assert isinstance(tracker, FlakyTracker)
    for title in ("One", "Two"):
        tracker.create_issue(title, labels=["worker-done"])
    FlakyTracker.broken = {"LEG-1"}
    outcomes = {o.issue: o for o in reconciler.run() if o.action == "transition_to_in_progress"}
    assert outcomes["LEG-1"].kind is OutcomeKind.FAILED
    assert "unreachable" in outcomes["LEG-1"].detail
    assert outcomes["LEG-2"].kind is OutcomeKind.DONE  # moved; its worker waits for a WIP slot
    assert "moved to In Progress; deferred: WIP limit 0" in outcomes["LEG-2"].detail
    one, two = tracker.get_issue("LEG-1"), tracker.get_issue("LEG-2")
    assert one.status is Status.TODO and one.labels == {"worker-done"}  # left as it was
    assert two.status is Status.IN_PROGRESS and two.labels == frozenset()
    # next pass: the fault is gone; LEG-1 catches up, LEG-2 waits for a slot, nothing repeats
    FlakyTracker.broken = set()
    outcomes = {o.issue: o for o in reconciler.run()}
    assert outcomes["LEG-1"].action == "transition_to_in_progress"
    assert outcomes["LEG-2"].action == "dispatch_implementer"
    assert outcomes["LEG-2"].kind is OutcomeKind.DEFERRED
    assert tracker.get_issue("LEG-1").status is Status.IN_PROGRESS
    log = reconciler.log.tail(50)
    assert [(e.issue, e.outcome) for e in log if e.action == "transition_to_in_progress"] == [
        ("LEG-1", "failed"),
        ("LEG-2", "done"),
        ("LEG-1", "done"),
    ]


def test_an_issue_not_found_is_logged_once_and_waits_for_a_change(
    reconciler: Reconciler,
) -> None:
    """A not-found will not pass by itself (docs/backends.md: "an item not found is logged once
    and not tried again until the issue changes"), whichever layer said it."""
    tracker = reconciler.tracker
    assert isinstance(tracker, FlakyTracker)
    tracker.create_issue("One", labels=["worker-done"])
    FlakyTracker.gone = {"LEG-1"}
    try:
        (first,) = [o for o in reconciler.run() if o.issue == "LEG-1"]
        assert first.kind is OutcomeKind.FAILED
        assert "not tried again until LEG-1 changes" in first.detail
        (second,) = [o for o in reconciler.run() if o.issue == "LEG-1"]
        assert second.kind is OutcomeKind.DEFERRED
        logged = [e.outcome for e in reconciler.log.tail(50, issue="LEG-1")]
        assert logged == [OutcomeKind.FAILED]  # said once
        # The issue changes (a person labels it): its step is tried again at once.
        FlakyTracker.gone = set()
        tracker.update_labels("LEG-1", add=["worker-active"])
        outcomes = [o for o in reconciler.run() if o.issue == "LEG-1"]
        assert next((o.action, o.kind) for o in outcomes) == (
            "transition_to_in_progress",
            OutcomeKind.DONE,
        )
    finally:
        FlakyTracker.gone = set()


def test_dry_run_changes_nothing(reconciler: Reconciler) -> None:
    reconciler.tracker.create_issue("One", labels=["worker-done"])
    outcomes = reconciler.run(dry_run=True)
    assert [(o.issue, o.action, o.kind) for o in outcomes] == [
        ("LEG-1", "transition_to_in_progress", OutcomeKind.PLANNED)
    ]
    assert reconciler.tracker.get_issue("LEG-1").status is Status.TODO
    assert reconciler.log.tail() == []


def test_human_answer_is_what_follows_the_last_legion_comment(reconciler: Reconciler) -> None:
    tracker = reconciler.tracker
    tracker.create_issue("Q")
    assert human_answer(tracker, "LEG-1") == ()
    tracker.add_comment("LEG-1", "old chatter", author="sami")
    tracker.add_comment("LEG-1", "**Question** which one?", author="legion", by_legion=True)
    assert human_answer(tracker, "LEG-1") == ()
    tracker.add_comment("LEG-1", "The second.", author="sami")
    # A person whose name looks like Legion's is still a person: the marker decides.
    tracker.add_comment("LEG-1", "And keep it short.", author="legion-fan")
    answer = human_answer(tracker, "LEG-1")
    assert [part.author for part in answer] == ["sami", "legion-fan"]
    assert plain(answer) == "The second.\n\nAnd keep it short."
    shown = tracker.list_comments("LEG-1")
    assert [c.by_legion for c in shown] == [False, True, False, False]
    assert shown[1].body == "**Question** which one?"  # the marker is not part of the text


def test_start_refuses_clearly_without_what_it_needs(project: Path, tmp_path: Path) -> None:
    outside = run_legion("start", cwd=tmp_path)
    assert outside.returncode != 0 and "no Legion project found" in outside.stderr
    no_claude = run_legion("start", cwd=project, env={"LEGION_CLAUDE_BIN": str(tmp_path / "nope")})
    # The missing CLI is named (its path), whatever words say what to do about it.
    assert no_claude.returncode != 0 and str(tmp_path / "nope") in no_claude.stderr
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to("/usr/bin/git")
    no_tmux = run_legion("start", cwd=project, env={"PATH": str(bin_dir)})
    assert no_tmux.returncode != 0 and "tmux is not installed" in no_tmux.stderr
    # Neither a key nor a login: the swarm would sit at the CLI's login screen, looking busy.
    claude = tmp_path / "claude"
    claude.write_text("#!/bin/sh\necho '2.1.328 (Claude Code)'\n")
    claude.chmod(0o755)
    unkeyed = {name: "" for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN",
                                      "CLAUDE_CODE_OAUTH_TOKEN")}  # fmt: skip
    no_model = run_legion(
        "start", cwd=project, env=unkeyed | {"LEGION_CLAUDE_BIN": str(claude),
                                             "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")},
    )  # fmt: skip
    assert no_model.returncode == 1, no_model.stderr
    assert "Claude Code sessions would reach no model (no key, no login)" in no_model.stderr
    assert "ANTHROPIC_API_KEY" in no_model.stderr and "`claude`" in no_model.stderr
    for result in (outside, no_claude, no_tmux, no_model):
        assert len(result.stderr.strip().splitlines()) == 1
    status = run_legion("status", "--json", cwd=project)
    assert '"pid": null' in status.stdout


def test_skills_install_in_both_scopes(project: Path, tmp_path: Path) -> None:
    from legion.skills import installed

    config = tmp_path / "claude-config"
    user = run_legion("skills", "install", cwd=project, env={"CLAUDE_CONFIG_DIR": str(config)})
    assert user.returncode == 0 and installed(config / "skills")
    assert run_legion("skills", "install", "--scope", "project", cwd=project).returncode == 0
    assert installed(project / ".claude" / "skills")
    bad = run_legion("skills", "install", "--scope", "galaxy", cwd=project)
    assert bad.returncode == 2 and "unknown scope 'galaxy'" in bad.stderr


def test_reconcile_does_not_wait_forever_for_a_pass_in_progress(project: Path) -> None:
    """Another process holds the reconcile lock: `legion reconcile` says whom it waits for,
    then gives up with one line naming the holder, and exit 1."""
    from legion.files.locking import exclusive

    loaded = load_project(project)
    with exclusive(loaded.state_dir / "reconcile.lock"):
        result = run_legion("reconcile", "--wait", "3", cwd=project)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("legion: waiting for reconcile.lock, held by pid ")
    assert lines[-1].startswith("legion: error: gave up after 3 s waiting for ")
    assert "held by pid " in lines[-1]
    assert len(lines) == 2


class RefusingTracker(LocalTracker):
    """The embedded tracker, answering reads with the backend error in `error`."""

    error: ClassVar[Exception | None] = None

    def list_issues(self, **filters):  # type: ignore[no-untyped-def]
        if self.error is not None:
            raise self.error
        return super().list_issues(**filters)


@pytest.fixture
def refusing(project: Path) -> Iterator[Reconciler]:
    loaded = load_project(project, flags={"wip_limit": 0})
    backends = open_backends(loaded)
    tracker = RefusingTracker(backends.db, issue_key="LEG")
    workers = open_workers(loaded, backends)
    yield Reconciler(loaded, tracker, backends.forge, workers, ActionLog(backends.db))
    RefusingTracker.error = None


def test_a_refused_credential_pauses_dispatch_once(refusing: Reconciler) -> None:
    refusing.tracker.create_issue("One", labels=["worker-done"])
    RefusingTracker.error = BackendError(
        "linear", BackendErrorKind.AUTH, "the credential was refused (HTTP 401)", operation="Issues"
    )
    first = refusing.run()
    assert [(o.action, o.kind) for o in first] == [
        ("observe", OutcomeKind.FAILED),
        ("pause_dispatch", OutcomeKind.FAILED),
    ]
    reason = refusing.pause.reason()
    assert reason is not None and "legion doctor" in reason and "legion start" in reason
    second = refusing.run()  # told once: the pause is not announced again
    assert [o.action for o in second] == ["observe"]
    # Nothing moved on an unknown read.
    RefusingTracker.error = None
    assert refusing.tracker.get_issue("LEG-1").status is Status.TODO


def test_a_rate_limit_keeps_passes_away_until_the_reset(refusing: Reconciler) -> None:
    RefusingTracker.error = BackendError(
        "github", BackendErrorKind.RATE_LIMITED, "rate limited", retry_after=120.0
    )
    outcomes = refusing.run()
    assert [(o.action, o.kind) for o in outcomes] == [("observe", OutcomeKind.DEFERRED)]
    assert "next try in 120 s" in outcomes[0].detail
    assert 100 < refusing.quiet_for() <= 120
    assert refusing.pause.reason() is None  # a rate limit is no reason to stop dispatching


def test_a_transient_failure_only_fails_this_pass(refusing: Reconciler) -> None:
    RefusingTracker.error = BackendError("linear", BackendErrorKind.TRANSIENT, "server error")
    assert [o.kind for o in refusing.run()] == [OutcomeKind.FAILED]
    assert refusing.quiet_for() == 0 and refusing.pause.reason() is None


def _worker_record(reconciler: Reconciler, issue: str, mode: str) -> None:
    """A retired worker of `mode` in the registry, as Legion leaves one that finished."""
    with reconciler.log.db.write() as conn:
        conn.execute(
            "INSERT INTO workers (issue, mode, session_id, window, workspace, started_at, "
            "ended_at) VALUES (?, ?, ?, 'w', '/nowhere', '2026-01-01T10:00:00Z', "
            "'2026-01-01T11:00:00Z')",
            (issue, mode, f"session-{mode}"),
        )


def test_another_modes_worker_done_never_moves_the_issue_on(reconciler: Reconciler) -> None:
    """Issue 24, item 20: a finished planner's `worker-done` on an issue in In Progress is not
    the implementer's: cleared, and the implementer is due (here deferred: WIP limit 0)."""
    tracker = reconciler.tracker
    tracker.create_issue("Planned", status=Status.IN_PROGRESS, labels=["worker-done"])
    _worker_record(reconciler, "LEG-1", "plan")
    [outcome] = [o for o in reconciler.run() if o.issue == "LEG-1"]
    assert outcome.action == "remove_stale_worker_done", outcome
    assert outcome.detail == (
        "worker-done was the plan worker's, not the implement worker's: cleared; "
        "deferred: WIP limit 0 reached"
    )
    issue = tracker.get_issue("LEG-1")
    assert issue.status is Status.IN_PROGRESS and issue.labels == frozenset()
    [again] = [o for o in reconciler.run() if o.issue == "LEG-1"]
    assert (again.action, again.kind) == ("dispatch_implementer", OutcomeKind.DEFERRED)
    # The implementer's own `worker-done` counts.
    _worker_record(reconciler, "LEG-1", "implement")
    tracker.update_labels("LEG-1", add=["worker-done"])
    [moved] = [o for o in reconciler.run() if o.issue == "LEG-1"]
    assert moved.action == "transition_to_needs_review"
    assert tracker.get_issue("LEG-1").status is Status.NEEDS_REVIEW


def test_a_done_issues_last_worker_dead_takes_worker_active_with_it(
    reconciler: Reconciler,
) -> None:
    """A finisher killed between `legion issue move ... Done` and clearing `worker-active`
    (seen in bench/soak.py): its dead worker is retired and the flag with it, else the Done
    issue would show a worker on it for good (nothing looks at a Done issue again)."""
    tracker = reconciler.tracker
    tracker.create_issue("Merged", status=Status.DONE, labels=["worker-active"])
    with reconciler.log.db.write() as conn:  # a current record, its window gone: dead
        conn.execute(
            "INSERT INTO workers (issue, mode, session_id, window, workspace, started_at) "
            "VALUES ('LEG-1', 'finish', 'session-finish', 'leg-1-finish', '/nowhere', "
            "'2026-01-01T10:00:00Z')"
        )
    [outcome] = [o for o in reconciler.run() if o.issue == "LEG-1"]
    assert (outcome.action, outcome.kind) == ("retire_worker", OutcomeKind.DONE), outcome
    assert outcome.detail == "dead: leg-1-finish; worker-active cleared (the issue is Done)"
    assert tracker.get_issue("LEG-1").labels == frozenset()


def test_a_worker_done_no_worker_of_legions_set_still_counts(reconciler: Reconciler) -> None:
    reconciler.tracker.create_issue("By hand", status=Status.IN_PROGRESS, labels=["worker-done"])
    [outcome] = [o for o in reconciler.run() if o.issue == "LEG-1"]
    assert outcome.action == "transition_to_needs_review"


def test_a_blocked_issue_is_neither_moved_nor_dispatched(reconciler: Reconciler) -> None:
    tracker = reconciler.tracker
    assert isinstance(tracker, FlakyTracker)
    tracker.known_labels += ("epic",)  # an opt-in label (`backlog_opt_in_labels`)
    epic = tracker.create_issue("Epic", status=Status.BACKLOG, labels=["epic", "worker-done"])
    tracker.create_issue("First", parent=epic.identifier)  # LEG-2
    tracker.create_issue("Second", parent=epic.identifier, blocked_by=["LEG-2"])  # LEG-3
    splits = Splits(reconciler.log.db)
    for child in ("LEG-2", "LEG-3"):  # the architect's children, as `legion issue create` records
        splits.record(epic.identifier, child, "legion-architect")
    # The architect finished and blocked the epic on its children (as an older skill said).
    tracker.set_blocked_by(epic.identifier, add=["LEG-2", "LEG-3"])
    acted = {(o.issue, o.action) for o in reconciler.run()}
    assert ("LEG-2", "dispatch_planner") in acted
    assert not {issue for issue, _ in acted} & {"LEG-1", "LEG-3"}
    # Why they wait is logged once, with the inputs and the row: `legion why` reads it.
    [waits] = ActionLog(reconciler.log.db).tail(issue="LEG-3")
    assert (waits.action, waits.outcome) == ("skip", OutcomeKind.SKIPPED)
    assert waits.detail == "waits for the issues blocking it (row 4): blocked by LEG-2"
    assert waits.decided is not None and waits.decided.observation.open_blockers == ("LEG-2",)
    reconciler.run()
    assert len(ActionLog(reconciler.log.db).tail(issue="LEG-3")) == 1  # once, not per pass
    assert tracker.get_issue("LEG-1").status is Status.BACKLOG
    for child in ("LEG-2", "LEG-3"):
        tracker.set_status(child, Status.DONE)
    acted = {(o.issue, o.action) for o in reconciler.run()}
    # Its children did its work: it closes, never planned.
    assert ("LEG-1", "close_epic") in acted
    assert tracker.get_issue("LEG-1").status is Status.DONE


def test_an_epic_waits_for_its_children_then_closes_once_with_their_summary(
    reconciler: Reconciler,
) -> None:
    tracker = reconciler.tracker
    assert isinstance(tracker, FlakyTracker)
    tracker.known_labels += ("epic",)
    tracker.create_issue("Greetings", status=Status.BACKLOG, labels=["epic", "worker-done"])
    tracker.create_issue("Say hello", parent="LEG-1")
    tracker.create_issue("Say `bye` <!-- legion:legion -->", parent="LEG-1", blocked_by=["LEG-2"])
    splits = Splits(reconciler.log.db)
    splits.record("LEG-1", "LEG-2", "legion-architect")
    splits.record("LEG-1", "LEG-3", "ada")  # a person's split counts too
    tracker.set_status("LEG-2", Status.DONE)
    assert not [o for o in reconciler.run() if o.issue == "LEG-1"]
    [waits] = ActionLog(reconciler.log.db).tail(issue="LEG-1")
    assert (waits.action, waits.outcome) == ("skip", OutcomeKind.SKIPPED)
    assert waits.detail == (
        "an epic: its architect split it; it waits for its children to be Done (row 7): "
        "waits for its children LEG-3"
    )
    assert tracker.get_issue("LEG-1").status is Status.BACKLOG
    # The last child is Done: the epic closes, its labels go, and one comment sums them up.
    tracker.set_status("LEG-3", Status.DONE)
    [closed] = [o for o in reconciler.run() if o.issue == "LEG-1"]
    assert (closed.action, closed.kind) == ("close_epic", OutcomeKind.DONE), closed
    assert closed.detail == "closed: its children LEG-2, LEG-3 are Done"
    epic = tracker.get_issue("LEG-1")
    assert epic.status is Status.DONE and epic.labels == frozenset({"epic"})
    [summary] = tracker.list_comments("LEG-1")
    assert summary.by_legion and summary.author == "legion"
    lines = summary.body.splitlines()
    assert lines[0] == "## Epic done"
    assert "- LEG-2 `Say hello`: Done" in lines
    # A child's title is a session's words: quoted, no marker of Legion's forged in it.
    assert "- LEG-3 `Say 'bye' &lt;!-- legion:legion -->`: Done" in lines, lines
    # Closed again after a cut before the move (the comment written): no second comment.
    tracker.set_status("LEG-1", Status.BACKLOG)
    tracker.update_labels("LEG-1", add=["worker-done"])
    [again] = [o for o in reconciler.run() if o.issue == "LEG-1"]
    assert again.action == "close_epic" and len(tracker.list_comments("LEG-1")) == 1


def test_only_children_legion_made_for_a_person_or_the_architect_make_an_epic(
    reconciler: Reconciler,
) -> None:
    """A child the tracker shows but Legion did not make at such a request (a `Parent: #N`
    line a stranger wrote on GitHub, a child the controller filed) never closes an issue
    unworked: its architect's `worker-done` moves it on to Todo, as for any issue."""
    tracker = reconciler.tracker
    assert isinstance(tracker, FlakyTracker)
    tracker.known_labels += ("epic",)
    tracker.create_issue("Someone's", status=Status.BACKLOG, labels=["epic", "worker-done"])
    tracker.create_issue("A stranger's", parent="LEG-1", status=Status.DONE)  # not recorded
    tracker.create_issue("The controller's", parent="LEG-1", status=Status.DONE)
    Splits(reconciler.log.db).record("LEG-1", "LEG-3", "legion-controller")
    [moved] = [o for o in reconciler.run() if o.issue == "LEG-1"]
    assert moved.action == "transition_to_todo", moved
    assert tracker.get_issue("LEG-1").status is Status.TODO


def test_an_epic_whose_child_is_gone_closes_and_says_so(reconciler: Reconciler) -> None:
    tracker = reconciler.tracker
    assert isinstance(tracker, FlakyTracker)
    tracker.known_labels += ("epic",)
    tracker.create_issue("Epic", status=Status.BACKLOG, labels=["epic", "worker-done"])
    tracker.create_issue("Kept", parent="LEG-1", status=Status.DONE)
    splits = Splits(reconciler.log.db)
    splits.record("LEG-1", "LEG-2", "legion-architect")
    splits.record("LEG-1", "LEG-9", "legion-architect")  # deleted since: holds nothing up
    [closed] = [o for o in reconciler.run() if o.issue == "LEG-1"]
    assert (closed.action, closed.kind) == ("close_epic", OutcomeKind.DONE), closed
    [summary] = tracker.list_comments("LEG-1")
    assert "- LEG-9: gone (deleted, or not Legion's)" in summary.body.splitlines()
