"""`legion issue …` and `legion pr …` work unchanged on Linear and GitHub (the skills rely on
it): the real `legion` command, run as a user runs it, against the fake Linear and GitHub
servers on 127.0.0.1, with a local bare repository as the GitHub remote."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Result, git, run_legion
from tests.fakes.github_server import FakeGitHub
from tests.fakes.linear_server import FakeLinear


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

    def __call__(self, *args: str, ok: bool = True, input_text: str | None = None) -> Result:
        result = run_legion(*args, cwd=self.repo, env=self.env, input_text=input_text)
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


def test_github_issues_as_the_tracker(
    git_repo: Path, fakes: tuple[FakeLinear, FakeGitHub, Path]
) -> None:
    _linear, github, _remote = fakes
    git(git_repo, "remote", "add", "origin", "git@github.com:acme/widgets.git")
    env = dict(os.environ) | {"GITHUB_API_URL": github.url, "GITHUB_TOKEN": github.token}
    cli = Cli(git_repo, env)
    cli("init", "--tracker", "github", "--forge", "github")  # the repository from origin
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
    git(git_repo, "remote", "add", "origin", "git@github.com:acme/widgets.git")
    env = dict(os.environ) | {"GITHUB_API_URL": github.url, "GITHUB_TOKEN": github.token}
    cli = Cli(git_repo, env)
    cli("init", "--tracker", "github", "--forge", "github")
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
