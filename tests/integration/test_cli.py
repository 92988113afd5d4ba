"""The `legion` command as a user runs it: the real console script against a real SQLite file."""

from __future__ import annotations

import json
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.cli import LegionRunner, Result, git, run_legion


def one_line_error(result: Result, fragment: str) -> None:
    assert result.returncode != 0, result
    assert result.stdout == "", result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("legion: error: "), lines[0]
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.stderr


def test_version(tmp_path: Path) -> None:
    from legion import __version__

    result = run_legion("--version", cwd=tmp_path)
    assert (result.returncode, result.stdout.strip()) == (0, f"legion {__version__}")


def test_init_writes_config_and_is_idempotent(git_repo: Path, isolated_env: Path) -> None:
    result = run_legion("init", "--key", "ENG", cwd=git_repo)
    assert result.returncode == 0, result.stderr
    config = (git_repo / ".legion" / "config.toml").read_text()
    project_id = config.split('project_id = "')[1].split('"')[0]
    uuid.UUID(project_id)
    assert (
        'tracker = "embedded"' in config
        and 'forge = "embedded"' in config
        and 'base_branch = "main"' in config
    )
    assert (isolated_env / "state" / "legion" / project_id / "legion.db").is_file()
    again = run_legion("init", cwd=git_repo)
    assert again.returncode == 0 and "Already a Legion project" in again.stdout
    assert (git_repo / ".legion" / "config.toml").read_text() == config
    created = run_legion("issue", "create", "Hello", cwd=git_repo)
    assert created.stdout.strip() == "ENG-1"


def test_init_outside_git(tmp_path: Path) -> None:
    one_line_error(run_legion("init", cwd=tmp_path), "is not inside a git repository")
    assert not (tmp_path / ".legion").exists()


def test_issue_lifecycle_json(legion: LegionRunner) -> None:
    assert legion("issue", "create", "Parent", "--status", "backlog").stdout.strip() == "LEG-1"
    child = legion(
        "issue",
        "create",
        "Child",
        "--body",
        "Do the thing",
        "--parent",
        "leg-1",
        "--label",
        "worker-active",
        "--json",
    )
    data = json.loads(child.stdout)
    assert (
        data["identifier"] == "LEG-2"
        and data["parent"] == "LEG-1"
        and data["labels"] == ["worker-active"]
    )
    assert (
        legion("issue", "move", "LEG-2", "in review").stdout.strip()
        == "LEG-2: Todo -> Needs Review"
    )
    assert (
        legion(
            "issue", "label", "LEG-2", "--add", "worker-done", "--remove", "worker-active"
        ).returncode
        == 0
    )
    assert (
        legion(
            "issue", "comment", "LEG-2", "--body", "Plan:\n1. do it", "--author", "legion-plan"
        ).returncode
        == 0
    )
    assert (
        legion(
            "issue", "comment", "LEG-2", "--body-file", "-", input_text="from stdin\n"
        ).returncode
        == 0
    )
    shown = json.loads(legion("issue", "show", "leg-2", "--json").stdout)
    assert shown["status"] == "Needs Review"
    assert shown["labels"] == ["worker-done"]
    assert [c["body"] for c in shown["comments"]] == ["Plan:\n1. do it", "from stdin\n"]
    assert shown["comments"][0]["author"] == "legion-plan"
    assert shown["pr"] is None
    parent = json.loads(legion("issue", "show", "LEG-1", "--json").stdout)
    assert parent["children"] == ["LEG-2"]
    listed = json.loads(legion("issue", "list", "--json", "--status", "Needs Review").stdout)
    assert [i["identifier"] for i in listed] == ["LEG-2"]
    human = legion("issue", "list")
    assert "LEG-1" in human.stdout and "Parent" in human.stdout and human.returncode == 0
    comments = json.loads(legion("issue", "comments", "LEG-2", "--json").stdout)
    assert len(comments) == 2


