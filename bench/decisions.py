"""What explained decisions and local checks cost (issue 41).

Prints (never asserts), on 1,000 embedded issues:
- `legion why ISSUE`: median over N runs (target <= 0.5 s: a person asking, a pass's dry run
  included);
- `legion log --replay` over 100,000 kept decisions (target <= 10 s);
- a reconcile pass that logs a decision for every issue, then one that logs none (target: the
  second no slower than a pass before decisions were kept: nothing is written for what did not
  change);
- a local check (`true`) from a new head to its result, confined (target <= 2 s).

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
from legion.core.model import Status
from legion.daemon.checks_step import LocalChecksStep
from legion.forges.local import LocalForge
from legion.forges.local_checks import CheckRunner
from legion.reconcile import Reconciler
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
