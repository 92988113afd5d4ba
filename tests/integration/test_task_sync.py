"""Each worker's task list mirrored into one comment on its issue, edited in place
(`legion.daemon.task_sync_step`): the daemon's step on the embedded tracker with a session's
real task files (as Claude Code writes them), on a clock the test moves."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from legion.backends import Backends, open_backends, open_workers
from legion.config import load_project
from legion.core.model import Mode
from legion.core.task_sync import SYNC_EVERY_S
from legion.daemon.task_sync_step import TaskSync, task_sync_step
from legion.runtime.claude.tasks import task_dir
from legion.sessions.workers import WorkerManager
from legion.store.actionlog import ActionLog
from legion.trackers.base import Tracker


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def write_tasks(folder: Path, *tasks: tuple[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.json"):
        old.unlink()
    for number, (subject, status) in enumerate(tasks, 1):
        document = {"id": str(number), "subject": subject, "status": status}
        (folder / f"{number}.json").write_text(json.dumps(document))


@dataclass
class Here:
    """A project's backends and workers, with one worker per issue asked for, each with the
    folder its task files go in (as Claude Code keeps them in the session's own home)."""

    backends: Backends
    workers: WorkerManager
    tasks: dict[str, Path]

    @property
    def tracker(self) -> Tracker:
        return self.backends.tracker

    def sync(self, clock: Clock, tracker: Tracker | None = None) -> TaskSync:
        log = ActionLog(self.backends.db)
        return TaskSync(self.workers, tracker or self.tracker, log, clock=clock, look_every=0)


def here(project: Path, workspace: Path, *issues: str, mode: Mode = Mode.IMPLEMENT) -> Here:
    """Workers on `issues` (made on the embedded tracker unless they are another's)."""
    loaded = load_project(project)
    backends = open_backends(loaded)
    workers = open_workers(loaded, backends)
    tasks = {}
    for n, issue in enumerate(issues, 1):
        if issue.startswith("LEG-"):
            backends.tracker.create_issue(f"Issue {n}")
        record = workers.registry.start(issue, mode, f"sid-{n}", f"w{n}", workspace)
        home = workers.runtimes.of(record).home(f"sid-{n}")  # type: ignore[attr-defined]
        tasks[issue] = task_dir(home, f"sid-{n}")
    return Here(backends, workers, tasks)


def task_comments(tracker: Tracker, issue: str) -> list[str]:
    return [c.body for c in tracker.list_comments(issue) if c.body.startswith("## Task list")]


def test_a_workers_list_is_one_comment_edited_in_place_at_most_every_30_s(
    project: Path, tmp_path: Path
) -> None:
    at = here(project, tmp_path, "LEG-1")
    tracker, tasks, clock = at.tracker, at.tasks["LEG-1"], Clock()
    sync = at.sync(clock)

    sync.run()  # no list yet: nothing written
    assert tracker.list_comments("LEG-1") == []
    write_tasks(tasks, ("Write the parser", "in_progress"), ("Test it", "pending"))
    sync.run()  # a first list: written at once
    [first] = task_comments(tracker, "LEG-1")
    assert "The implement worker's tasks, 0 of 2 done" in first
    assert "- [ ] `Write the parser` (in progress)" in first
    [created] = tracker.list_comments("LEG-1")
    assert created.by_legion and created.author == "legion-tasks"

    write_tasks(tasks, ("Write the parser", "completed"), ("Test it", "in_progress"))
    clock.now += SYNC_EVERY_S - 1
    sync.run()  # changed, but too soon: nothing written
    assert task_comments(tracker, "LEG-1") == [first]
    clock.now += 1
    sync.run()
    [second] = task_comments(tracker, "LEG-1")  # the same comment, edited
    assert "- [x] `Write the parser`" in second and "1 of 2 done" in second
    assert [c.id for c in tracker.list_comments("LEG-1")] == [created.id]

    # The worker is retired with a change not written yet: written once its time is up.
    write_tasks(tasks, ("Write the parser", "completed"), ("Test it", "completed"))
    clock.now += 5
    sync.run()
    [record] = at.workers.registry.current()
    at.workers.registry.retire(record.id)
    clock.now += SYNC_EVERY_S
    sync.run()
    [last] = task_comments(tracker, "LEG-1")
    assert "2 of 2 done" in last
    sync.run()  # nothing changed since: no write
    # One write logged: the comment's creation (an edit is no news).
    log = ActionLog(at.backends.db)
    entries = [e for e in log.tail(issue="LEG-1") if e.action == "task_sync"]
    assert [(e.outcome.value, e.detail) for e in entries] == [("done", f"comment {created.id}")]


def test_a_restarted_daemon_edits_the_same_comment_and_a_deleted_one_is_written_anew(
    project: Path, tmp_path: Path
) -> None:
    at = here(project, tmp_path, "LEG-1", mode=Mode.PLAN)
    tracker, tasks, clock = at.tracker, at.tasks["LEG-1"], Clock()
    write_tasks(tasks, ("Read the code", "in_progress"))
    at.sync(clock).run()
    [created] = tracker.list_comments("LEG-1")
    write_tasks(tasks, ("Read the code", "completed"))
    clock.now += SYNC_EVERY_S
    at.sync(clock).run()  # another daemon's step: the same comment
    assert [c.id for c in tracker.list_comments("LEG-1")] == [created.id]
    with at.backends.db.write() as conn:  # a person deletes it
        conn.execute("DELETE FROM comments WHERE id = ?", (created.id,))
    write_tasks(tasks, ("Read the code", "completed"), ("Write the plan", "in_progress"))
    clock.now += SYNC_EVERY_S
    at.sync(clock).run()
    [anew] = tracker.list_comments("LEG-1")
    assert "1 of 2 done" in anew.body


def test_a_task_file_that_is_a_link_is_not_read_and_task_sync_false_turns_it_off(
    project: Path, tmp_path: Path
) -> None:
    at = here(project, tmp_path, "LEG-1")
    tasks = at.tasks["LEG-1"]
    tasks.mkdir(parents=True)
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"subject": "the daemon's secret", "status": "pending"}))
    os.symlink(secret, tasks / "1.json")  # the session points its task file elsewhere
    at.sync(Clock()).run()
    assert at.tracker.list_comments("LEG-1") == []
    log = ActionLog(at.backends.db)
    off = load_project(project, flags={"task_sync": False})
    assert task_sync_step(open_workers(off, at.backends), at.tracker, log) is None
    assert task_sync_step(at.workers, at.tracker, log) is not None


