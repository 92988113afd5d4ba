"""The rough edges a new user hit, each pinned by a test: the `legion` console script as a user
runs it (issue 9, part 5)."""

from __future__ import annotations

import json
import re
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import LegionRunner, Result, git, run_legion

IDENTIFIER = re.compile(r"^[A-Z][A-Z0-9]*-[1-9][0-9]*$")


def one_line_error(result: Result, code: int, fragment: str = "") -> None:
    assert result.returncode == code, result
    assert result.stdout == "", result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("legion: error: "), result.stderr
    assert fragment in lines[0], lines[0]


def branch_with_commit(project: Path, branch: str, name: str) -> None:
    git(project, "switch", "--quiet", "-c", branch)
    (project / name).write_text(f"{name}\n")
    git(project, "add", name)
    git(project, "commit", "--quiet", "-m", f"add {name}")
    git(project, "switch", "--quiet", "main")


# -- 1. `legion state` fits 80 columns ---------------------------------------------------------


def test_state_table_fits_80_columns(legion: LegionRunner, project: Path) -> None:
    from rich.cells import cell_len

    long_title = "Add a --verbose flag to every command that prints something, and document it"
    legion("issue", "create", long_title)
    legion(
        "issue",
        "create",
        "Fix it",
        "--status",
        "Needs Review",
        *("--label", "worker-done", "--label", "user-input-needed"),
        *("--label", "user-feedback-given", "--label", "worker-active"),
    )
    legion("issue", "create", "Ünïcode 🎉 漢字漢字漢字漢字漢字 wide title", "--status", "Backlog")
    branch_with_commit(project, "legion/leg-2", "two.txt")
    legion("pr", "create", "--issue", "LEG-2", "--branch", "legion/leg-2", "--draft")
    legion("pr", "review", "1", "--request-changes", "--body", "more tests")

    table = legion("state", env={"COLUMNS": "80"})
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert all(cell_len(line.rstrip()) <= 80 for line in lines), table.stdout
    text = table.stdout
    assert "Add a --verbose flag" in text and "…" in text and long_title not in text
    for label in ("worker-done", "user-input-needed", "user-feedback-given", "worker-active"):
        assert label in text  # never cut: labels wrap under the title
    assert "relay the human" in text and "answer to" in text and "review" in text
    assert "#1 changes" in text and "requested" in text

    wide = legion("state", env={"COLUMNS": "200"})
    assert long_title in wide.stdout  # room enough: nothing is cut


# -- 2. `legion peek -n` -----------------------------------------------------------------------


def test_peek_honours_the_line_count(
    legion: LegionRunner, project: Path, tmux_socket: Path
) -> None:
    from legion.backends import open_backends, open_workers
    from legion.config import load_project
    from legion.core.model import Mode

    legion("issue", "create", "Peek at me")
    loaded = load_project(project)
    workers = open_workers(loaded, open_backends(loaded))
    command = ["sh", "-c", "seq 1 100; exec sleep 600"]
    workers.windows.tmux.new_session(workers.windows.session, "leg-1-implement", command, project)
    workers.registry.start("LEG-1", Mode.IMPLEMENT, "session", "leg-1-implement", project)
    deadline = time.monotonic() + 45
    while "100" not in workers.windows.tmux.capture(
        f"={workers.windows.session}:leg-1-implement", lines=1
    ):
        assert time.monotonic() < deadline, "the window never printed"
        time.sleep(0.05)

    five = legion("peek", "LEG-1", "-n", "5")
    assert five.returncode == 0, five.stderr
    header, *screen = five.stdout.splitlines()
    assert header == "--- leg-1-implement (running)"
    assert screen == ["96", "97", "98", "99", "100"]
    assert legion("peek", "LEG-1", "--lines", "1").stdout.splitlines()[1:] == ["100"]
    as_json = json.loads(legion("peek", "LEG-1", "-n", "3", "--json").stdout)
    assert as_json["issue"] == "LEG-1" and as_json["window"] == "leg-1-implement"
    assert as_json["lines"] == 3 and as_json["screen"] == "98\n99\n100"


