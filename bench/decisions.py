"""What explained decisions and local checks cost (issue 41).

Prints (never asserts), on 1,000 embedded issues:
- `legion why ISSUE`: median over N runs (target <= 0.5 s: a person asking, a pass's dry run
  included);
- `legion log --replay` over 100,000 kept decisions (target <= 10 s);
- a reconcile pass that logs a decision for every issue, then one that logs none (target: the
  second no slower than a pass before decisions were kept: nothing is written for what did not
  change);
- a local check (`true`) from a new head to its result, confined (target <= 2 s);
- the daemon's `task_sync` step with 50 workers' task lists of 10 tasks: a look when nothing
  changed (target <= 20 ms; it looks at most every 5 s), and one that edits all 50 comments.

Run: .venv/bin/python bench/decisions.py [--runs N] [--decisions N]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from common import git, make_repo, median_seconds
from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.core.decide import Observation, explain
from legion.core.decision_log import Decided
from legion.core.model import Mode, Status
from legion.daemon.checks_step import LocalChecksStep
from legion.daemon.task_sync_step import TaskSync
from legion.forges.local import LocalForge
from legion.forges.local_checks import CheckRunner
from legion.reconcile import Reconciler
from legion.runtime.claude.tasks import task_dir
from legion.services.projects import init_project
from legion.store.actionlog import ActionLog

STATUSES = [Status.BACKLOG, Status.TODO, Status.IN_PROGRESS, Status.NEEDS_REVIEW, Status.DONE]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--issues", type=int, default=1000)
    parser.add_argument("--decisions", type=int, default=100_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        repo = make_repo(Path(tmp) / "repo")
        project, _ = init_project(repo, extra={"wip_limit": 0})
        backends = open_backends(project)
        for n in range(1, options.issues + 1):
            backends.tracker.create_issue(f"Issue {n}", status=STATUSES[n % 5])
        log = ActionLog(backends.db)
        reconciler = Reconciler(
            project, backends.tracker, backends.forge, open_workers(project, backends), log
        )
        timed = []
        for _ in range(2):
            before = len(log.tail(100_000))
            start = time.perf_counter()
            reconciler.run()
            timed.append((time.perf_counter() - start, len(log.tail(100_000)) - before))
        # Many more kept decisions, as months of a busy swarm leave.
        obs = Observation(status=Status.TODO, has_live_worker=True)
        kept = json.dumps(Decided(obs, explain(obs)).to_json(), sort_keys=True)
        with backends.db.write() as conn:
            conn.executemany(
                "INSERT INTO actions (at, issue, action, outcome, detail, decided) "
                "VALUES ('2026-11-01T00:00:00Z', ?, 'skip', 'skipped', '', ?)",
                [(f"LEG-{n % options.issues + 1}", kept) for n in range(options.decisions)],
            )
        why = median_seconds(["why", "LEG-2"], repo, options.runs)
        replay = median_seconds(["log", "--replay"], repo, 3)
        check = _local_check(Path(tmp))
        quiet, edits = _task_sync(Path(tmp), options.runs)
    print(f"legion why, {options.issues} issues: median {why:.3f} s (target <= 0.5 s)")
    print(
        f"legion log --replay, {options.decisions:,} decisions: median {replay:.2f} s "
        "(target <= 10 s)"
    )
    (first, wrote), (second, again) = timed
    print(
        f"a pass over {options.issues} issues: {first:.2f} s logging {wrote} decisions; the next "
        f"{second:.2f} s logging {again}"
    )
    print(f"a local check from a new head to its result, confined: {check:.2f} s (target <= 2 s)")
    print(
        f"task_sync, 50 workers' lists: a look with nothing changed {quiet * 1000:.1f} ms "
        f"(target <= 20 ms); one editing 50 comments {edits * 1000:.0f} ms"
    )


def _task_sync(root: Path, runs: int) -> tuple[float, float]:
    """The step's median tick over 50 workers whose lists did not change, and one tick that
    edits every comment (the embedded tracker)."""
    repo = make_repo(root / "tasks")
    init_project(repo)
    project = load_project(repo)
    backends = open_backends(project)
    workers = open_workers(project, backends)
    folders = []
    for n in range(1, 51):
        issue = backends.tracker.create_issue(f"Issue {n}", status=Status.IN_PROGRESS).identifier
        record = workers.registry.start(issue, Mode.IMPLEMENT, f"sid-{n}", f"w{n}", repo)
        folder = task_dir(workers.runtimes.of(record).home(f"sid-{n}"), f"sid-{n}")  # type: ignore[attr-defined]
        folder.mkdir(parents=True)
        folders.append(folder)
    clock = [2_000_000_000.0]

    def write(done: int) -> None:
        for folder in folders:
            for t in range(1, 11):
                state = "completed" if t <= done else "pending"
                task = {"id": str(t), "subject": f"Step {t} of the work", "status": state}
                (folder / f"{t}.json").write_text(json.dumps(task))

    sync = TaskSync(
        workers, backends.tracker, ActionLog(backends.db), clock=lambda: clock[0], look_every=0
    )
    write(0)
    sync.run()  # the first lists: 50 comments made
    quiet = []
    for _ in range(runs):
        start = time.perf_counter()
        sync.run()
        quiet.append(time.perf_counter() - start)
    write(1)
    clock[0] += 60
    start = time.perf_counter()
    sync.run()
    edits = time.perf_counter() - start
    return sorted(quiet)[len(quiet) // 2], edits


def _local_check(root: Path) -> float:
    repo = make_repo(root / "checked")
    env = dict(os.environ) | {"LEGION_CHECKS": "true"}
    init_project(repo)
    project = load_project(repo, env=env)
    backends = open_backends(project)
    forge = backends.forge
    assert isinstance(forge, LocalForge) and forge.checks is not None
    backends.tracker.create_issue("Checked", status=Status.IN_PROGRESS)
    git(repo, "branch", "legion/leg-1")
    forge.create_pr("LEG-1", "legion/leg-1")
    confinement = open_workers(project, backends).supervisor.confinement
    runner = CheckRunner(
        forge.checks, repo, confinement.check_plan, lambda n: forge.branch_head(str(n)), timeout=60
    )
    step = LocalChecksStep(forge, runner, ActionLog(backends.db))
    start = time.perf_counter()
    while forge.get_pr("1").check_runs[0].state.value == "pending":
        step.run()
        time.sleep(0.02)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
