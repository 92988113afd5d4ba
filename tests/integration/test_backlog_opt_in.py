"""A real Linear team's Backlog costs nothing unless a person opts an issue in (issue 19 item 3):
on the fake Linear (and GitHub) servers on 127.0.0.1, a team with many Backlog issues and one
labelled `legion` gets at most one architect, which counts against the WIP limit; `legion
init` and `legion doctor` say what Legion will pick up before anything starts."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.reconcile import Reconciler
from legion.store.actionlog import ActionLog, OutcomeKind
from tests.fakes.github_server import FakeGitHub
from tests.fakes.linear_server import FakeLinear
from tests.support.cli import git, run_legion

UNLABELLED = 40
PICKUP = (
    "Legion will work on: 1 Backlog issue labelled `legion` or `epic`, 1 Todo issue; "
    f"left alone: {UNLABELLED} Backlog issues without `legion` or `epic`, 1 Icebox issue"
)
WRITES = ("LinearIssueUpdate", "LinearCommentCreate", "LinearLabelCreate", "LinearIssueCreate")


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FakeLinear, FakeGitHub]]:
    linear, github = FakeLinear(retro_state=True), FakeGitHub()
    with linear.running(), github.running():
        yield linear, github


@pytest.fixture
def team(
    servers: tuple[FakeLinear, FakeGitHub], git_repo: Path, tmp_path: Path
) -> tuple[dict[str, str], FakeLinear, str]:
    """A team whose Backlog holds 40 someday-ideas (one of them carrying an unrelated label)
    and one issue a person opted in; one Todo issue, one on ice. Its environment, the fake, and
    `legion init`'s output."""
    linear, github = servers
    remote = tmp_path / "remote.git"
    remote.mkdir()
    git(remote, "init", "--quiet", "--bare")
    git(git_repo, "remote", "add", "origin", str(remote))
    linear.reset(retro_state=True)
    github.reset(remote=remote)
    linear.add_state("Icebox", "backlog")
    linear.add_label("legion")
    for n in range(UNLABELLED):
        linear.add_issue(f"Someday {n}", state="Backlog", labels=["bug"] if n == 0 else [])
    linear.add_issue("Design the plugin API", state="Backlog", labels=["legion"])  # ENG-41
    linear.add_issue("Fix the typo", state="Todo")  # ENG-42
    linear.add_issue("Maybe never", state="Icebox")
    env = dict(os.environ) | {
        "LINEAR_API_URL": linear.api_url,
        "LINEAR_API_KEY": linear.token,
        "GITHUB_API_URL": github.url,
        "GITHUB_TOKEN": github.token,
    }
    args = ("--tracker", "linear", "--team", "ENG", "--forge", "github", "--repo", "acme/widgets")
    init = run_legion("init", *args, cwd=git_repo, env=env)
    assert init.returncode == 0, init.stderr
    return env, linear, init.stdout


def test_init_and_doctor_say_what_legion_will_pick_up(
    team: tuple[dict[str, str], FakeLinear, str], git_repo: Path
) -> None:
    env, linear, init_output = team
    assert PICKUP in init_output.splitlines()
    doctor = run_legion("doctor", cwd=git_repo, env=env)
    assert f"  pickup  {PICKUP}" in doctor.stdout.splitlines(), doctor.stdout
    report = json.loads(run_legion("doctor", "--json", cwd=git_repo, env=env).stdout)
    assert report["project"]["pickup"] == PICKUP
    # Another setting, another answer: every Backlog issue, or only those labelled `epic`.
    everything = run_legion("doctor", cwd=git_repo, env=env | {"LEGION_BACKLOG_OPT_IN_LABELS": "*"})
    assert "Legion will work on: 41 Backlog issues, 1 Todo issue; left alone: 1 Icebox" in (
        everything.stdout
    )
    epic = run_legion("doctor", cwd=git_repo, env=env | {"LEGION_BACKLOG_OPT_IN_LABELS": "epic"})
    assert "left alone: 41 Backlog issues without `epic`" in epic.stdout
    assert not [op for op in linear.operations() if op and op.startswith(WRITES)]


def reconciler(git_repo: Path, env: dict[str, str], wip_limit: int) -> Reconciler:
    project = load_project(git_repo, env=env, flags={"wip_limit": wip_limit})
    backends = open_backends(project)
    workers = open_workers(project, backends)
    return Reconciler(project, backends.tracker, backends.forge, workers, ActionLog(backends.db))


def test_a_pass_starts_no_worker_on_a_backlog_issue_nobody_opted_in(
    team: tuple[dict[str, str], FakeLinear, str], git_repo: Path
) -> None:
    env, linear, _ = team
    outcomes = reconciler(git_repo, env, wip_limit=0).run()
    acted = {(o.issue, o.action, o.kind) for o in outcomes if o.issue != "-"}
    # The architect is held back by the WIP limit like any code worker (a reviewer is not),
    # and the 40 other Backlog issues and the Icebox one are not even considered.
    assert acted == {
        ("ENG-41", "dispatch_architect", OutcomeKind.DEFERRED),
        ("ENG-42", "dispatch_planner", OutcomeKind.DEFERRED),
    }, outcomes
    assert all("WIP limit 0 reached" in o.detail for o in outcomes if o.issue != "-")
    assert not [op for op in linear.operations() if op and op.startswith(WRITES)]
    # `legion state` says the same: skip for every issue nobody opted in.
    state = json.loads(run_legion("state", "--json", cwd=git_repo, env=env).stdout)["issues"]
    suggested = {key: issue["suggested_action"] for key, issue in state.items()}
    assert suggested.pop("ENG-41") == "dispatch_architect"
    assert suggested.pop("ENG-42") == "dispatch_planner"
    assert set(suggested.values()) == {"skip"} and len(suggested) == UNLABELLED + 1
    assert state["ENG-41"]["opted_in"] and not state["ENG-1"]["opted_in"]
    table = run_legion("state", cwd=git_repo, env=env | {"COLUMNS": "200"}).stdout
    assert table.count("skip (no opt-in label)") == UNLABELLED, table