# -- 3. `legion feedback` only when something was asked ----------------------------------------


def test_feedback_needs_a_question(legion: LegionRunner) -> None:
    legion("issue", "create", "Nobody asked")
    before = legion("issue", "show", "LEG-1", "--json").stdout
    one_line_error(legion("feedback", "LEG-1", "Use UTC."), 1, "is not waiting for an answer")
    assert legion("issue", "show", "LEG-1", "--json").stdout == before  # nothing written

    legion("issue", "label", "LEG-1", "--add", "user-input-needed")
    one_line_error(legion("feedback", "LEG-1", "   "), 2, "empty")
    answered = legion("feedback", "LEG-1", "Use UTC.", "--json")
    assert answered.returncode == 0, answered.stderr
    data = json.loads(answered.stdout)
    assert data["identifier"] == "LEG-1"
    assert data["labels"] == ["user-feedback-given", "user-input-needed"]
    assert data["comment"]["issue"] == "LEG-1" and data["comment"]["body"] == "Use UTC."
    human = legion("feedback", "leg-1", "And Monday first.")
    assert human.stdout.strip() == "LEG-1: answer recorded; Legion relays it to the worker"


# -- 4. `legion config` speaks TOML ------------------------------------------------------------


def test_config_prints_toml(legion: LegionRunner, project: Path) -> None:
    env = {"LEGION_CLAUDE_ARGS": "--model 'big one'", "LEGION_TICK": "5"}
    shown = legion("config", env=env)
    assert shown.returncode == 0, shown.stderr
    assert not re.search(r"\bNone\b|= '|\('", shown.stdout), shown.stdout  # no Python repr
    parsed = tomllib.loads(shown.stdout)  # the whole output is valid TOML
    settings = json.loads(legion("config", "--json", env=env).stdout)["settings"]
    for name, row in settings.items():
        if row["value"] is None:
            assert name not in parsed
            assert re.search(rf"^# {name}: unset\b.*# default$", shown.stdout, re.MULTILINE)
        else:
            assert parsed[name] == row["value"], name
    assert parsed["claude_args"] == ["--model", "big one"] and parsed["tick"] == 5.0
    assert re.search(r'^issue_key = "LEG" +# .*config\.toml$', shown.stdout, re.MULTILINE)
    assert re.search(r"^labels = \[\] +# default$", shown.stdout, re.MULTILINE)
    assert re.search(r"^tick = 5\.0 +# LEGION_TICK$", shown.stdout, re.MULTILINE)
    assert "# wip_limit: unset (unlimited)" in shown.stdout


# -- 5. `legion pr review --comment` says what happened ----------------------------------------


def test_pr_review_reports_what_was_recorded(legion: LegionRunner, project: Path) -> None:
    legion("issue", "create", "Feature")
    branch_with_commit(project, "feature", "feature.txt")
    legion("pr", "create", "--issue", "LEG-1", "--branch", "feature")
    commented = legion("pr", "review", "1", "--comment", "--body", "Looks fine so far.")
    assert commented.stdout.strip() == "#1: comment recorded; review outcome still none"
    assert legion("pr", "review", "1", "--approve").stdout.strip() == "#1: approved"
    again = json.loads(legion("pr", "review", "1", "--comment", "--body", "nit", "--json").stdout)
    assert again["review"] == "approved"  # the PR's outcome: a comment does not change it
    assert again["recorded"]["outcome"] == "commented" and again["recorded"]["body"] == "nit"
    changes = legion("pr", "review", "1", "--request-changes", "--body", "add tests")
    assert changes.stdout.strip() == "#1: changes requested"


# -- 6. the merge commit names the issue once --------------------------------------------------


def test_merge_commit_message_names_the_issue_once(legion: LegionRunner, project: Path) -> None:
    legion("issue", "create", "Add a flag")
    branch_with_commit(project, "feature", "flag.txt")
    legion("pr", "create", "--issue", "LEG-1", "--branch", "feature")
    merged = legion("pr", "merge", "1")
    assert merged.returncode == 0, merged.stderr
    subject = git(project, "log", "-1", "--format=%s", "main").strip()
    assert subject == "Merge PR #1: LEG-1: Add a flag"
    assert git(project, "log", "-1", "--format=%b", "main").strip() == "Branch feature into main."