def test_a_task_folder_a_session_filled_is_not_read_through(project: Path, tmp_path: Path) -> None:
    """A session that fills its task folder with files would cost every look a stat of each
    (the daemon's tick): past `FOLDER_AT_MOST` entries the folder is taken as holding no list,
    read no further; at the bound a list is read as before."""
    from legion.runtime.claude import tasks as claude_tasks

    at = here(project, tmp_path, "LEG-1")
    folder = at.tasks["LEG-1"]
    write_tasks(folder, ("Write the parser", "in_progress"))
    for n in range(2, claude_tasks.FOLDER_AT_MOST + 1):  # the bound exactly: still read
        (folder / f".{n}").write_text("")
    home = folder.parent.parent
    read = claude_tasks.read_tasks(home, folder.name)
    assert read is not None and [t.subject for t in read.tasks] == ["Write the parser"]
    (folder / "flood.json").write_text("{}")  # one more
    assert claude_tasks.read_tasks(home, folder.name) is None
    at.sync(Clock()).run()
    assert at.tracker.list_comments("LEG-1") == []


@pytest.mark.parametrize("backend", ["linear", "github"])
def test_on_linear_and_github_the_comment_is_edited_in_place_and_written_anew_if_deleted(
    project: Path, tmp_path: Path, backend: str
) -> None:
    """The same step on the hosted trackers (their GraphQL fakes, executing the published
    schemas): Legion's own comment edited with `commentUpdate` / `updateIssueComment`."""
    from tests.fakes.github_server import FakeGitHub
    from tests.fakes.linear_server import FakeLinear
    from tests.integration import test_github_issues_tracker as on_github
    from tests.integration import test_linear_tracker as on_linear

    clock = Clock()
    fake: FakeLinear | FakeGitHub = FakeLinear() if backend == "linear" else FakeGitHub()
    with fake.running():
        tracker: Tracker
        if isinstance(fake, FakeLinear):
            issue = fake.add_issue("Parse it")
            tracker = on_linear.make_tracker(fake, tmp_path)

            def bodies() -> list[str]:
                return [c["body"] for c in fake.comments_of(issue)]  # type: ignore[union-attr]

            def delete(comment_id: str) -> None:
                fake.delete_comment(comment_id)  # type: ignore[union-attr]
        else:
            number = fake.add_issue("Parse it")["number"]
            issue = f"WIDGETS-{number}"
            tracker = on_github.make_tracker(fake, tmp_path)

            def bodies() -> list[str]:
                return fake.issue_comments(number)  # type: ignore[union-attr]

            def delete(comment_id: str) -> None:
                fake.delete_issue_comment(comment_id)  # type: ignore[union-attr]

        at = here(project, tmp_path, issue)
        tasks = at.tasks[issue]
        sync = at.sync(clock, tracker)
        write_tasks(tasks, ("Write the parser", "in_progress"))
        sync.run()
        [first] = bodies()
        assert "- [ ] `Write the parser` (in progress)" in first
        assert first.endswith("<!-- legion:legion-tasks -->")
        write_tasks(tasks, ("Write the parser", "completed"))
        clock.now += SYNC_EVERY_S
        sync.run()
        [edited] = bodies()
        assert "- [x] `Write the parser`" in edited
        [shown] = tracker.list_comments(issue)
        assert shown.by_legion and shown.author == "legion-tasks"
        delete(str(shown.id))
        write_tasks(tasks, ("Write the parser", "completed"), ("Test it", "pending"))
        clock.now += SYNC_EVERY_S
        sync.run()
        [anew] = bodies()
        assert "1 of 2 done" in anew


