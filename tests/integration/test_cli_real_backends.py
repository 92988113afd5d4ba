"""`legion issue …` and `legion pr …` work unchanged on Linear and GitHub (the skills rely on
it): the real `legion` command, run as a user runs it, against the fake Linear and GitHub
servers on 127.0.0.1, with a local bare repository as the GitHub remote."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.github_server import FakeGitHub
from tests.fakes.graphql_server import Fault
from tests.fakes.linear_server import FakeLinear
from tests.support.cli import Result, git, run_legion


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FakeLinear, FakeGitHub]]:
    linear, github = FakeLinear(retro_state=True), FakeGitHub()
    with linear.running(), github.running():
        yield linear, github


@pytest.fixture
def fakes(
    servers: tuple[FakeLinear, FakeGitHub], tmp_path: Path
) -> tuple[FakeLinear, FakeGitHub, Path]:
    linear, github = servers
    remote = tmp_path / "remote.git"
    remote.mkdir()
    git(remote, "init", "--quiet", "--bare")
    linear.reset(retro_state=True)
    github.reset(remote=remote)
    return linear, github, remote


class Cli:
    """`legion` in the project, with the backends' addresses and credentials in its env."""

    def __init__(self, repo: Path, env: dict[str, str]) -> None:
        self.repo, self.env = repo, env

    def __call__(
        self,
        *args: str,
        ok: bool = True,
        input_text: str | None = None,
        env: dict[str, str] | None = None,
    ) -> Result:
        result = run_legion(*args, cwd=self.repo, env=self.env | (env or {}), input_text=input_text)
        if ok:
            assert result.returncode == 0, (args, result.stderr)
        return result

    def json(self, *args: str) -> object:
        return json.loads(self(*args, "--json").stdout)


@pytest.fixture
def cli(git_repo: Path, fakes: tuple[FakeLinear, FakeGitHub, Path]) -> Cli:
    linear, github, remote = fakes
    git(git_repo, "remote", "add", "origin", str(remote))
    git(git_repo, "push", "--quiet", "origin", "main")
    env = dict(os.environ) | {
        "LINEAR_API_URL": linear.api_url,
        "LINEAR_API_KEY": linear.token,
        "GITHUB_API_URL": github.url,
        "GITHUB_TOKEN": github.token,
        # Tables as wide as a pipe gets them, whatever width the test run was given.
        "COLUMNS": "200",
    }
    cli = Cli(git_repo, env)
    cli(
        "init",
        "--tracker",
        "linear",
        "--team",
        "ENG",
        "--forge",
        "github",
        "--repo",
        "acme/widgets",
    )
    return cli


def test_init_writes_the_backends_and_doctor_checks_them(cli: Cli) -> None:
    config = (cli.repo / ".legion" / "config.toml").read_text()
    for line in (
        'tracker = "linear"',
        'forge = "github"',
        'linear_team = "ENG"',
        'github_repo = "acme/widgets"',
        'issue_key = "ENG"',
    ):
        assert line in config
    report = json.loads(cli("doctor", "--json", ok=False).stdout)
    checks = {c["name"]: c for c in report["checks"]}
    backend = [c for c in report["checks"] if c["name"].startswith(("Linear", "GitHub"))]
    assert len(backend) >= 6 and all(c["ok"] for c in backend), backend
    assert checks["Linear team"]["ok"] and "ENG" in checks["Linear team"]["detail"]
    assert report["project"]["tracker"] == "linear" and report["project"]["forge"] == "github"
    linear_key = cli.env["LINEAR_API_KEY"]
    assert linear_key not in json.dumps(report) and cli.env["GITHUB_TOKEN"] not in json.dumps(
        report
    )


