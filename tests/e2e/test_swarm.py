"""The swarm runs itself: the daemon, the reconciler, real Claude Code workers and controller
(scripted model), real tmux and git, carrying issues from Todo to Done (on Codex where the
subject is not the agent CLI)."""

from __future__ import annotations

import json
import uuid

import pytest

from legion.demo.swarm_script import swarm_script
from tests.fakes.responses_server import FakeResponsesServer, tool_result_text
from tests.support.swarm import Daemon, Swarm, assert_full_cycle, issue_status, run_full_cycle
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def script(swarm: Swarm, issues: list[str], **options: object) -> None:
    swarm.server.script.scenarios.extend(swarm_script(issues, **options).scenarios)  # type: ignore[arg-type]


def test_full_cycle_todo_to_done(swarm: Swarm) -> None:
    script(swarm, ["LEG-1"])
    daemon, seen = run_full_cycle(swarm)
    assert_full_cycle(swarm, daemon, seen)
    # the implementer's one session was resumed for the changes and for the retro
    project_id = swarm.json("config")["settings"]["project_id"]["value"]
    implementer = str(uuid.uuid5(uuid.UUID(project_id), "LEG-1:implement"))
    transcripts = swarm.transcripts(implementer)
    assert len(transcripts) == 1
    prompts = [
        json.dumps(json.loads(line).get("message", {}))
        for line in transcripts[0].read_text().splitlines()
        if json.loads(line).get("type") == "user"
    ]
    assert any("requested changes" in p for p in prompts)
    assert any("retro mode for LEG-1" in p for p in prompts)


def test_no_issues_the_llm_controller_iteration_is_a_no_op(
    swarm: Swarm, codex_server: FakeResponsesServer
) -> None:
    """On Codex: the subject is what the LLM-mode controller is woken for, not the agent CLI."""
    swarm.env["LEGION_RUNTIME"] = "codex"
    codex_server.script.scenarios.extend(swarm_script([], mode="llm", flavor="codex").scenarios)
    with Daemon(swarm, extra_env={"LEGION_CONTROLLER_MODE": "llm"}):
        reconciled = wait_until(
            "the controller ran legion reconcile",
            lambda: [
                r for r in codex_server.requests_for_scenario("controller")
                if any("Nothing to do." in tool_result_text(b) for b in r.tool_results())
            ],
        )  # fmt: skip
        assert reconciled
        wait_until("controller idle", lambda: swarm.json("status")["controller"]["state"] == "idle")
    status = swarm.json("status")
    assert status["workers"] == []
    assert not any(e["action"].startswith("dispatch") for e in status["last_actions"])
    assert swarm.json("issue", "list") == []


def test_blocked_worker_is_escalated_and_the_answer_relayed(
    swarm: Swarm, codex_server: FakeResponsesServer
) -> None:
    """The planner asks (with Claude Code's AskUserQuestion), the controller's Oracle asks a
    human, the human's answer goes into the planner's one session, and the issue goes on to
    Done: the planner and the controller on Claude Code, the implementer, reviewer and
    finisher, which are not the subject, on Codex."""
    swarm.legion("issue", "create", "Greeter")
    script(swarm, ["LEG-1"], review_rounds=1, ask=("LEG-1",))
    swarm.env["LEGION_RUNTIMES"] = "implement=codex,review=codex,finish=codex"
    on_codex = swarm_script(["LEG-1"], review_rounds=1, flavor="codex")
    codex_server.script.scenarios.extend(on_codex.scenarios)
    with Daemon(swarm):
        wait_until(
            "escalated",
            lambda: "user-input-needed" in swarm.json("issue", "show", "LEG-1")["labels"],
        )
        comments = swarm.json("issue", "show", "LEG-1")["comments"]
        assert "Which greeting should the feature use?" in comments[-1]["body"]
        # The controller's Oracle found nothing that settles it, and asked a human.
        assert comments[-1]["author"] == "legion-controller"
        assert swarm.worker("LEG-1")["state"] == "blocked"  # type: ignore[index]
        swarm.legion("feedback", "LEG-1", "Hello")
        wait_until("LEG-1 Done", lambda: issue_status(swarm, "LEG-1") == "Done", timeout=180)
    issue = swarm.json("issue", "show", "LEG-1")
    assert not {"user-input-needed", "user-feedback-given"} & set(issue["labels"])
    # the answer went into the planner's one session
    project_id = swarm.json("config")["settings"]["project_id"]["value"]
    planner = str(uuid.uuid5(uuid.UUID(project_id), "LEG-1:plan"))
    (transcript,) = swarm.transcripts(planner)
    results = [
        json.loads(line)
        for line in transcript.read_text().splitlines()
        if '"tool_result"' in line and "Which greeting" in line
    ]
    assert results and '"Hello"' in json.dumps(results[-1]["toolUseResult"])
    for mode in ("implement", "review", "finish"):
        assert codex_server.requests_for_scenario(f"LEG-1:{mode}"), f"no {mode} on Codex"