def test_state_json(legion: LegionRunner, project: Path) -> None:
    project_id = json.loads(legion("config", "--json").stdout)["settings"]["project_id"]["value"]
    legion("issue", "create", "Plan me")
    legion("issue", "create", "Review me", "--status", "Needs Review", "--label", "worker-done")
    git(project, "switch", "--quiet", "-c", "legion/leg-2")
    (project / "f.txt").write_text("x\n")
    git(project, "add", "f.txt")
    git(project, "commit", "--quiet", "-m", "work")
    git(project, "switch", "--quiet", "main")
    assert (
        legion("pr", "create", "--issue", "LEG-2", "--branch", "legion/leg-2").stdout.strip()
        == "#1"
    )
    assert legion("pr", "review", "1", "--approve").returncode == 0
    state = json.loads(legion("state", "--json").stdout)["issues"]
    assert state["LEG-1"] == {
        "identifier": "LEG-1",
        "title": "Plan me",
        "status": "Todo",
        "labels": [],
        "review": "none",
        "checks": "none",
        "pr": None,
        "has_live_worker": False,
        "suggested_action": "dispatch_planner",
        "waiting": None,
        "mode": "plan",
        "session_id": str(uuid.uuid5(uuid.UUID(project_id), "LEG-1:plan")),
        "opted_in": False,
        "blocked_by": [],
        "open_children": [],
        "row": 24,
    }
    assert state["LEG-2"]["suggested_action"] == "transition_to_retro"
    assert state["LEG-2"]["mode"] == "retro"
    assert state["LEG-2"]["session_id"] == str(uuid.uuid5(uuid.UUID(project_id), "LEG-2:implement"))
    assert state["LEG-2"]["review"] == "approved"
    assert state["LEG-2"]["pr"] == {"number": 1, "is_draft": False, "review": "approved"}
    assert state["LEG-2"]["checks"] == "none"  # the embedded forge has no CI
    table = legion("state")
    assert "move to Retro, start retro" in table.stdout and table.returncode == 0


def test_pr_commands(legion: LegionRunner, project: Path) -> None:
    legion("issue", "create", "Feature")
    git(project, "switch", "--quiet", "-c", "feature")
    (project / "feature.txt").write_text("feature\n")
    git(project, "add", "feature.txt")
    git(project, "commit", "--quiet", "-m", "feature")
    git(project, "switch", "--quiet", "main")
    assert (
        legion("pr", "create", "--issue", "LEG-1", "--branch", "feature", "--draft").returncode == 0
    )
    one_line_error(legion("pr", "merge", "1"), "is a draft")
    assert legion("pr", "ready", "LEG-1").stdout.strip() == "#1: ready for review"
    one_line_error(legion("pr", "review", "1", "--request-changes"), "needs --body")
    one_line_error(legion("pr", "review", "1"), "exactly one of")
    assert legion("pr", "review", "1", "--request-changes", "--body", "add tests").returncode == 0
    assert json.loads(legion("pr", "view", "1", "--json").stdout)["review"] == "changes_requested"
    legion("pr", "review", "1", "--approve")
    merged = legion("pr", "merge", "#1", "--json")
    assert json.loads(merged.stdout)["state"] == "merged", merged.stderr
    assert (project / "feature.txt").exists()
    assert "merged" in legion("pr", "list").stdout
    assert json.loads(legion("issue", "show", "LEG-1", "--json").stdout)["pr"]["number"] == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["issue", "move", "LEG-1", "Someday"], "unknown status 'Someday'"),
        (["issue", "label", "LEG-1", "--add", "urgent"], "unknown label 'urgent'"),
        (["issue", "show", "LEG-42"], "no issue LEG-42"),
        (["issue", "show", "42"], "invalid issue identifier '42'"),
        (["issue", "create", "ok", "--body", "nul\x01char"], "control character"),
        (["issue", "create", "two\nlines"], "single line"),
        (["issue", "create", "ok", "--parent", "LEG-9"], "no issue LEG-9"),
        (["issue", "label", "LEG-1"], "nothing to do"),
        (["issue", "comment", "LEG-1"], "--body"),
        (
            ["issue", "create", "ok", "--body-file", "/nonexistent/file"],
            "cannot read /nonexistent/file",
        ),
        (
            ["pr", "create", "--issue", "LEG-1", "--branch", "no-such-branch"],
            "no branch 'no-such-branch'",
        ),
        (["pr", "view", "7"], "no pull request #7"),
        (["issue", "frobnicate"], "No such command"),
        (["issue", "create"], "Missing argument"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    legion: LegionRunner, args: list[str], fragment: str
) -> None:
    legion("issue", "create", "existing")
    before = legion("issue", "list", "--json").stdout
    one_line_error(legion(*args), fragment)
    assert legion("issue", "list", "--json").stdout == before