def test_the_skills_commands_on_linear_and_github(
    cli: Cli, fakes: tuple[FakeLinear, FakeGitHub, Path]
) -> None:
    linear, github, remote = fakes
    assert cli("issue", "create", "Parent", "--status", "Backlog").stdout.strip() == "ENG-1"
    child = cli.json("issue", "create", "Child", "--body", "Do it", "--parent", "ENG-1")
    assert isinstance(child, dict) and child["identifier"] == "ENG-2" and child["parent"] == "ENG-1"
    assert linear.state_name("ENG-2") == "Todo"
    assert cli("issue", "move", "ENG-2", "In Progress").stdout.strip() == (
        "ENG-2: Todo -> In Progress"
    )
    cli("issue", "label", "ENG-2", "--add", "worker-active")
    cli("issue", "comment", "ENG-2", "--body", "Plan: do it", "--author", "legion-plan")
    shown = cli.json("issue", "show", "ENG-2")
    assert isinstance(shown, dict)
    assert shown["status"] == "In Progress" and shown["labels"] == ["worker-active"]
    assert [c["body"] for c in shown["comments"]] == ["Plan: do it"]
    assert shown["pr"] is None
    listed = cli.json("issue", "list", "--status", "In Progress")
    assert isinstance(listed, list) and [i["identifier"] for i in listed] == ["ENG-2"]

    # The implementer's branch, pushed and opened as a PR on GitHub.
    git(cli.repo, "switch", "--quiet", "-c", "legion/eng-2")
    (cli.repo / "feature.txt").write_text("feature\n")
    git(cli.repo, "add", "feature.txt")
    git(cli.repo, "commit", "--quiet", "-m", "Add the feature")
    git(cli.repo, "switch", "--quiet", "main")
    assert (
        cli("pr", "create", "--issue", "ENG-2", "--branch", "legion/eng-2").stdout.strip() == "#1"
    )
    assert git(remote, "rev-parse", "refs/heads/legion/eng-2").strip()
    cli("issue", "move", "ENG-2", "Needs Review")
    cli("issue", "label", "ENG-2", "--remove", "worker-active", "--add", "worker-done")
    assert linear.state_name("ENG-2") == "In Review"

    # The reviewer's verdict: a label and a marked comment on GitHub.
    cli("pr", "review", "1", "--request-changes", "--body", "add tests")
    pr = cli.json("pr", "view", "ENG-2")
    assert isinstance(pr, dict) and pr["review"] == "changes_requested"
    cli("pr", "review", "1", "--approve")
    assert github.label_names(1) == ["worker-approved"]
    state = cli.json("state")
    assert isinstance(state, dict)
    assert state["issues"]["ENG-2"]["review"] == "approved"
    assert state["issues"]["ENG-2"]["suggested_action"] == "transition_to_retro"

    merged = cli.json("pr", "merge", "1")
    assert isinstance(merged, dict) and merged["state"] == "merged"
    assert github.merges == [(1, "SQUASH")]
    cli("issue", "move", "ENG-2", "Done")
    assert linear.state_name("ENG-2") == "Done"


def test_bad_credentials_are_one_line_and_name_no_secret(cli: Cli) -> None:
    cli.env = cli.env | {"LINEAR_API_KEY": "lin_api_wrongwrongwrong"}
    result = cli("issue", "list", ok=False)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "legion doctor" in lines[0], result.stderr
    assert "wrongwrong" not in result.stderr and "Traceback" not in result.stderr