def test_wip_limit_one_runs_one_code_worker_at_a_time(
    swarm: Swarm, codex_server: FakeResponsesServer
) -> None:
    """On Codex workers (a turn costs a third of Claude Code's: see bench/runtimes.py), since
    what runs is the reconciler's to decide, whatever the CLI."""
    import threading

    for title in ("One", "Two", "Three"):
        swarm.legion("issue", "create", title)
    swarm.env["LEGION_RUNTIME"] = "codex"
    codex_script = swarm_script(["LEG-1", "LEG-2", "LEG-3"], review_rounds=1, flavor="codex")
    codex_server.script.scenarios.extend(codex_script.scenarios)
    most = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal most
        while not stop.is_set():
            live = [
                w for w in swarm.json("workers")
                if w["state"] != "dead" and w["mode"] != "review"
            ]  # fmt: skip
            most = max(most, len(live))
            stop.wait(0.2)

    sampler = threading.Thread(target=sample)
    with Daemon(swarm, extra_env={"LEGION_WIP_LIMIT": "1"}):
        sampler.start()
        try:
            for issue in ("LEG-1", "LEG-2", "LEG-3"):
                wait_until(
                    f"{issue} Done", lambda i=issue: issue_status(swarm, i) == "Done", timeout=240
                )
        finally:
            stop.set()
            sampler.join()
    assert most == 1
    deferred = [e for e in swarm.json("log", "-n", "500") if e["outcome"] == "deferred"]
    assert any("WIP limit 1" in e["detail"] for e in deferred)


def test_killed_controller_is_restarted_in_its_session_and_workers_keep_running(
    swarm: Swarm,
) -> None:
    from tests.fakes.model_server import pause, text

    swarm.legion("issue", "create", "Slow", "--status", "In Progress")
    swarm.server.add_scenario(
        "<command-args>implement mode for LEG-1", [[pause(25), text("slow work done")]]
    )
    script(swarm, [])
    env = {"LEGION_RESTART_COOLDOWN": "2"}
    with Daemon(swarm, extra_env=env):
        wait_until("controller idle", lambda: swarm.json("status")["controller"]["state"] == "idle")
        worker = wait_until("worker running", lambda: swarm.worker("LEG-1"))
        before = swarm.tmux("list-windows", "-a", "-F", "#{window_name} #{pane_pid}")
        worker_pid = next(
            line.split()[1] for line in before.splitlines() if line.startswith("leg-1-")
        )
        project_id = swarm.json("config")["settings"]["project_id"]["value"]
        controller = str(uuid.uuid5(uuid.UUID(project_id), "controller"))
        (transcript,) = swarm.transcripts(controller)
        lines_before = len(transcript.read_text().splitlines())
        swarm.tmux("kill-window", "-t", f"legion-{project_id.replace('-', '')[:8]}:main")
        wait_until(
            "controller back",
            lambda: (
                swarm.json("status")["controller"]["state"] in ("running", "idle")
                and len(transcript.read_text().splitlines()) > lines_before
            ),
        )
        after = swarm.tmux("list-windows", "-a", "-F", "#{window_name} #{pane_pid}")
        assert f"{worker['window']} {worker_pid}" in after  # the same worker process
        assert swarm.transcripts(controller) == [transcript]
    restarts = [e for e in swarm.json("log", "-n", "100") if e["action"] == "restart_controller"]
    assert len(restarts) >= 2  # the first start, and the restart


def test_start_in_the_background_refuses_a_second_and_stops(swarm: Swarm) -> None:
    script(swarm, [])
    started = swarm.legion("start", "--tick", "1")
    assert "Legion started" in started.stdout
    try:
        pid = swarm.json("status")["daemon"]["pid"]
        assert pid
        again = swarm.legion("start", check=False)
        assert again.returncode != 0 and f"already running for {swarm.repo}" in again.stderr
        wait_until(
            "heartbeat", lambda: swarm.json("status")["daemon"]["heartbeat_age_s"] is not None
        )
    finally:
        stopped = swarm.legion("stop", "--all")
    assert f"Legion stopped (pid {pid})" in stopped.stdout
    assert swarm.json("status")["daemon"]["pid"] is None
    assert "legion-" not in swarm.tmux("list-sessions")