# -- 7. --json on init, start, stop, skills install (peek and feedback above) ------------------


def test_init_json(git_repo: Path) -> None:
    created = json.loads(run_legion("init", "--key", "ENG", "--json", cwd=git_repo).stdout)
    assert created["created"] is True and created["issue_key"] == "ENG"
    assert created["root"] == str(git_repo) and Path(created["config"]).is_file()
    again = json.loads(run_legion("init", "--json", cwd=git_repo).stdout)
    assert again == {**created, "created": False}


def test_skills_install_json(legion: LegionRunner, project: Path) -> None:
    result = json.loads(legion("skills", "install", "--scope", "project", "--json").stdout)
    assert result["scope"] == "project"
    assert result["target"] == str(project / ".claude" / "skills")
    assert result["files"] and all(Path(path).is_file() for path in result["files"])


def test_start_and_stop_json_and_attach_command(
    legion: LegionRunner, project: Path, tmux_socket: Path, fake_claude: Path
) -> None:
    started = legion("start", "--tick", "3600", "--json")
    try:
        assert started.returncode == 0, started.stderr
        info = json.loads(started.stdout)
        assert info["pid"] > 0 and info["mode"] == "auto" and info["tick"] == 3600.0
        assert Path(info["log"]).name == "daemon.log" and Path(info["log"]).exists()
        assert re.fullmatch(r"legion-[0-9a-f]{8}", info["session"])
        assert info["attach"] == f"tmux -S {tmux_socket} attach -t {info['session']}"
        refused = legion("start")
        one_line_error(refused, 1, "already running")
    finally:
        stopped = legion("stop", "--all", "--json")
    assert stopped.returncode == 0, stopped.stderr
    result = json.loads(stopped.stdout)
    assert result["stopped"] is True and result["pid"] == info["pid"]
    assert result["closed_session"] in (info["session"], None)
    assert json.loads(legion("stop", "--json").stdout) == {
        "stopped": False,
        "pid": None,
        "closed_session": None,
        "stopped_sessions": [],
        "still_running": [],
    }

    human = legion("start", "--tick", "3600")
    try:
        assert human.returncode == 0, human.stderr
        assert f"tmux -S {tmux_socket} attach -t legion-" in human.stdout
    finally:
        assert legion("stop", "--all").returncode == 0


def test_attach_command_without_a_private_socket() -> None:
    from legion.cli.common import attach_command

    assert attach_command(None, "legion-0123abcd") == "tmux attach -t legion-0123abcd"
    assert (
        attach_command(Path("/tmp/a dir/tmux.sock"), "legion-0123abcd")
        == "tmux -S '/tmp/a dir/tmux.sock' attach -t legion-0123abcd"
    )


# -- 8. one JSON shape convention --------------------------------------------------------------


def _objects(data: Any) -> Iterator[dict[str, Any]]:
    if isinstance(data, dict):
        yield data
        for value in data.values():
            yield from _objects(value)
    elif isinstance(data, list):
        for value in data:
            yield from _objects(value)