def test_huge_body_is_refused(legion: LegionRunner, project: Path) -> None:
    big = project.parent / "big.txt"
    big.write_text("x" * (1024 * 1024))
    one_line_error(legion("issue", "create", "big", "--body-file", str(big)), "at most 65,536")
    assert json.loads(legion("issue", "list", "--json").stdout) == []


def test_shell_metacharacters_are_just_text(legion: LegionRunner, tmp_path: Path) -> None:
    # A short path: three copies of it must fit in a title (256 characters) however deep the
    # test runner puts tmp_path.
    marker = Path(tempfile.mkdtemp(prefix="lgt-")) / "pwned"
    title = f"$(touch {marker}) `touch {marker}`; touch {marker} 'q' \"dq\" ünï 🎉"
    created = legion("issue", "create", title, "--json")
    assert json.loads(created.stdout)["title"] == title
    assert not marker.exists()
    marker.parent.rmdir()


def test_missing_project_and_broken_config(git_repo: Path, tmp_path: Path) -> None:
    one_line_error(run_legion("state", cwd=tmp_path), "no Legion project found")
    one_line_error(run_legion("issue", "list", cwd=git_repo), "run `legion init`")
    (git_repo / ".legion").mkdir()
    (git_repo / ".legion" / "config.toml").write_text('project_id = "abc"\n')
    one_line_error(run_legion("issue", "list", cwd=git_repo), "key 'project_id' must be a UUID")
    (git_repo / ".legion" / "config.toml").write_text("project_id = [\n")
    one_line_error(run_legion("state", cwd=git_repo), "invalid TOML")


def test_corrupt_database_is_one_line(legion: LegionRunner, isolated_env: Path) -> None:
    (db,) = (isolated_env / "state" / "legion").glob("*/legion.db")
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"garbage" * 1000)
    one_line_error(legion("issue", "list"), "corrupt or not a Legion database")


def test_worktree_finds_the_project(legion: LegionRunner, project: Path, tmp_path: Path) -> None:
    legion("issue", "create", "From main")
    worktree = tmp_path / "ws" / "leg 1 (with spaces)"
    git(project, "worktree", "add", "--quiet", "-b", "legion/leg-1", str(worktree))
    assert not (worktree / ".legion").exists()
    result = legion("issue", "label", "LEG-1", "--add", "worker-done", cwd=worktree)
    assert result.returncode == 0, result.stderr
    assert "worker-done" in legion("issue", "show", "LEG-1").stdout


def test_repo_option_and_env(legion: LegionRunner, project: Path, tmp_path: Path) -> None:
    legion("issue", "create", "Somewhere")
    assert "LEG-1" in run_legion("--repo", str(project), "issue", "list", cwd=tmp_path).stdout
    assert (
        "LEG-1"
        in run_legion("issue", "list", cwd=tmp_path, env={"LEGION_REPO": str(project)}).stdout
    )


def test_two_processes_writing_at_once_both_succeed(legion: LegionRunner) -> None:
    def create(n: int) -> Result:
        return legion("issue", "create", f"parallel {n}")

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(create, range(12)))
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results if r.returncode]
    identifiers = sorted(r.stdout.strip() for r in results)
    assert identifiers == sorted(f"LEG-{n}" for n in range(1, 13))