def test_init_checks_the_team_and_credentials_before_writing_anything(
    git_repo: Path, fakes: tuple[FakeLinear, FakeGitHub, Path]
) -> None:
    linear, github, _remote = fakes
    env = dict(os.environ) | {
        "LINEAR_API_URL": linear.api_url,
        "LINEAR_API_KEY": linear.token,
        "GITHUB_API_URL": github.url,
        "GITHUB_TOKEN": github.token,
    }
    init = ("init", "--tracker", "linear", "--forge", "github", "--repo", "acme/widgets")
    wrong_team = run_legion(*init, "--team", "NOPE", cwd=git_repo, env=env)
    assert wrong_team.returncode == 1 and "Linear team" in wrong_team.stderr
    assert len(wrong_team.stderr.strip().splitlines()) == 1
    no_key = run_legion(*init, "--team", "ENG", cwd=git_repo, env=env | {"LINEAR_API_KEY": ""})
    assert no_key.returncode == 1 and "LINEAR_API_KEY" in no_key.stderr
    assert not (git_repo / ".legion").exists()  # nothing half-made

    linear.reset(retro_state=False)  # Linear's default team: no Retro state yet
    made = run_legion(*init, "--team", "ENG", cwd=git_repo, env=env)
    assert made.returncode == 0, made.stderr
    warning = [line for line in made.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1 and "Retro" in warning[0] and "[statuses]" in warning[0]
    assert (git_repo / ".legion" / "config.toml").exists()


def _github_issues_project(git_repo: Path, github: FakeGitHub) -> Cli:
    """`legion init` with GitHub Issues and pull requests, the repository read from origin."""
    git(git_repo, "remote", "add", "origin", "git@github.com:acme/widgets.git")
    env = dict(os.environ) | {"GITHUB_API_URL": github.url, "GITHUB_TOKEN": github.token}
    cli = Cli(git_repo, env)
    cli("init", "--tracker", "github", "--forge", "github")
    return cli


def test_github_issues_as_the_tracker(
    git_repo: Path, fakes: tuple[FakeLinear, FakeGitHub, Path]
) -> None:
    cli = _github_issues_project(git_repo, fakes[1])  # the repository from origin
    config = (git_repo / ".legion" / "config.toml").read_text()
    assert 'github_repo = "acme/widgets"' in config and 'issue_key = "WIDGETS"' in config
    created = cli.json("issue", "create", "Add a flag", "--body", "Print each step.")
    assert isinstance(created, dict) and created["identifier"] == "WIDGETS-1"
    assert created["status"] == "Todo"
    cli("issue", "move", "WIDGETS-1", "In Progress")
    cli("issue", "label", "WIDGETS-1", "--add", "worker-active")
    listed = cli.json("issue", "list")
    assert isinstance(listed, list)
    assert [(i["identifier"], i["status"], i["labels"]) for i in listed] == [
        ("WIDGETS-1", "In Progress", ["worker-active"])
    ]
    cli("issue", "move", "WIDGETS-1", "Done")
    shown = cli.json("issue", "show", "WIDGETS-1")
    assert isinstance(shown, dict) and shown["status"] == "Done"


def test_blocked_by_on_linear_through_the_cli(
    cli: Cli, fakes: tuple[FakeLinear, FakeGitHub, Path]
) -> None:
    linear, _github, _remote = fakes
    assert cli("issue", "create", "Schema").stdout.strip() == "ENG-1"
    assert cli("issue", "create", "Wiring", "--blocked-by", "ENG-1").stdout.strip() == "ENG-2"
    assert linear.blockers("ENG-2") == {"ENG-1"}
    state = cli.json("state")
    assert isinstance(state, dict)
    assert state["issues"]["ENG-2"]["blocked_by"] == ["ENG-1"]
    assert state["issues"]["ENG-2"]["suggested_action"] == "skip"
    refused = cli("issue", "block", "ENG-1", "--by", "ENG-2", ok=False)
    assert refused.returncode == 2 and "would make a cycle" in refused.stderr
    cli("issue", "move", "ENG-1", "Done")
    state = cli.json("state")
    assert isinstance(state, dict)
    assert state["issues"]["ENG-2"]["suggested_action"] == "dispatch_planner"
    cli("issue", "block", "ENG-2", "--remove", "ENG-1")
    assert linear.blockers("ENG-2") == set()


def test_blocked_by_on_github_issues_through_the_cli(
    git_repo: Path, fakes: tuple[FakeLinear, FakeGitHub, Path]
) -> None:
    _linear, github, _remote = fakes
    cli = _github_issues_project(git_repo, github)
    cli("issue", "create", "Schema")
    created = cli.json("issue", "create", "Wiring", "--body", "Wire.", "--blocked-by", "widgets-1")
    assert isinstance(created, dict) and created["blocked_by"] == ["WIDGETS-1"]
    assert created["body"] == "Wire."
    assert github.issues[2]["body"] == "Wire.\n\nBlocked by #1"
    shown = cli("issue", "show", "WIDGETS-2").stdout
    assert "Blocked by: WIDGETS-1 (Todo)" in shown
    state = cli.json("state")
    assert isinstance(state, dict) and state["issues"]["WIDGETS-2"]["blocked_by"] == ["WIDGETS-1"]
    cli("issue", "move", "WIDGETS-1", "Done")
    state = cli.json("state")
    assert isinstance(state, dict)
    assert state["issues"]["WIDGETS-2"]["suggested_action"] == "dispatch_planner"


# -- CI checks (issue 19 item 1) -----------------------------------------------------------------

HOSTILE_NAME = "lint\x1b[2J\u202e"  # a check name that would clear the screen and reorder text


def _pr_with_checks(
    linear: FakeLinear, github: FakeGitHub, state: str = "In Review", **required: list[str]
) -> str:
    from tests.fakes.github_server import check_run, status_context

    linear.add_label("worker-done")
    issue = linear.add_issue("Checked", state=state, labels=["worker-done"])
    pr = github.add_pr(f"legion/{issue.lower()}", labels=("worker-approved",), head_oid="c" * 40)
    github.set_checks(
        pr["number"],
        check_run(HOSTILE_NAME, conclusion="FAILURE", url="https://ci.example/runs/7"),
        check_run("build", status="IN_PROGRESS"),
        status_context("ci/legacy", "SUCCESS", "https://legacy.example/1"),
        required=required.get("required", []),
    )
    return issue


def test_pr_view_shows_the_checks_and_the_failing_ones_with_their_links(
    cli: Cli, fakes: tuple[FakeLinear, FakeGitHub, Path]
) -> None:
    linear, github, _ = fakes
    issue = _pr_with_checks(linear, github)

    data = cli.json("pr", "view", issue)
    assert isinstance(data, dict)
    assert data["checks"] == "failing"
    assert data["failing_checks"] == [
        {
            "name": HOSTILE_NAME,
            "state": "failing",
            "status": "completed",
            "conclusion": "failure",
            "url": "https://ci.example/runs/7",
        }
    ]
    assert [c["state"] for c in data["check_runs"]] == ["failing", "pending", "passing"]
    raw = cli("pr", "view", issue, "--json").stdout
    assert "\x1b" not in raw and "\u202e" not in raw and "\\u202e" in raw

    text = cli("pr", "view", issue).stdout
    assert "Checks: failing" in text
    assert "failing: lint\\x1b[2J\\u202e  https://ci.example/runs/7" in text
    assert "pending: build" in text
    assert "\x1b" not in text and "\u202e" not in text
    assert "ci/legacy" not in text  # a passing check is counted, not listed


def test_state_shows_the_checks_and_why_it_waits(
    cli: Cli, fakes: tuple[FakeLinear, FakeGitHub, Path]
) -> None:
    from tests.fakes.github_server import check_run

    linear, github, _ = fakes
    failing = _pr_with_checks(linear, github)
    waiting = linear.add_issue("Waiting for CI", state="In Review", labels=["worker-done"])
    pr = github.add_pr(f"legion/{waiting.lower()}", labels=("worker-approved",), head_oid="d" * 40)
    github.set_checks(pr["number"], check_run("build", status="QUEUED"))
    plain = linear.add_issue("No CI", state="In Review", labels=["worker-done"])
    github.add_pr(f"legion/{plain.lower()}", labels=("worker-approved",), checks=None)

    data = cli.json("state")
    assert isinstance(data, dict)
    issues = data["issues"]
    assert issues[failing]["checks"] == "failing"
    assert issues[failing]["suggested_action"] == "resume_implementer_for_checks"
    assert issues[waiting]["checks"] == "pending"
    assert issues[waiting]["suggested_action"] == "skip"
    assert issues[waiting]["waiting"] == "checks pending"
    assert issues[plain]["checks"] == "none"
    assert issues[plain]["suggested_action"] == "transition_to_retro"

    text = cli("state").stdout
    assert "checks failing" in text and "checks pending" in text
    row = next(line for line in text.splitlines() if line.startswith(waiting))
    assert "skip (checks" in row  # the reason may wrap onto the next line of its column

    # The forge cannot be read: the checks are unknown, and nothing moves.
    github.fail_next(*[Fault(status=500, body=b"down", operation="PullRequestsForBranches")] * 3)
    down = cli.json("state")
    assert isinstance(down, dict)
    assert down["issues"][plain]["checks"] == "unknown"
    assert down["issues"][plain]["suggested_action"] == "skip"


def test_a_merge_a_required_check_refuses_fails_with_one_line_naming_the_checks(
    cli: Cli, fakes: tuple[FakeLinear, FakeGitHub, Path]
) -> None:
    linear, github, _ = fakes
    issue = _pr_with_checks(linear, github, "Retro", required=[HOSTILE_NAME, "build"])

    result = cli("pr", "merge", issue, ok=False)

    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    # Legion's own gate says it before GitHub's branch protection would.
    assert lines[0] == (
        "legion: error: PR #1 does not merge while its checks fail: lint\\x1b[2J\\u202e "
        "(`legion pr checks 1`; --force merges it anyway)"
    )
    assert "\x1b" not in result.stderr
    assert github.merges == []
    # Forced by a person, GitHub's protection still has its say.
    forced = cli("pr", "merge", issue, "--force", ok=False)
    assert forced.returncode != 0 and "cannot be merged until its checks pass" in forced.stderr
    assert github.merges == []


def test_legion_refuses_a_red_merge_github_would_take_unless_a_person_forces_it(
    cli: Cli, fakes: tuple[FakeLinear, FakeGitHub, Path]
) -> None:
    linear, github, _ = fakes
    issue = _pr_with_checks(linear, github, "Retro")  # no branch protection: GitHub would merge

    refused = cli("pr", "merge", issue, ok=False)
    assert refused.returncode == 1 and "does not merge while its checks fail" in refused.stderr
    assert github.merges == []
    in_session = cli("pr", "merge", issue, "--force", env={"LEGION_MODE": "finish"}, ok=False)
    assert in_session.returncode == 2 and "--force is a person's" in in_session.stderr
    assert github.merges == []

    forced = cli("pr", "merge", issue, "--force", env={"LEGION_AUTHOR": "ada"})
    assert forced.returncode == 0, forced.stderr
    assert len(github.merges) == 1
    log = cli.json("log")
    assert isinstance(log, list)
    [entry] = [e for e in log if e["action"] == "pr_merge_forced"]
    assert entry["author"] == "ada" and entry["detail"].startswith("PR #1 does not merge")
