"""Request budget of the real backends: Linear and GitHub, served by the schema-executing fakes.

Prints request counts (never asserts):
- one observe pass (what `legion state` and each reconcile pass read) over N Linear issues of
  which P have a GitHub pull request: tracker and forge requests, against the budget
  ceil(N/100) + ceil(P/50);
- a whole reconcile pass of an idle swarm (no worker running, nothing to do) on a small
  project, and from it the requests per hour at the default tick, against the hourly limits
  of one Linear API key and one GitHub token, with the margin.

Run: .venv/bin/python bench/requests.py [--issues 1000] [--prs 300]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.github_server import FakeGitHub
from tests.fakes.linear_server import FakeLinear

from common import make_repo
from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.reconcile import Reconciler
from legion.reconcile.observe import KnownLiveWorkers, observe
from legion.services.projects import init_project
from legion.store.actionlog import ActionLog

# Published hourly limits for one credential (Linear: API key requests; GitHub: GraphQL points,
# where a query under 100 nodes per connection costs one point).
LINEAR_REQUESTS_PER_HOUR = 1_500
GITHUB_POINTS_PER_HOUR = 5_000
DEFAULT_TICK_S = 60.0

# Where the seeded issues are: PR phases first (each of those has a PR), the rest spread over
# the phases without one.
PR_STATES = ("In Progress", "In Review", "Retro")
OTHER_STATES = ("Backlog", "Todo", "Triage", "Done", "Canceled")


def seed(linear: FakeLinear, github: FakeGitHub, issues: int, prs: int) -> None:
    for n in range(issues):
        state = PR_STATES[n % len(PR_STATES)] if n < prs else OTHER_STATES[n % len(OTHER_STATES)]
        identifier = linear.add_issue(f"Issue {n + 1}", state=state)
        if n < prs:
            github.add_pr(f"legion/{identifier.lower()}")


def counts(linear: FakeLinear, github: FakeGitHub) -> tuple[Counter[str], Counter[str]]:
    return (
        Counter(str(r.operation) for r in linear.requests),
        Counter(str(r.operation) for r in github.requests),
    )


def run(issues: int, prs: int, idle_issues: int, idle_prs: int) -> None:
    linear, github = FakeLinear(retro_state=True), FakeGitHub()
    with linear.running(), github.running(), tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ.update(
            {
                "HOME": str(root / "home"),
                "XDG_STATE_HOME": str(root / "state"),
                "XDG_CONFIG_HOME": str(root / "config"),
                "LINEAR_API_URL": linear.api_url,
                "LINEAR_API_KEY": linear.token,
                "GITHUB_API_URL": github.url,
                "GITHUB_TOKEN": github.token,
            }
        )
        repo = make_repo(root / "repo")
        init_project(
            repo,
            key="ENG",
            tracker="linear",
            forge="github",
            extra={"linear_team": "ENG", "github_repo": f"{github.owner}/{github.repo}"},
        )
        project = load_project(repo)
        pid = project.settings.project_id

        for label, n_issues, n_prs in (
            ("one observe pass", issues, prs),
            ("idle swarm", idle_issues, idle_prs),
        ):
            linear.reset(retro_state=True)  # new ids: the team cache must go too
            github.reset()
            for cached in project.state_dir.glob("linear-team-*.json"):
                cached.unlink()
            seed(linear, github, n_issues, n_prs)
            backends = open_backends(project)
            # Warm: the team's states and labels are cached once, not per pass.
            backends.tracker.list_issues()
            linear.requests.clear()
            github.requests.clear()
            if label == "one observe pass":
                snapshot = observe(pid, backends.tracker, backends.forge, KnownLiveWorkers(set()))
                tracker_ops, forge_ops = counts(linear, github)
                budget = math.ceil(n_issues / 100) + math.ceil(n_prs / 50)
                with_pr = sum(1 for s in snapshot.issues if s.pr is not None)
                print(f"{label}: {n_issues} issues ({len(snapshot.issues)} Legion's), {n_prs} PRs")
                print(f"  tracker requests: {sum(tracker_ops.values())} {dict(tracker_ops)}")
                print(f"  forge requests:   {sum(forge_ops.values())} {dict(forge_ops)}")
                print(
                    f"  total {sum(tracker_ops.values()) + sum(forge_ops.values())}, budget "
                    f"ceil(N/100) + ceil(P/50) = {budget}; PRs found: {with_pr}"
                )
                continue
            workers = open_workers(
                load_project(repo, flags={"wip_limit": 0}), backends
            )  # no worker starts: an idle pass
            reconciler = Reconciler(
                load_project(repo, flags={"wip_limit": 0}),
                backends.tracker,
                backends.forge,
                workers,
                ActionLog(backends.db),
            )
            reconciler.run()
            linear.requests.clear()
            github.requests.clear()
            outcomes = reconciler.run()  # the steady state: what every tick costs
            tracker_ops, forge_ops = counts(linear, github)
            per_tick_linear = sum(tracker_ops.values())
            per_tick_github = sum(forge_ops.values())
            ticks = 3600.0 / DEFAULT_TICK_S
            linear_hour = per_tick_linear * ticks
            github_hour = per_tick_github * ticks
            print(f"{label}: {n_issues} issues, {n_prs} PRs, tick {DEFAULT_TICK_S:g} s")
            actions = Counter(f"{o.action} {o.kind.value}" for o in outcomes)
            print(f"  per reconcile pass: Linear {dict(tracker_ops)}, GitHub {dict(forge_ops)}")
            print(f"  (the pass did: {dict(actions)})")
            print(
                f"  per hour: Linear {linear_hour:.0f} of {LINEAR_REQUESTS_PER_HOUR} "
                f"({LINEAR_REQUESTS_PER_HOUR / max(linear_hour, 1):.0f}x margin), GitHub "
                f"{github_hour:.0f} of {GITHUB_POINTS_PER_HOUR} points "
                f"({GITHUB_POINTS_PER_HOUR / max(github_hour, 1):.0f}x margin)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--issues", type=int, default=1000)
    parser.add_argument("--prs", type=int, default=300)
    parser.add_argument("--idle-issues", type=int, default=40)
    parser.add_argument("--idle-prs", type=int, default=10)
    args = parser.parse_args()
    run(args.issues, args.prs, args.idle_issues, args.idle_prs)


if __name__ == "__main__":
    main()