def test_a_hostile_list_stops_no_other_and_a_write_that_went_is_never_made_again(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's task files that break reading (a name `int` refuses, JSON nested past the
    parser's depth, a lone surrogate) cost its own issue's list at most; and a comment the
    tracker took is remembered though the store could not keep it: never written again."""
    from legion.daemon import task_sync_step
    from legion.errors import StoreError

    at = here(project, tmp_path, "LEG-1", "LEG-2")
    hostile = at.tasks["LEG-1"]
    hostile.mkdir(parents=True)
    (hostile / "².json").write_text(json.dumps({"subject": "x", "status": "pending"}))
    (hostile / "1.json").write_text("[" * 30_000)
    (hostile / "2.json").write_text('{"subject": "x\\ud800y", "status": "pending"}')
    write_tasks(at.tasks["LEG-2"], ("Honest work", "in_progress"))
    clock = Clock()
    sync = at.sync(clock)

    def no_store(self: object, issue: str, synced: object) -> None:
        raise StoreError("the disk is full (simulated)")

    monkeypatch.setattr(task_sync_step.TaskComments, "put", no_store)
    for _ in range(3):
        sync.run()
        clock.now += SYNC_EVERY_S
    # The honest list is there, written once though the store kept nothing of it.
    assert len(task_comments(at.tracker, "LEG-2")) == 1
    assert len(at.tracker.list_comments("LEG-2")) == 1
    # The hostile one shows what could be read of it, escaped; nothing broke.
    [shown] = task_comments(at.tracker, "LEG-1")
    assert "- [ ] `x\\ud800y`" in shown.splitlines(), shown