def test_init_for_real_backends_asks_for_what_it_needs(git_repo: Path) -> None:
    for args, fragment in (
        (["--tracker", "linear"], "--tracker linear needs the team"),
        (["--team", "ENG"], "--team is for --tracker linear"),
        (["--forge", "github"], "--forge github needs the repository"),
        (["--repo", "acme/widgets"], "--repo is for --forge github"),
        (["--forge", "github", "--repo", "acme"], "must be OWNER/NAME"),
    ):
        result = run_legion("init", *args, cwd=git_repo)
        assert result.returncode == 2, (args, result.stderr)
        one_line_error(result, fragment)
    assert not (git_repo / ".legion").exists()  # nothing half-made


def test_init_refuses_a_repository_with_no_commit(tmp_path: Path) -> None:
    """Workers branch from the base branch's commit: with none, every dispatch would fail."""
    repo = tmp_path / "fresh"
    repo.mkdir()
    git(repo, "init", "--quiet")
    result = run_legion("init", cwd=repo)
    assert result.returncode == 2, result
    one_line_error(result, "has no commit yet")
    assert "git commit" in result.stderr
    assert not (repo / ".legion").exists()
    git(repo, "commit", "--quiet", "--allow-empty", "-m", "first")
    assert run_legion("init", cwd=repo).returncode == 0


def test_init_on_a_project_refuses_other_backends_and_accepts_its_own(project: Path) -> None:
    """`init` never silently ignores an option: the same settings again are fine (exit 0), other
    ones are refused with what to edit, and nothing changes."""
    config = (project / ".legion" / "config.toml").read_text()
    for args in (["--key", "LEG"], ["--tracker", "embedded", "--forge", "embedded"], []):
        same = run_legion("init", *args, cwd=project)
        assert same.returncode == 0 and "Already a Legion project" in same.stdout, (args, same)
    for args, fragments in (
        (["--tracker", "linear", "--team", "ENG"], ('tracker = "linear"', 'linear_team = "ENG"')),
        (["--forge", "github", "--repo", "acme/widgets"], ('forge = "github"',)),
        (["--key", "ENG"], ('issue_key = "ENG"',)),
    ):
        result = run_legion("init", *args, cwd=project)
        assert result.returncode == 2, (args, result)
        one_line_error(result, "already a Legion project")
        for fragment in (*fragments, ".legion/config.toml", "legion doctor"):
            assert fragment in result.stderr, (fragment, result.stderr)
    assert (project / ".legion" / "config.toml").read_text() == config


def test_escalate_credits_whoever_ran_it(legion: LegionRunner) -> None:
    """A person escalating is named as the asker; only the controller's session is the Oracle."""
    for n in (1, 2):
        legion("issue", "create", f"Issue {n}")
    by_person = legion(
        "escalate",
        "LEG-1",
        "--question",
        "Which format?",
        "--reason",
        "The plan leaves it open.",
        env={"LEGION_AUTHOR": "alice"},
    )
    assert by_person.returncode == 0, by_person.stderr
    (comment,) = json.loads(legion("issue", "comments", "LEG-1", "--json").stdout)
    assert comment["author"] == "alice"
    assert comment["body"].startswith("## Question from alice\n")
    assert "**Why it needs a human** (alice):" in comment["body"]
    assert "controller" not in comment["body"] and "Oracle" not in comment["body"]
    by_controller = legion(
        "escalate",
        "LEG-2",
        "--question",
        "Which format?",
        "--reason",
        "Open.",
        env={"LEGION_MODE": "controller"},
    )
    assert by_controller.returncode == 0, by_controller.stderr
    (comment,) = json.loads(legion("issue", "comments", "LEG-2", "--json").stdout)
    assert comment["body"].startswith("## Question from the controller\n")
    assert "(Legion's Oracle)" in comment["body"]
