"""A reconcile pass on Linear and GitHub (the fakes on 127.0.0.1) with a real worker (the Claude
Code CLI against the scripted model, a private tmux server): a reviewer approved, but a CI check
fails, so the implementer's session is resumed with each failing check and its log link
(issue 19 item 1: "CI is invisible")."""

from __future__ import annotations

from pathlib import Path

import pytest

from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.reconcile import Reconciler
from legion.store.actionlog import ActionLog, OutcomeKind
from tests.fakes.github_server import check_run, status_context
from tests.support.linear_github import LinearAndGitHub, init_on_linear_and_github
from tests.support.swarm import Swarm

# Its reconcile passes start workers under a daemon in manual mode (`host`).
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("host")]

LOG = "https://ci.example/runs/41"


@pytest.fixture
def project(git_repo: Path, linear_github: LinearAndGitHub) -> Path:
    """The project is on Linear and GitHub (the fakes)."""
    return init_on_linear_and_github(git_repo, linear_github)


@pytest.fixture
def swarm_variables(linear_github: LinearAndGitHub) -> dict[str, str]:
    return linear_github.env()


def test_a_failing_check_resumes_the_implementer_with_its_name_and_log(
    swarm: Swarm, linear_github: LinearAndGitHub
) -> None:
    linear, github = linear_github.linear, linear_github.github
    linear.add_label("worker-done")
    issue = linear.add_issue("Approved, CI red", state="In Review", labels=["worker-done"])
    pr = github.add_pr(f"legion/{issue.lower()}", labels=("worker-approved",), head_oid="f" * 40)
    github.set_checks(
        pr["number"],
        check_run("unit tests (3.12)", conclusion="FAILURE", url=LOG),
        status_context("ci/lint", "ERROR"),
        check_run("docs"),
    )
    loaded = load_project(swarm.repo, swarm.env)
    backends = open_backends(loaded)
    workers = open_workers(loaded, backends, swarm.env)
    reconciler = Reconciler(
        loaded, backends.tracker, backends.forge, workers, ActionLog(backends.db)
    )

    outcomes = reconciler.run()

    resumed = [o for o in outcomes if o.action == "resume_implementer_for_checks"]
    assert resumed and resumed[0].kind is OutcomeKind.DONE, outcomes
    assert "failing: unit tests (3.12), ci/lint" in resumed[0].detail
    assert "worker-done" not in linear.label_names(issue)  # the reviewer gets the fix next
    assert linear.state_name(issue) == "In Review"
    request = swarm.server.wait_for(
        lambda r: bool(r.prompt) and f"implement mode for {issue}" in (r.prompt or ""), timeout=90
    )
    prompt = request.prompt or ""
    assert f"CI checks fail on PR #{pr['number']}:" in prompt
    assert f"- unit tests (3.12): {LOG}" in prompt
    assert "- ci/lint (no log link" in prompt
    assert "docs" not in prompt.split("CI checks fail")[1].split("Read each log")[0]
    assert "without adding worker-done" in prompt


@pytest.mark.parametrize(
    ("state", "verdict", "action", "mode"),
    [
        ("Retro", "worker-approved", "resume_implementer_for_checks", "implement"),
        ("In Review", "worker-changes-requested", "resume_implementer_for_changes", "implement"),
    ],
    ids=["retro", "changes"],
)
def test_failing_checks_after_the_retro_or_with_requested_changes_go_to_the_implementer(
    swarm: Swarm,
    linear_github: LinearAndGitHub,
    state: str,
    verdict: str,
    action: str,
    mode: str,
) -> None:
    linear, github = linear_github.linear, linear_github.github
    linear.add_label("worker-done")
    issue = linear.add_issue("CI red", state=state, labels=["worker-done"])
    pr = github.add_pr(f"legion/{issue.lower()}", labels=(verdict,), head_oid="f" * 40)
    github.set_checks(pr["number"], check_run("e2e", conclusion="TIMED_OUT", url=LOG))
    loaded = load_project(swarm.repo, swarm.env)
    backends = open_backends(loaded)
    workers = open_workers(loaded, backends, swarm.env)
    reconciler = Reconciler(
        loaded, backends.tracker, backends.forge, workers, ActionLog(backends.db)
    )

    outcomes = reconciler.run()

    assert [o.kind for o in outcomes if o.action == action] == [OutcomeKind.DONE], outcomes
    # Never the finisher on a red PR: from Retro the fix goes back to the reviewer.
    assert linear.state_name(issue) == "In Review"
    assert not [o for o in outcomes if o.action == "dispatch_finisher"]
    request = swarm.server.wait_for(
        lambda r: f"{mode} mode for {issue}" in (r.prompt or ""), timeout=90
    )
    assert f"- e2e: {LOG}" in (request.prompt or "")
