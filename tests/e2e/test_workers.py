"""Workers for real: `legion dispatch | resume | answer | workers | peek` with the real Claude
Code CLI in a private tmux server, real git worktrees, and the scripted model server.

Legion itself must get the CLI past its first-run dialogs: the config written here has only
`hasCompletedOnboarding` (a user who has run `claude` once); the workspace trust, the API-key
approval and the bypass-permissions warning are Legion's to handle.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.fakes.model_server import ask_user_question, bash, text, tool_result_text
from tests.support.cli import LEGION_BIN, git
from tests.support.swarm import Swarm
from tests.support.waits import wait_until

# Every test starts its sessions by hand, under a daemon in manual mode (`host`).
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("host")]


def labels(swarm: Swarm, issue: str) -> list[str]:
    return list(swarm.json("issue", "show", issue)["labels"])


def test_dispatch_runs_a_worker_that_writes_and_signals_done(swarm: Swarm) -> None:
    swarm.legion("issue", "create", "Say hello", "--status", "In Progress")
    swarm.server.add_scenario(
        "implement mode for LEG-1",
        [
            [
                bash(
                    "echo hello > hello.txt && git add hello.txt && git commit -qm hello "
                    "&& legion issue label LEG-1 --add worker-done"
                )
            ],
            [text("Done: hello.txt written.")],
        ],
    )
    out = swarm.legion("dispatch", "LEG-1", "implement")
    assert "leg-1-implement" in out.stdout
    workspace = swarm.workspace_root / "leg-1"
    wait_until("worker-done", lambda: "worker-done" in labels(swarm, "LEG-1"))
    assert (workspace / "hello.txt").read_text() == "hello\n"
    assert "worker-active" in labels(swarm, "LEG-1")
    assert git(workspace, "branch", "--show-current").strip() == "legion/leg-1"
    worker = wait_until("idle", lambda: (w := swarm.worker("LEG-1")) and w["state"] == "idle" and w)
    assert worker["mode"] == "implement" and worker["window"] == "leg-1-implement"
    state = swarm.json("state")["issues"]["LEG-1"]
    assert state["has_live_worker"] is True
    project_id = swarm.json("config")["settings"]["project_id"]["value"]
    assert worker["session_id"] == str(uuid.uuid5(uuid.UUID(project_id), "LEG-1:implement"))
    assert Path(worker["transcript"]).name == f"{worker['session_id']}.jsonl"
    # one live worker per issue
    again = swarm.legion("dispatch", "LEG-1", "review", check=False)
    assert again.returncode != 0 and "already has a live worker" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    peek = swarm.legion("peek", "LEG-1").stdout
    assert "Done: hello.txt written." in peek
    # In the session's own home, Legion trusted the workspace; the key is the daemon's, and
    # nothing of it is there. Your own config folder is left alone.
    home = swarm.cli_home(worker["session_id"])
    global_config = json.loads((home / ".claude.json").read_text())
    assert global_config["projects"][str(workspace.resolve())]["hasTrustDialogAccepted"] is True
    assert swarm.env["ANTHROPIC_API_KEY"][-20:] not in json.dumps(global_config)
    assert Path(worker["transcript"]).is_relative_to(home)
    assert not list(swarm.config_dir.glob("projects/*/*.jsonl"))
    assert not (swarm.config_dir / "settings.json").exists()
    # The CLI found Legion's skill in that home (`$CLAUDE_CONFIG_DIR/skills`), not the stand-in
    # in yours, and gave the model its body.
    sent = json.dumps([request.body for request in swarm.server.message_requests()])
    assert "You are an autonomous worker in a Legion swarm." in sent
    assert "test stand-in" not in sent


def test_resume_appends_to_the_same_session_live_and_after_the_window_died(swarm: Swarm) -> None:
    swarm.legion("issue", "create", "Resumable")
    swarm.server.add_scenario("plan mode for LEG-1", [[text("Planned.")]])
    swarm.server.add_scenario("add a test too", [[bash("echo t > test.txt")], [text("Added.")]])
    swarm.server.add_scenario("one more thing", [[bash("echo m > more.txt")], [text("More.")]])
    swarm.legion("dispatch", "LEG-1", "plan")
    wait_until("idle", lambda: (w := swarm.worker("LEG-1")) and w["state"] == "idle")
    transcript = Path(swarm.worker("LEG-1")["transcript"])  # type: ignore[index]
    first = swarm.transcript_lines("LEG-1")

    # Live: the prompt is typed into the running session, archived or not (it comes back).
    swarm.legion("archive", "legion/leg-1/plan")
    agents = swarm.json("agents", "--all")
    assert [a["status"] for a in agents if a["address"].endswith("leg-1/plan")] == ["archived"]
    swarm.legion("resume", "LEG-1", "plan", "--prompt", "please add a test too")
    agents = swarm.json("agents")
    assert [a["status"] for a in agents if a["address"].endswith("leg-1/plan")] != []
    workspace = swarm.workspace_root / "leg-1"
    wait_until("test.txt", (workspace / "test.txt").exists)
    wait_until("idle again", lambda: swarm.worker("LEG-1")["state"] == "idle")  # type: ignore[index]
    second = swarm.transcript_lines("LEG-1")
    assert second[: len(first)] == first and len(second) > len(first)

    # Killed from outside: shown as dead, then resumed with --resume in a new window.
    swarm.tmux("kill-window", "-t", "leg-1-plan")
    wait_until("dead", lambda: swarm.worker("LEG-1")["state"] == "dead")  # type: ignore[index]
    assert swarm.json("state")["issues"]["LEG-1"]["has_live_worker"] is False
    swarm.legion("resume", "LEG-1", "plan", "--prompt", "one more thing")
    wait_until("more.txt", (workspace / "more.txt").exists)
    third = transcript.read_text().splitlines()
    assert third[: len(second)] == second and len(third) > len(second)
    assert sorted(p.name for p in transcript.parent.glob("*.jsonl")) == [transcript.name]


def test_blocked_worker_is_reported_and_answered(swarm: Swarm) -> None:
    swarm.legion("issue", "create", "Pick a fruit")
    swarm.legion("issue", "create", "Name a colour")
    swarm.server.add_scenario(
        "plan mode for LEG-1",
        [[ask_user_question("Which fruit?", ["Apple", "Banana"])], [text("Banana it is.")]],
        name="fruit",
    )
    swarm.server.add_scenario(
        "plan mode for LEG-2",
        [[ask_user_question("Which colour?", ["Red", "Blue"])], [text("Noted.")]],
        name="colour",
    )
    swarm.legion("dispatch", "LEG-1", "plan")
    swarm.legion("dispatch", "LEG-2", "plan")
    blocked = wait_until(
        "blocked", lambda: (w := swarm.worker("LEG-1")) and w["state"] == "blocked" and w
    )
    assert blocked["question"]["text"] == "Which fruit?"
    assert blocked["question"]["items"][0]["options"] == ["Apple", "Banana"]
    assert "Which fruit?" in swarm.legion("workers").stdout
    refused = swarm.legion("resume", "LEG-1", "plan", "--prompt", "hi", check=False)
    assert refused.returncode != 0 and "legion answer" in refused.stderr

    swarm.legion("answer", "LEG-1", "banana")  # an option, by label in any case
    request = swarm.server.wait_for_turn("fruit", 1)
    assert any("Banana" in tool_result_text(block) for block in request.tool_results())
    wait_until("LEG-1 idle", lambda: swarm.worker("LEG-1")["state"] == "idle")  # type: ignore[index]

    wait_until("LEG-2 blocked", lambda: swarm.worker("LEG-2")["state"] == "blocked")  # type: ignore[index]
    swarm.legion("answer", "LEG-2", "Teal, 2 shades lighter")  # free text
    request = swarm.server.wait_for_turn("colour", 1)
    assert any("Teal, 2 shades lighter" in tool_result_text(b) for b in request.tool_results())
    nothing = swarm.legion("answer", "LEG-2", "again", check=False)
    assert nothing.returncode != 0 and "no worker waiting for an answer" in nothing.stderr


def test_two_workspaces_stay_isolated(swarm: Swarm) -> None:
    for title in ("One", "Two"):
        swarm.legion("issue", "create", title, "--status", "In Progress")
    for n in (1, 2):
        swarm.server.add_scenario(
            f"implement mode for LEG-{n}",
            [
                [bash(f"echo {n} > only-{n}.txt && git add . && git commit -qm work-{n}")],
                [text("ok")],
            ],
        )
    swarm.legion("dispatch", "LEG-1", "implement")
    swarm.legion("dispatch", "LEG-2", "implement")
    one, two = swarm.workspace_root / "leg-1", swarm.workspace_root / "leg-2"
    wait_until(
        "both files", lambda: (one / "only-1.txt").exists() and (two / "only-2.txt").exists()
    )
    assert not (one / "only-2.txt").exists() and not (two / "only-1.txt").exists()
    wait_until("both commits", lambda: "work-2" in git(two, "log", "--oneline", "-1"))
    wait_until("commit 1", lambda: "work-1" in git(one, "log", "--oneline", "-1"))
    assert "only-2.txt" not in git(one, "ls-tree", "-r", "--name-only", "legion/leg-1")
    assert {w["issue"] for w in swarm.json("workers")} == {"LEG-1", "LEG-2"}


def test_bad_input_starts_nothing(swarm: Swarm, tmp_path: Path) -> None:
    swarm.legion("issue", "create", "$(touch /tmp/legion-pwned) 'quoted' \"dq\" ünï")
    cases = [
        (["dispatch", "LEG-9", "plan"], "no issue LEG-9"),
        (["dispatch", "LEG-1", "dance"], "unknown worker mode 'dance'"),
        (["answer", "LEG-1", "x"], "no worker waiting"),
        (["peek", "LEG-1"], "has no worker window"),
        (["resume", "LEG-1", "plan"], "--prompt"),
    ]
    for args, fragment in cases:
        result = swarm.legion(*args, check=False)
        assert result.returncode != 0, args
        assert fragment in result.stderr, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
    missing = dict(swarm.env, LEGION_CLAUDE_BIN=str(tmp_path / "no-claude-here"))
    result = subprocess.run(
        [str(LEGION_BIN), "dispatch", "LEG-1", "plan"],
        cwd=swarm.repo, env=missing, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "claude_bin (LEGION_CLAUDE_BIN) is" in result.stderr
    assert "not an executable file" in result.stderr
    no_tmux_path = tmp_path / "bin"
    no_tmux_path.mkdir()
    (no_tmux_path / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    result = subprocess.run(
        [str(LEGION_BIN), "dispatch", "LEG-1", "plan"],
        cwd=swarm.repo, env=dict(swarm.env, PATH=str(no_tmux_path)),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode != 0 and "tmux is not installed" in result.stderr
    assert swarm.json("workers") == []
    assert "worker-active" not in labels(swarm, "LEG-1")
    assert not Path("/tmp/legion-pwned").exists()


def test_concurrent_dispatches_start_one_worker(swarm: Swarm) -> None:
    from concurrent.futures import ThreadPoolExecutor

    swarm.legion("issue", "create", "Race")
    swarm.server.add_scenario("plan mode for LEG-1", [[text("Planning.")]])
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(lambda _: swarm.legion("dispatch", "LEG-1", "plan", check=False), range(4))
        )
    assert sum(r.returncode == 0 for r in results) == 1, [r.stderr for r in results]
    assert all("already has a live worker" in r.stderr for r in results if r.returncode)
    windows = swarm.tmux("list-windows", "-a", "-F", "#{window_name}").split()
    assert windows.count("leg-1-plan") == 1
    assert len(swarm.json("workers")) == 1


def test_a_corrupt_transcript_does_not_break_observation(swarm: Swarm) -> None:
    swarm.legion("issue", "create", "Corrupt")
    swarm.server.add_scenario("plan mode for LEG-1", [[text("Planned.")]])
    swarm.legion("dispatch", "LEG-1", "plan")
    wait_until("idle", lambda: swarm.worker("LEG-1")["state"] == "idle")  # type: ignore[index]
    transcript = Path(swarm.worker("LEG-1")["transcript"])  # type: ignore[index]
    with transcript.open("ab") as handle:
        handle.write(b'\x00\xff garbage {not json\n[1,2]\n{"type": "assistant", "mess')
    worker = swarm.worker("LEG-1")
    assert worker is not None and worker["state"] == "idle"
    assert "LEG-1" in swarm.legion("workers").stdout


def test_two_reconcilers_at_once_dispatch_once(swarm: Swarm) -> None:
    from concurrent.futures import ThreadPoolExecutor

    swarm.legion("issue", "create", "Once")
    swarm.server.add_scenario("plan mode for LEG-1", [[text("Planning.")]])
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda _: swarm.legion("reconcile", "--json"), range(3)))
    dispatched = [
        o for r in results for o in json.loads(r.stdout)
        if o["action"] == "dispatch_planner" and o["outcome"] == "done"
    ]  # fmt: skip
    assert len(dispatched) == 1
    assert len(swarm.json("workers")) == 1


def test_a_worker_dispatched_from_inside_a_claude_session_is_its_own_session(swarm: Swarm) -> None:
    """The controller dispatches from its Bash tool, whose environment marks it as a Claude
    Code session's child; the worker must not inherit that."""
    swarm.legion("issue", "create", "Nested")
    swarm.server.add_scenario("plan mode for LEG-1", [[text("Planned.")]])
    inside = {
        "CLAUDECODE": "1",
        "CLAUDE_CODE_SESSION_ID": str(uuid.uuid4()),
        "CLAUDE_CODE_CHILD_SESSION": "1",
        "CLAUDE_CODE_ENTRYPOINT": "sdk-cli",
        "CLAUDE_PID": "1",
    }
    started = time.monotonic()
    result = subprocess.run(
        [str(LEGION_BIN), "dispatch", "LEG-1", "plan"],
        cwd=swarm.repo, env=dict(swarm.env, **inside), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 20  # it saw its worker's session begin
    worker = wait_until("idle", lambda: (w := swarm.worker("LEG-1")) and w["state"] == "idle" and w)
    assert Path(worker["transcript"]).exists()