def test_json_shapes_follow_one_convention(
    legion: LegionRunner, project: Path, tmux_socket: Path
) -> None:
    legion("issue", "create", "Parent", "--status", "Backlog")
    legion("issue", "create", "Child", "--parent", "LEG-1", "--label", "user-input-needed")
    branch_with_commit(project, "legion/leg-2", "child.txt")
    outputs = [
        legion("issue", "list", "--json"),
        legion("issue", "show", "LEG-2", "--json"),
        legion("issue", "comment", "LEG-2", "--body", "hi", "--json"),
        legion("issue", "comments", "LEG-2", "--json"),
        legion("pr", "create", "--issue", "LEG-2", "--branch", "legion/leg-2", "--json"),
        legion("pr", "review", "1", "--comment", "--body", "ok", "--json"),
        legion("pr", "view", "LEG-2", "--json"),
        legion("issue", "show", "LEG-2", "--json"),
        legion("feedback", "LEG-2", "Yes.", "--json"),
        legion("state", "--json"),
        legion("reconcile", "--dry-run", "--json"),
        legion("status", "--json"),
        legion("log", "--json"),
        legion("workers", "--json"),
        legion("workspace", "list", "--json"),
        legion("workspace", "clean", "--dry-run", "--json"),
    ]
    reviews = {"approved", "changes_requested", "none", "unknown"}
    for output in outputs:
        assert output.returncode == 0, output.stderr
        for obj in _objects(json.loads(output.stdout)):
            assert "issue_id" not in obj, obj
            if "identifier" in obj:  # an issue itself
                assert {"title", "status"} <= obj.keys() and IDENTIFIER.match(obj["identifier"])
            if "issue" in obj:  # something that refers to an issue ("-": the whole project)
                assert obj["issue"] == "-" or IDENTIFIER.match(obj["issue"]), obj
                assert "identifier" not in obj
            if "number" in obj and "branch" in obj:  # a pull request
                assert obj["review"] in reviews
    state = json.loads(legion("state", "--json").stdout)["issues"]
    assert all(entry["identifier"] == key for key, entry in state.items())


# -- 9. exit codes: 2 for bad input, 1 otherwise -----------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["frobnicate"], 2, "No such command"),
        (["issue", "create"], 2, "Missing argument"),
        (["--repo", "/nonexistent/dir", "state"], 2, "does not exist"),
        (["init", "--key", "1x"], 2, "option --key"),
        (["init", "--tracker", "jira"], 2, "option --tracker"),
        (["issue", "create", "ok", "--status", "Someday"], 2, "unknown status"),
        (["issue", "list", "--label", "urgent"], 2, "unknown label"),
        (["issue", "show", "LEG-42"], 2, "no issue LEG-42"),
        (["issue", "show", "42"], 2, "invalid issue identifier"),
        (["issue", "move", "LEG-9", "Todo"], 2, "no issue LEG-9"),
        (["issue", "comment", "LEG-1", "--body", "bad\x01char"], 2, "control character"),
        (["pr", "view", "7"], 2, "no pull request #7"),
        (["pr", "view", "LEG-1"], 2, "has no pull request"),
        (["pr", "merge", "LEG-1"], 2, "has no pull request"),
        (["pr", "create", "--issue", "LEG-1", "--branch", "nope"], 2, "no branch 'nope'"),
        (["pr", "create", "--issue", "LEG-1", "--branch", "main"], 2, "must differ"),
        (["pr", "review", "1", "--approve", "--comment"], 2, "exactly one of"),
        (["log", "-n", "0"], 2, "--lines"),
        (["log", "--issue", "LEG-9"], 2, "no issue LEG-9"),
        (["feedback", "LEG-9", "hi"], 2, "no issue LEG-9"),
        (["feedback", "LEG-1", "hi"], 1, "not waiting for an answer"),
        (["dispatch", "LEG-1", "sleep"], 2, "unknown worker mode"),
        (["resume", "LEG-1", "plan"], 2, "--prompt"),
        (["dispatch", "LEG-9", "plan"], 2, "no issue LEG-9"),
        (["resume", "LEG-9", "plan", "--prompt", "go on"], 2, "no issue LEG-9"),
        (["answer", "LEG-9", "yes"], 2, "no issue LEG-9"),
        (["answer", "LEG-1", "yes"], 1, "no worker waiting"),
        (["peek", "LEG-9"], 2, "no issue LEG-9"),
        (["peek", "LEG-1"], 2, "has no worker window"),
        (["peek", "LEG-1", "-n", "0"], 2, "--lines"),
        (["start", "--mode", "turbo"], 2, "option --mode"),
        (["start", "--tick", "0"], 2, "option --tick"),
        (["skills", "install", "--scope", "galaxy"], 2, "unknown scope"),
        (["workspace", "clean", "--force"], 2, "No such option"),
        (["demo", "--mode", "turbo"], 2, "unknown controller mode"),
    ],
)
def test_exit_codes(legion: LegionRunner, args: list[str], code: int, fragment: str) -> None:
    legion("issue", "create", "existing")
    before = legion("issue", "show", "LEG-1", "--json").stdout
    one_line_error(legion(*args), code, fragment)
    assert legion("issue", "show", "LEG-1", "--json").stdout == before


