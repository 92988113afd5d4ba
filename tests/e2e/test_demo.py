"""`legion demo`, the README's main job, end to end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from legion.backends import open_backends, open_workers
from legion.config import load_project
from tests.support.claude_env import find_claude
from tests.support.cli import run_legion
from tests.support.codex_env import find_codex
from tests.support.gemini_env import find_gemini
from tests.support.proxy_watch import (
    SENTINELS,
    assert_no_file_holds_a_secret,
    assert_no_session_held_a_secret,
    session_environments,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


# Codex everywhere in llm mode (its controller too, as in auto mode, plus the controller's
# turns), on an epic its architect splits in two; mixed in auto mode, on one issue. Codex in
# auto mode alone ran nothing these two do not.
@pytest.mark.parametrize(("runtime", "mode"), [("mixed", "auto"), ("codex", "llm")])
def test_demo_runs_on_codex_and_mixed(tmp_path: Path, runtime: str, mode: str) -> None:
    env = {"LEGION_CLAUDE_BIN": str(find_claude()), "LEGION_CODEX_BIN": str(find_codex())}
    demo = tmp_path / "demo"
    epic = runtime == "codex"
    what = ["--epic"] if epic else ["--issues", "1"]
    with session_environments(demo / "repo") as seen:
        result = run_legion(
            "demo", "--runtime", runtime, "--mode", mode, "--dir", str(demo), *what,
            cwd=tmp_path, env=env | SENTINELS, timeout=150,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    # No session of either CLI held the model key (the daemon's proxy did), nor a tracker or
    # forge token the user had in their environment.
    modes = assert_no_session_held_a_secret(seen)
    assert {"controller", "plan", "implement", "review", "retro", "finish"} <= modes, modes
    # Nor tmux's environments, nor any pane's scrollback, looked at while the sessions ran.
    assert seen.tmux_read.get("environments", 0) >= 4, seen.tmux_read
    assert seen.tmux_read.get("scrollbacks", 0) >= 6, seen.tmux_read
    # Nor did any file the sessions wrote: transcripts, rollouts, workspaces, the state.
    assert assert_no_file_holds_a_secret(demo) > 50
    done = "3 of 3 issues Done" if epic else "1 of 1 issue Done"
    assert done in result.stdout and f"({mode} mode, {runtime})." in result.stdout
    assert "(codex_bin (LEGION_CODEX_BIN))" in result.stdout
    assert ("Claude Code:" in result.stdout) is (runtime == "mixed")
    # Each session's own home is in the demo project's state.
    rollouts = list(demo.rglob("cli/codex/sessions/*/sessions/**/rollout-*.jsonl"))
    # codex: the controller's, the epic's architect's and four per child; mixed: the
    # implementer's only
    assert len(rollouts) == (10 if epic else 1), rollouts
    transcripts = list(demo.rglob("cli/claude-code/sessions/*/projects/*/*.jsonl"))
    assert (transcripts == []) is (runtime == "codex")
    config = (demo / "repo" / ".legion" / "config.toml").read_text()
    assert ('runtime = "codex"' in config) is (runtime == "codex")
    # Codex's sessions went through the daemon's model proxy too: metered by phase, as their
    # rollouts count them.
    env |= {"LEGION_STATE_HOME": str(demo / "state")}  # its own bus and trust
    worked = "LEG-2" if epic else "LEG-1"
    usage = json.loads(run_legion("usage", "--json", cwd=demo / "repo", env=env).stdout)
    metered: dict[str, int] = {}
    for row in usage:
        if row["issue"] == worked and row["runtime"] == "codex":
            metered[row["phase"]] = metered.get(row["phase"], 0) + row["total_tokens"]
    loaded = load_project(demo / "repo", env=dict(os.environ) | env)
    roster = open_workers(loaded, open_backends(loaded), dict(os.environ) | env).roster
    read = roster.transcript_usage(worked)[worked]
    coded = {"implement", "retro"} if runtime == "mixed" else set(read)
    assert metered == {phase: read[phase].total for phase in coded}, (metered, read)
    assert ('runtimes = {"implement" = "codex"}' in config) is (runtime == "mixed")
    # Every decision of the run is explained, and today's table decides each the same.
    replayed = json.loads(
        run_legion("log", "--replay", "--json", cwd=demo / "repo", env=env).stdout
    )
    assert replayed["checked"] >= 6 and replayed["different"] == [], replayed
    why = json.loads(run_legion("why", "LEG-1", "--json", cwd=demo / "repo", env=env).stdout)
    # Done now (row 1); last: what closed it (the finisher's start, which merged, or the
    # epic's close), or (a pass after it) Done.
    assert why["now"]["row"] == 1 and why["last"]["decided"]["row"] in (1, 6 if epic else 20)
    rows = [
        e["decided"]["row"]
        for e in json.loads(
            run_legion("log", "-n", "300", "--json", cwd=demo / "repo", env=env).stdout
        )
        if e["decided"]
    ]
    assert {24, 9, 10, 26, 15, 20} <= set(rows), rows  # each phase, by its row
    if epic:
        _the_epic_was_split_waited_and_closed(demo / "repo", env, rows)


def _the_epic_was_split_waited_and_closed(repo: Path, env: dict[str, str], rows: list[int]) -> None:
    """The architect split LEG-1 into LEG-2 and LEG-3 (blocked by LEG-2); LEG-1 was never
    planned, waited for them, and closed with their summary; LEG-3 started once LEG-2 was Done."""
    assert {23, 7, 6} <= set(rows), rows  # architect, the epic waits, the epic closes
    epic = json.loads(run_legion("issue", "show", "LEG-1", "--json", cwd=repo, env=env).stdout)
    assert epic["status"] == "Done" and epic["children"] == ["LEG-2", "LEG-3"], epic
    summary = epic["comments"][-1]
    assert summary["author"] == "legion" and summary["body"].startswith("## Epic done"), summary
    assert "- LEG-2 `Add greet_en()`: Done, PR #1 merged" in summary["body"]
    assert "- LEG-3 `Add greet_fr()`: Done, PR #2 merged" in summary["body"]
    second = json.loads(run_legion("issue", "show", "LEG-3", "--json", cwd=repo, env=env).stdout)
    assert second["blocked_by"] == ["LEG-2"] and second["parent"] == "LEG-1", second
    log = json.loads(run_legion("log", "-n", "300", "--json", cwd=repo, env=env).stdout)
    acted = [(e["id"], e["issue"], e["action"], e["detail"]) for e in log if e["outcome"] == "done"]
    # The epic had its architect and its close; no plan, no implement, no review of its own.
    assert {a[2] for a in acted if a[1] == "LEG-1"} <= {
        "dispatch_architect", "close_epic", "retire_worker", "issue_comment", "issue_label",
    }, acted  # fmt: skip
    [(first_done, *_)] = [a for a in acted if a[1:] == ("LEG-2", "issue_move", "to Done")]
    second_start = min(a[0] for a in acted if a[1] == "LEG-3" and a[2] == "dispatch_planner")
    assert second_start > first_done, acted


def test_demo_refuses_an_unknown_runtime(tmp_path: Path) -> None:
    result = run_legion("demo", "--runtime", "gpt", "--dir", str(tmp_path / "d"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "legion: error: unknown runtime 'gpt' (known: claude-code, codex, gemini, mixed)"
    )
    assert not (tmp_path / "d").exists()


def test_demo_real_needs_a_key(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    result = run_legion(
        "demo", "--real", "--dir", str(tmp_path / "d"), cwd=tmp_path,
        env={**env, "LEGION_CLAUDE_BIN": str(find_claude())},
    )  # fmt: skip
    assert result.returncode != 0
    assert (
        result.stderr.strip()
        == "legion: error: --real needs ANTHROPIC_API_KEY set to your Anthropic API key"
    )


def test_demo_stops_at_once_when_workers_cannot_start(tmp_path: Path) -> None:
    """A Claude Code that cannot start: the demo says why in one line, within seconds."""
    broken = tmp_path / "claude"
    broken.write_text("#!/bin/sh\necho 'claude: this install is broken' >&2\nexit 3\n")
    broken.chmod(0o755)
    started = time.monotonic()
    result = run_legion(
        "demo", "--dir", str(tmp_path / "demo"), "--issues", "1", "--timeout", "120",
        cwd=tmp_path, env={"LEGION_CLAUDE_BIN": str(broken)}, timeout=150,
    )  # fmt: skip
    took = time.monotonic() - started
    assert result.returncode == 1, result.stdout + result.stderr
    assert took < 50, took
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("legion: error: the demo stopped: ")
    assert "this install is broken" in errors[0]
    # Only advice that works once the demo is over: its tmux server is gone, so no `peek`;
    # the worker's last screen is saved instead.
    assert "legion peek" not in result.stdout + result.stderr
    assert "legion start" not in errors[0] and "run the demo again" in errors[0]
    screen = tmp_path / "demo" / "screens" / "LEG-1.txt"
    assert f"last screen: {screen}" in errors[0]
    assert "this install is broken" in screen.read_text()


def test_demo_refuses_bad_options_and_leaves_nothing_behind(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    temp = tmp_path / "tmp"
    temp.mkdir()
    for args, fragment in (
        (["--dir", str(a_file)], "is not a folder"),
        (["--timeout", "-1"], "--timeout must be"),
        (["--timeout", "0"], "--timeout must be"),
        (["--epic", "--issues", "2"], "--epic runs one epic of two issues: not with --issues"),
        (["--epic", "--hosts", "2"], "--epic runs on one host"),
    ):
        result = run_legion("demo", *args, cwd=tmp_path, env={"TMPDIR": str(temp)})
        assert result.returncode == 2, (args, result)
        errors = result.stderr.strip().splitlines()
        assert len(errors) == 1 and errors[0].startswith("legion: error: "), result.stderr
        assert fragment in errors[0], errors
    # A failed pre-check (no key for --real) makes no folder, given or temporary.
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    for args in (["--dir", str(tmp_path / "new" / "demo")], []):
        result = run_legion(
            "demo", "--real", *args, cwd=tmp_path,
            env={**env, "TMPDIR": str(temp), "LEGION_CLAUDE_BIN": str(find_claude())},
        )  # fmt: skip
        assert result.returncode == 1 and "ANTHROPIC_API_KEY" in result.stderr
    assert not (tmp_path / "new").exists() and list(temp.iterdir()) == []


@pytest.mark.parametrize(
    ("sig", "code", "name"), [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")]
)
def test_an_interrupted_demo_says_so_cleans_up_and_exits(
    tmp_path: Path, sig: int, code: int, name: str
) -> None:
    from tests.support.cli import LEGION_BIN

    demo = tmp_path / "demo"
    proc = subprocess.Popen(
        [str(LEGION_BIN), "demo", "--dir", str(demo), "--issues", "1"],
        cwd=tmp_path, env={**os.environ, "LEGION_CLAUDE_BIN": str(find_claude())},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if "plan worker started" in line:
                break
        proc.send_signal(sig)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    took = time.monotonic() - sent
    assert proc.returncode == code, (proc.returncode, err)
    assert took < 25, took  # not the 30 s a start's wait takes, however loaded
    assert f"the demo was interrupted ({name})" in err and "ran out of time" not in err + out
    assert "Traceback" not in err
    alive = subprocess.run(
        ["tmux", "-S", str(demo / "tmux.sock"), "list-sessions"], capture_output=True, check=False
    )
    assert alive.returncode != 0  # its tmux server is gone
    deadline = time.monotonic() + 30  # the sessions end with their tmux server, at once
    while True:
        leftovers = subprocess.run(
            ["pgrep", "-af", str(demo)], capture_output=True, text=True, check=False
        ).stdout.splitlines()
        if not leftovers or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert leftovers == [], leftovers


def test_demo_runs_on_gemini(tmp_path: Path) -> None:
    """Every session on the real Gemini CLI, confined, behind the daemon's model proxy: no
    session held the model key, and the proxy metered each phase as the chats count it."""
    env = {"LEGION_GEMINI_BIN": str(find_gemini())}
    demo = tmp_path / "demo"
    with session_environments(demo / "repo") as seen:
        result = run_legion(
            "demo", "--runtime", "gemini", "--dir", str(demo), "--issues", "1",
            cwd=tmp_path, env=env | SENTINELS, timeout=150,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    modes = assert_no_session_held_a_secret(seen)
    assert {"controller", "plan", "implement", "review", "retro", "finish"} <= modes, modes
    assert assert_no_file_holds_a_secret(demo) > 50
    assert "1 of 1 issue Done" in result.stdout and "(auto mode, gemini)." in result.stdout
    assert "(gemini_bin (LEGION_GEMINI_BIN))" in result.stdout
    # A chat per role (the controller's too), in each session's own home; the implementer's
    # one session was resumed for the changes and the retro.
    # (A resumed session may leave a chat file with no message: docs/gemini-cli.md.)
    found = demo.rglob("cli/gemini/sessions/*/tmp/*/chats/session-*.jsonl")
    chats = [chat for chat in found if '"type":"gemini"' in chat.read_text()]
    assert len(chats) == 5, chats
    implementer = [c for c in chats if "implement mode for LEG-1" in c.read_text()]
    assert len(implementer) == 1 and "retro mode for LEG-1" in implementer[0].read_text()
    env |= {"LEGION_STATE_HOME": str(demo / "state")}
    usage = json.loads(run_legion("usage", "--json", cwd=demo / "repo", env=env).stdout)
    metered: dict[str, int] = {}
    for row in usage:
        if row["issue"] == "LEG-1":
            assert row["runtime"] == "gemini", row
            metered[row["phase"]] = metered.get(row["phase"], 0) + row["total_tokens"]
    loaded = load_project(demo / "repo", env=dict(os.environ) | env)
    roster = open_workers(loaded, open_backends(loaded), dict(os.environ) | env).roster
    read = roster.transcript_usage("LEG-1")["LEG-1"]
    assert metered == {phase: read[phase].total for phase in read}, (metered, read)
