"""The shape of the command line, as gh's: `legion --help` by section, `legion help CMD`,
`legion completion SHELL` (a script a real bash runs), the global -q/-v, `legion config get|set`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import LEGION_BIN, LegionRunner, Result, run_legion


def one_line_error(result: Result, code: int, fragment: str = "") -> None:
    assert result.returncode == code, result
    assert result.stdout == "", result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("legion: error: "), result.stderr
    assert fragment in lines[0], lines[0]


# -- 1. `legion --help` by section -------------------------------------------------------------


def _help_sections(text: str) -> dict[str, list[str]]:
    """Each section of a help text (a line ending in `:` at the margin) and the first word of
    its lines."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            current = sections.setdefault(line[:-1], [])
        elif not line.strip():
            current = None
        elif current is not None and line.startswith("  ") and not line.startswith("   "):
            current.append(line.split()[0])
    return sections


def test_root_help_lists_every_command_in_exactly_one_section(tmp_path: Path) -> None:
    import typer.main

    from legion.cli.app import OTHER_SECTION, SECTIONS, app

    commands = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    listed = [name for _, names in SECTIONS for name in names]
    assert sorted(listed) == sorted(set(listed)), "a command in two sections"
    assert set(listed) == commands, (set(listed) - commands, commands - set(listed))

    result = run_legion("--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    sections = _help_sections(result.stdout)
    assert OTHER_SECTION not in sections
    shown = [name for title, names in sections.items() if title != "Options" for name in names]
    assert sorted(shown) == sorted(commands)
    assert list(sections)[1] == "Getting started"
    assert sections["Getting started"][0] == "init"
    agents = next(title for title in sections if title.startswith("Commands the agents run"))
    assert {"ask", "reply", "complete", "escalate"} <= set(sections[agents])
    # One column for every section.
    starts = {
        line.index(line.split()[1])
        for title, names in sections.items()
        if title != "Options"
        for line in result.stdout.splitlines()
        if line.startswith("  ") and line.split()[0] in names and len(line.split()) > 1
    }
    assert len(starts) == 1, starts


# -- 3. `legion help CMD [SUB]` ----------------------------------------------------------------


@pytest.mark.parametrize("words", [[], ["issue"], ["issue", "create"], ["tui"], ["help"]])
def test_help_command_is_the_help_option(tmp_path: Path, words: list[str]) -> None:
    by_command = run_legion("help", *words, cwd=tmp_path)
    by_option = run_legion(*words, "--help", cwd=tmp_path)
    assert by_command.returncode == by_option.returncode == 0, by_command.stderr
    assert by_command.stdout == by_option.stdout


def test_help_of_an_unknown_command_suggests_one(tmp_path: Path) -> None:
    one_line_error(run_legion("help", "isue", cwd=tmp_path), 2, "did you mean 'issue'")
    one_line_error(run_legion("help", "issue", "crate", cwd=tmp_path), 2, "'create'")
    one_line_error(run_legion("help", "state", "x", cwd=tmp_path), 2, "no subcommands")


# -- 2. `legion completion SHELL` --------------------------------------------------------------


def _complete(tmp_path: Path, words: str, cword: int) -> list[str]:
    env = {**os.environ, "_LEGION_COMPLETE": "complete_bash"}
    env |= {"COMP_WORDS": words, "COMP_CWORD": str(cword)}
    proc = subprocess.run(
        [str(LEGION_BIN)], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_completion_answers_the_command_line(tmp_path: Path) -> None:
    assert _complete(tmp_path, "legion iss", 1) == ["issue"]
    assert {"create", "list", "show", "close", "reopen", "edit"} <= set(
        _complete(tmp_path, "legion issue ", 2)
    )
    # A name that is the start of another is not completed as the command it names.
    assert set(_complete(tmp_path, "legion host", 1)) == {"host", "hosts"}
    assert _complete(tmp_path, "legion -C . issue comm", 4) == ["comment", "comments"]
    assert "--body-file" in _complete(tmp_path, "legion issue create --", 3)
    # `legion help` completes the names it takes.
    assert _complete(tmp_path, "legion help iss", 2) == ["issue"]
    assert _complete(tmp_path, "legion help issue cl", 3) == ["close"]
    assert _complete(tmp_path, "legion help state ", 3) == []


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_the_bash_script_completes_in_a_real_bash(tmp_path: Path) -> None:
    script = (
        'eval "$(legion completion bash)"\n'
        "COMP_WORDS=(legion iss); COMP_CWORD=1; _legion_completion legion\n"
        'echo "one: ${COMPREPLY[*]}"\n'
        'COMP_WORDS=(legion issue ""); COMP_CWORD=2; _legion_completion legion\n'
        'echo "two: ${COMPREPLY[*]}"\n'
    )
    env = {**os.environ, "PATH": f"{LEGION_BIN.parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines())
    assert lines["one"] == "issue"
    assert {"create", "list", "show", "close", "reopen", "edit"} <= set(lines["two"].split())


def test_the_zsh_script_completes_in_a_real_zsh(tmp_path: Path) -> None:
    """zsh's completion system itself needs a terminal: its two entry points the script uses
    (`compdef`, `_arguments`) are stood in for, and print what they were given."""
    script = (
        "compdef() { :; }\n"
        '_arguments() { print -r -- "got: $*"; }\n'
        'eval "$(legion completion zsh)"\n'
        "words=(legion iss); CURRENT=2; _legion_completion\n"
        'words=(legion issue ""); CURRENT=3; _legion_completion\n'
    )
    env = {**os.environ, "PATH": f"{LEGION_BIN.parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        ["zsh", "-f", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.splitlines()
    assert first.startswith("got: *: :((") and '"issue":' in first and '"init":' not in first
    assert all(f'"{name}":' in second for name in ("create", "list", "close", "reopen", "edit"))


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_for_each_shell(tmp_path: Path, shell: str) -> None:
    result = run_legion("completion", shell, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "_LEGION_COMPLETE=complete_" + shell in result.stdout


def test_completion_of_an_unknown_shell_is_refused(tmp_path: Path) -> None:
    one_line_error(run_legion("completion", "tcsh", cwd=tmp_path), 2, "unknown shell 'tcsh'")
    assert re.search("bash", run_legion("completion", "--help", cwd=tmp_path).stdout)


# -- 5. `legion config get|set` ----------------------------------------------------------------


def test_config_set_then_get_keeps_the_file(legion: LegionRunner, project: Path) -> None:
    config = project / ".legion" / "config.toml"
    before = config.read_text(encoding="utf-8")
    assert legion("config").stdout.startswith("# project:")  # no subcommand: every setting
    done = legion("config", "set", "wip_limit", "3")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{config}: wip_limit = 3"
    assert legion("config", "get", "wip_limit").stdout == "3\n"
    assert legion("config", "set", "base_branch", "main").returncode == 0
    assert legion("config", "get", "base_branch").stdout == "main\n"
    got = json.loads(legion("config", "get", "base_branch", "--json").stdout)
    assert got == {"key": "base_branch", "value": "main", "source": str(config)}
    after = config.read_text(encoding="utf-8")
    assert after.startswith(before)  # what was there is kept, line for line
    assert tomllib.loads(after)["wip_limit"] == 3


def test_config_set_refuses_bad_keys_and_values(legion: LegionRunner, project: Path) -> None:
    config = project / ".legion" / "config.toml"
    before = config.read_text(encoding="utf-8")
    one_line_error(legion("config", "set", "wip_limt", "3"), 2, "did you mean 'wip_limit'")
    one_line_error(legion("config", "get", "wip_limt"), 2, "did you mean 'wip_limit'")
    one_line_error(legion("config", "set", "tick", "soon"), 2, "tick must be")
    one_line_error(legion("config", "set", "store", "sqlite"), 2, "--user")
    one_line_error(
        legion("config", "set", "tick", "5", env={"LEGION_MODE": "implement"}), 2, "session"
    )
    assert config.read_text(encoding="utf-8") == before


def test_config_set_of_what_runs_says_the_file_needs_trust(
    legion: LegionRunner, project: Path
) -> None:
    done = legion("config", "set", "sandbox", "none")
    assert done.returncode == 0, done.stderr
    assert "legion trust" in done.stderr and "sandbox" in done.stderr
    assert legion("config").returncode == 1  # not read until trusted
    assert legion("trust").returncode == 0
    assert legion("config", "get", "sandbox").stdout == "none\n"


def test_config_set_user_writes_the_user_config(legion: LegionRunner, isolated_env: Path) -> None:
    done = legion("config", "set", "tick", "30", "--user")
    assert done.returncode == 0, done.stderr
    user = isolated_env / "config" / "legion" / "config.toml"
    assert tomllib.loads(user.read_text(encoding="utf-8")) == {"tick": 30}
    assert legion("config", "get", "tick").stdout == "30.0\n"


# -- 6. `legion issue edit | close | reopen` ---------------------------------------------------


def test_issue_edit_changes_title_body_and_labels(legion: LegionRunner, project: Path) -> None:
    issue = legion("issue", "create", "First", "--body", "old").stdout.strip()
    done = legion("issue", "edit", issue, "--title", "Second", "--body", "new")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{issue}: edited (Second)\n"
    (project / "spec.md").write_text("from a file\n", encoding="utf-8")
    labelled = legion(
        "issue", "edit", issue, "--body-file", "spec.md", "--add-label", "worker-done", "--json"
    )
    data = json.loads(labelled.stdout)
    assert (data["title"], data["body"], data["labels"]) == (
        "Second",
        "from a file\n",
        ["worker-done"],
    )
    removed = json.loads(
        legion("issue", "edit", issue, "--remove-label", "worker-done", "--json").stdout
    )
    assert removed["labels"] == []


def test_issue_edit_refuses_nothing_an_empty_title_and_a_session(legion: LegionRunner) -> None:
    issue = legion("issue", "create", "First").stdout.strip()
    one_line_error(legion("issue", "edit", issue), 2, "nothing to do")
    one_line_error(legion("issue", "edit", issue, "--title", " "), 2, "title")
    one_line_error(legion("issue", "edit", "LEG-99", "--title", "x"), 2, "LEG-99")
    in_session = {"LEGION_MODE": "implement", "LEGION_ISSUE_ID": issue}
    one_line_error(legion("issue", "edit", issue, "--body", "x", env=in_session), 2, "session")
    assert json.loads(legion("issue", "show", issue, "--json").stdout)["title"] == "First"


def test_issue_close_and_reopen(legion: LegionRunner) -> None:
    issue = legion("issue", "create", "First").stdout.strip()
    assert legion("issue", "close", issue).stdout == f"{issue}: Todo -> Done\n"
    assert legion("issue", "close", issue).stdout == f"{issue}: already closed\n"
    assert json.loads(legion("issue", "show", issue, "--json").stdout)["status"] == "Done"
    assert legion("issue", "reopen", issue).stdout == f"{issue}: Done -> Todo\n"
    assert legion("issue", "reopen", issue).stdout == f"{issue}: already open (Todo)\n"
    assert json.loads(legion("issue", "reopen", issue, "--json").stdout)["status"] == "Todo"
    one_line_error(legion("issue", "close", "LEG-99"), 2, "LEG-99")


# -- 8. `legion attach NAME` -------------------------------------------------------------------


def test_attach_without_a_terminal_is_one_line(legion: LegionRunner) -> None:
    one_line_error(legion("attach", "LEG-1", env={"TMUX": ""}), 2, "needs a terminal")


def test_attach_to_nothing_lists_the_live_workers(project: Path) -> None:
    """On a terminal (a pseudo-terminal here), a name that names no worker and no agent is one
    line that says what runs."""
    import pty

    main_fd, other_fd = pty.openpty()
    try:
        proc = subprocess.run(
            [str(LEGION_BIN), "attach", "nosuch"],
            cwd=project,
            env={**os.environ, "TMUX": ""},
            stdin=other_fd,
            stdout=other_fd,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(other_fd)
        os.close(main_fd)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("legion: error: "), proc.stderr
    assert "nosuch" in lines[0] and "no worker is running in this project" in lines[0]


# -- 7. `legion log --follow` ------------------------------------------------------------------


def test_log_follow_prints_new_entries_until_ctrl_c(legion: LegionRunner, project: Path) -> None:
    import signal

    from legion.backends import open_backends
    from legion.config import load_project
    from legion.store.actionlog import ActionLog, OutcomeKind

    backends = open_backends(load_project(project))
    issue = backends.tracker.create_issue("First").identifier  # nothing logged: a test's own
    log = ActionLog(backends.db)
    log.append(issue, "transition_to_in_progress", OutcomeKind.DONE)
    follower = subprocess.Popen(
        [str(LEGION_BIN), "log", "--follow", "--json", "--issue", issue],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())
        assert (first["issue"], first["action"]) == (issue, "transition_to_in_progress")
        log.append("LEG-99", "elsewhere", OutcomeKind.DONE)  # another issue: not shown
        log.append(issue, "dispatch_implementer", OutcomeKind.FAILED, "no tmux")
        later = json.loads(follower.stdout.readline())
        assert (later["action"], later["outcome"], later["detail"]) == (
            "dispatch_implementer",
            "failed",
            "no tmux",
        )
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=30) == 0
        assert follower.stderr is not None and follower.stderr.read() == ""
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()


def test_a_session_cannot_follow_the_log_through_the_daemon() -> None:
    from legion.services.session_ops import follows

    assert follows(["log", "--follow"], 0) and follows(["log", "-n", "5", "-f"], 0)
    assert not follows(["log", "-n", "5"], 0)


# -- 4. `-q` and `-v` --------------------------------------------------------------------------


def test_quiet_prints_only_results(legion: LegionRunner) -> None:
    assert legion("issue", "list").stdout == "No issues.\n"
    assert legion("-q", "issue", "list").stdout == ""
    created = legion("-q", "issue", "create", "First")
    assert (created.returncode, created.stdout, created.stderr) == (0, "LEG-1\n", "")
    assert "LEG-1" in legion("--quiet", "issue", "list").stdout  # a result stays


def test_init_says_to_commit_the_folder_and_quiet_says_only_that_it_did(
    git_repo: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", str(git_repo), str(other)], check=True)
    loud = run_legion("init", cwd=git_repo)
    assert "Commit .legion/" in loud.stdout and "Next:" in loud.stdout
    quiet = run_legion("-q", "init", cwd=other)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == f"Initialised Legion in {other}\n"


def test_verbose_says_where_things_come_from_on_stderr(legion: LegionRunner, project: Path) -> None:
    plain = legion("issue", "create", "First")
    loud = legion("-v", "issue", "create", "Second")
    assert (plain.stdout, loud.stdout) == ("LEG-1\n", "LEG-2\n")  # the result is the same
    assert plain.stderr == "LEG-1 is in Todo: no daemon runs; `legion start` works on it\n"
    assert f"legion: project {project} (config {project / '.legion' / 'config.toml'})" in (
        loud.stderr
    )
    assert "legion: tracker embedded (from " in loud.stderr
    assert re.search(r"^legion: took [0-9.]+ s$", loud.stderr, re.MULTILINE)
    # Pruned start-up sees the root's flags too: the same output as the whole tree's.
    assert legion("-v", "-C", str(project), "issue", "list").returncode == 0


def test_quiet_and_verbose_together_are_refused(legion: LegionRunner) -> None:
    one_line_error(legion("-q", "-v", "state"), 2, "not both")


def test_pruned_start_up_skips_the_roots_options() -> None:
    from legion.cli.app import app, app_for

    def names(args: list[str]) -> list[str]:
        pruned = app_for(args)
        return [i.name or "" for i in pruned.registered_groups] + [
            (i.callback.__name__ if i.callback else "") for i in pruned.registered_commands
        ]

    assert names(["-q", "issue", "list"]) == ["issue"]
    assert names(["-v", "-C", "/tmp", "--quiet", "state"]) == ["state"]
    assert names(["--repo=/tmp", "-v", "completion", "bash"]) == ["completion"]
    assert app_for(["iss"]) is app and app_for(["-q"]) is app

    def subcommands(args: list[str]) -> list[str]:
        [group] = app_for(args).registered_groups
        assert group.typer_instance is not None
        commands = group.typer_instance.registered_commands
        return [i.name or (i.callback.__name__ if i.callback else "") for i in commands]

    # Within a group, only the subcommand named: the group's help, a typo's suggestion and
    # an option before the subcommand see the whole group.
    assert subcommands(["issue", "label", "LEG-1", "--add", "x"]) == ["label"]
    assert subcommands(["-q", "pr", "view"]) == ["view"]
    whole = ["create", "list", "show", "move"]
    assert subcommands(["issue"])[:4] == subcommands(["issue", "lable"])[:4] == whole
    assert subcommands(["issue", "--help"])[:4] == whole


# -- 9. no `{title}` in a help text ------------------------------------------------------------


def test_no_help_shows_a_placeholder_in_braces() -> None:
    import typer.main
    from typer._click.core import Context
    from typer.core import TyperGroup

    from legion.cli.app import app

    braces: list[str] = []

    def walk(command: Any, ctx: Any, path: list[str]) -> None:
        braces.extend(
            f"{' '.join(path)}: {line}" for line in ctx.get_help().splitlines() if "{" in line
        )
        if isinstance(command, TyperGroup):
            for name, sub in command.commands.items():
                walk(sub, Context(sub, info_name=name, parent=ctx, **sub.context_settings),
                     [*path, name])  # fmt: skip

    root = typer.main.get_command(app)
    walk(root, Context(root, info_name="legion", **root.context_settings), ["legion"])
    assert braces == []
    usage = run_legion("issue", "create", "--help", cwd=Path.cwd()).stdout.splitlines()[0]
    assert usage == "Usage: legion issue create [OPTIONS] TITLE"


def test_config_set_never_prints_a_urls_password(legion: LegionRunner, isolated_env: Path) -> None:
    url = "postgresql://legion:s3cret@db.example:5432/legion"
    done = legion("config", "set", "store", url, "--user")
    assert done.returncode == 0, done.stderr
    assert "s3cret" not in done.stdout + done.stderr
    user = isolated_env / "config" / "legion" / "config.toml"
    assert tomllib.loads(user.read_text(encoding="utf-8"))["store"] == url
    shown = legion("config", "set", "store", url, "--user", "--json").stdout
    assert "s3cret" not in shown
