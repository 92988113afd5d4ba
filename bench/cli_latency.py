"""Cold-start latency of the `legion` command.

Prints medians (never asserts): `legion --version`, and `legion state --json` over 1,000
embedded issues (a tenth with labels, a twentieth with reviewed pull requests).
Targets: <= 0.15 s (issue 3) and <= 0.3 s (issue 23; issue 3 asked 0.5 s) on the 2-core
reference machine.

Run: .venv/bin/python bench/cli_latency.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from common import git, make_repo, median_seconds
from legion.backends import open_backends
from legion.core.model import Status
from legion.services.projects import init_project

STATUSES = [Status.BACKLOG, Status.TODO, Status.IN_PROGRESS, Status.NEEDS_REVIEW, Status.RETRO]


def make_project(root: Path, issues: int) -> Path:
    repo = make_repo(root / "repo")
    git(repo, "branch", "work")
    project, _ = init_project(repo)
    backends = open_backends(project)
    for n in range(1, issues + 1):
        labels = ["worker-done"] if n % 10 == 0 else []
        issue = backends.tracker.create_issue(f"Issue {n}", status=STATUSES[n % 5], labels=labels)
        if n % 20 == 0:
            backends.forge.create_pr(issue.identifier, "work")
            backends.forge.add_review(issue.identifier, "approved", body="", author="bench")
            if n % 40 == 0:
                backends.forge.merge(issue.identifier)
    return repo


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--issues", type=int, default=1000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        repo = make_project(Path(tmp), options.issues)
        median_seconds(["state", "--json"], repo, 1)  # warm the OS file cache once
        version = median_seconds(["--version"], repo, options.runs)
        state = median_seconds(["state", "--json"], repo, options.runs)
    runs = f"over {options.runs} runs"
    print(f"legion --version: median {version:.3f} s {runs} (target <= 0.15 s)")
    print(
        f"legion state --json, {options.issues} issues: "
        f"median {state:.3f} s {runs} (target <= 0.3 s)"
    )


if __name__ == "__main__":
    main()