def test_exit_code_1_for_what_is_not_bad_input(
    legion: LegionRunner, project: Path, tmp_path: Path, isolated_env: Path
) -> None:
    one_line_error(run_legion("state", cwd=tmp_path), 1, "no Legion project found")
    outside = tmp_path / "not-git"
    outside.mkdir()
    one_line_error(run_legion("init", cwd=outside), 1, "not inside a git repository")
    one_line_error(legion("state", env={"LEGION_WIP_LIMIT": "lots"}), 1, "LEGION_WIP_LIMIT")
    legion("issue", "create", "Feature")
    branch_with_commit(project, "feature", "feature.txt")
    legion("pr", "create", "--issue", "LEG-1", "--branch", "feature", "--draft")
    one_line_error(legion("pr", "merge", "1"), 1, "is a draft")
    one_line_error(legion("pr", "create", "--issue", "LEG-1", "--branch", "feature"), 1, "open PR")
    git(project, "branch", "-D", "feature")
    legion("pr", "ready", "1")
    one_line_error(legion("pr", "merge", "1"), 1, "does not exist any more")
    (db,) = (isolated_env / "state" / "legion").glob("*/legion.db")
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"garbage" * 1000)
    one_line_error(legion("issue", "list"), 1, "corrupt")


# -- 10. `legion workspace clean --dry-run` ----------------------------------------------------


def test_workspace_clean_dry_run_wording(legion: LegionRunner, project: Path) -> None:
    from legion.backends import open_workspaces
    from legion.config import load_project

    legion("issue", "create", "Finished", "--status", "Done")
    loaded = load_project(project)
    workspace = open_workspaces(loaded).ensure("LEG-1")
    dry = legion("workspace", "clean", "--dry-run")
    assert dry.stdout.strip() == "LEG-1: would be removed (dry run)"
    rows = json.loads(legion("workspace", "clean", "--dry-run", "--json").stdout)
    assert [(r["issue"], r["removed"], r["outcome"]) for r in rows] == [
        ("LEG-1", False, "would_remove")
    ]
    assert workspace.path.exists()
    done = legion("workspace", "clean")
    assert done.stdout.strip() == f"LEG-1: removed {workspace.path}"
    assert not workspace.path.exists()


# -- 12. every command's --help has an example -------------------------------------------------


def _command_paths() -> list[list[str]]:
    import typer.main

    from legion.cli.app import app

    paths: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:
        paths.append(path)
        if isinstance(command, typer.main.TyperGroup):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return paths


def test_every_command_help_has_an_example(tmp_path: Path) -> None:
    paths = _command_paths()
    assert ["issue", "create"] in paths and ["skills", "install"] in paths and len(paths) > 30
    missing, no_json = [], []
    for path in paths:
        result = run_legion(*path, "--help", cwd=tmp_path)
        assert result.returncode == 0, (path, result.stderr)
        if not re.search(r"^\s*Example:", result.stdout, re.MULTILINE):
            missing.append(" ".join(["legion", *path]))
        leaf = "COMMAND [ARGS]..." not in result.stdout.splitlines()[0]
        # A screen (the TUI, an attached session), the demo's story, a help text and a shell
        # script print nothing a program would read.
        screens = (["demo"], ["tui"], ["attach"], ["help"], ["completion"])
        if leaf and path not in screens and "--json" not in result.stdout:
            no_json.append(" ".join(["legion", *path]))
    assert not missing, f"no Example: in the --help of {missing}"
    assert not no_json, f"no --json on {no_json}"  # docs/commands.md promises it on every command
