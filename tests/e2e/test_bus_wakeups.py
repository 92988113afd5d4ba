"""Wake-ups on the bus with the real Claude Code CLI, real tmux, real daemons and the scripted
model: a busy agent gets a message at its turn boundary with its running tool untouched, a
question blocks the asker until the answer continues the same session, a dead agent is resumed
for a message and gets it once, a daemon killed after typing a message never types it again,
a replaced session's completion is ignored, and `/compact` in a Legion session brings back its
plan, tasks and skill."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from legion.bus import bus_path
from legion.bus.model import AgentStatus, DeliveryState
from legion.bus.stored import SqliteBus
from tests.fakes.model_server import RecordedRequest, bash, text
from tests.support.claude_env import IDLE_FOOTER
from tests.support.swarm import (
    Daemon,
    Swarm,
    agent_of,
    runs_until,
    screen,
    session_uuid,
    window_id,
)
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]

# No reconciler: these tests are about the bus, and a reconciler would recover the workers
# they stop on purpose.
LLM_MODE = {"LEGION_CONTROLLER_MODE": "llm"}
COMPACTION_PROMPT = "Your task is to create a detailed summary of the conversation"


def _bus(swarm: Swarm) -> SqliteBus:
    return SqliteBus(bus_path(swarm.env))


def _dispatch(swarm: Swarm, turns: list[list[Any]], *, idle: bool = True) -> dict[str, Any]:
    swarm.legion("issue", "create", "Talkative")
    swarm.server.add_scenario("plan mode for LEG-1", turns, name="plan")
    swarm.legion("dispatch", "LEG-1", "plan")
    if not idle:
        found = swarm.worker("LEG-1")
        assert found is not None
        return found
    worker = wait_until("idle", lambda: (w := swarm.worker("LEG-1")) and w["state"] == "idle" and w)
    assert isinstance(worker, dict)
    return worker


def _type(swarm: Swarm, window: str, line: str) -> None:
    wait_until("the prompt", lambda: IDLE_FOOTER in screen(swarm, window))
    swarm.tmux("send-keys", "-t", window, "-l", line)
    wait_until("the text typed", lambda: line in screen(swarm, window))
    swarm.tmux("send-keys", "-t", window, "Enter")


def _firsts(swarm: Swarm, scenario: str) -> list[RecordedRequest]:
    return [r for r in swarm.server.requests_for_scenario(scenario) if r.turn == 0]


def _typed(transcript: Path, needle: str) -> int:
    """How many prompts in a Claude Code transcript hold `needle`."""
    count = 0
    for line in transcript.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry.get("type") != "user":
            continue
        content = entry["message"]["content"]
        texts = [content] if isinstance(content, str) else [b.get("text", "") for b in content]
        count += any(needle in text for text in texts)
    return count


def _delivery(swarm: Swarm, message_id: str, agent_id: int) -> tuple[DeliveryState, int]:
    bus = _bus(swarm)
    try:
        (found,) = [d for d in bus.deliveries(message_id) if d.recipient_id == agent_id]
    finally:
        bus.close()
    return found.state, found.attempts


def _say(swarm: Swarm, to: str, body: str) -> str:
    said = swarm.json("say", f"@{to} {body}")
    return str(said["message"]["id"])


def test_a_busy_agent_gets_a_message_at_its_turn_boundary_and_its_tool_runs_to_the_end(
    swarm: Swarm,
) -> None:
    # The tool runs until the test lets it end: the message comes while it runs, however slow
    # the machine.
    release = swarm.workspace_root / "leg-1" / ".release-the-tool"  # where the worker can see
    tool = f"{runs_until(release)}; echo slept-well"
    with Daemon(swarm, mode="manual") as daemon:
        worker = _dispatch(swarm, [[bash(tool)], [text("Planned.")]], idle=False)
        swarm.server.add_scenario("zebra-busy", [[text("Noted at the boundary.")]], name="message")
        wait_until("the tool call", lambda: swarm.server.requests_for_scenario("plan"))
        agent = agent_of(swarm, worker["session_id"])
        message_id = _say(swarm, agent["address"], "zebra-busy: also cover the empty case")
        daemon.passes(1)  # the daemon sees the message while the agent is busy
        release.touch()
        wait_until("the message reached the model", lambda: _firsts(swarm, "message"))
        wait_until(
            "delivered on the bus",
            lambda: _delivery(swarm, message_id, agent["id"])[0] is DeliveryState.DELIVERED,
        )
        daemon.ticks(2)  # a second delivery, if any, would come within a tick or two
    [request] = _firsts(swarm, "message")
    assert (request.prompt or "").startswith("Stop hook feedback:\nMessage ")
    assert message_id in (request.prompt or "")
    # The tool ran to its end before the message came: its whole output is in the history.
    results = [
        block
        for m in request.messages
        if isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert any("slept-well" in json.dumps(block) for block in results)
    assert not any(r.prompt and "zebra-busy" in r.prompt for r in _firsts(swarm, "plan"))


def test_ask_blocks_the_asker_and_the_answer_continues_its_session(swarm: Swarm) -> None:
    swarm.server.add_scenario("JSON, please", [[text("Continuing with JSON.")]], name="answer")
    with Daemon(swarm, extra_env=LLM_MODE):
        controller = session_uuid(swarm, "controller")
        wait_until("the orchestrator on the bus", lambda: _has_session(swarm, controller))
        worker = _dispatch(
            swarm,
            [[bash('legion ask "Which format, JSON or YAML?"')], [text("Asked; waiting.")]],
        )
        agent = agent_of(swarm, worker["session_id"])
        assert agent["status"] == "blocked"
        channel = f"{agent['project']}/{agent['branch']}"
        (question,) = [
            m for m in swarm.json("messages", "--channel", channel) if m["kind"] == "ask"
        ]
        assert question["mentions"] == [f"{agent['project']}/main/legion"]
        # The question woke the orchestrator: its session was given it as a prompt.
        wait_until(
            "the question reached the orchestrator",
            lambda: [
                r
                for r in swarm.server.message_requests()
                if r.turn == 0 and f"Question {question['id']} from" in (r.prompt or "")
            ],
        )
        as_orchestrator = {"LEGION_SESSION_ID": controller, "LEGION_MODE": "controller"}
        replied = json.loads(
            swarm.legion(
                "reply", question["id"], "JSON, please", "--json", env=as_orchestrator
            ).stdout
        )
        assert replied["message"]["kind"] == "answer"
        assert replied["wakes"] == [agent["address"]]
        wait_until("the answer reached the model", lambda: _firsts(swarm, "answer"))
        wait_until(
            "the asker no longer blocked",
            lambda: agent_of(swarm, worker["session_id"])["status"] in ("busy", "idle"),
        )
    [request] = _firsts(swarm, "answer")
    assert (request.prompt or "").startswith(f"Answer {replied['message']['id']} from @main/legion")
    # The same session: the question's turn is in the history the answer continues.
    assert any("Asked; waiting." in json.dumps(m) for m in request.messages)
    after = swarm.worker("LEG-1")
    assert after is not None and after["session_id"] == worker["session_id"]


def _has_session(swarm: Swarm, session_id: str) -> bool:
    return any(a["session_id"] == session_id for a in swarm.json("agents", "--all"))


def test_a_dead_agent_is_resumed_for_a_message_once_and_a_stale_completion_is_ignored(
    swarm: Swarm,
) -> None:
    with Daemon(swarm, mode="manual"):  # it hosts the session's start
        worker = _dispatch(swarm, [[text("Planned.")]])
    agent = agent_of(swarm, worker["session_id"])
    swarm.tmux("kill-window", "-t", window_id(swarm, worker["window"]))
    wait_until("the worker dead", lambda: swarm.json("workers")[-1]["state"] == "dead")
    swarm.server.add_scenario("zebra-dead", [[text("Back, and noted.")]], name="message")
    with Daemon(swarm, extra_env=LLM_MODE) as daemon:
        message_id = _say(swarm, agent["address"], "zebra-dead: one more thing")
        wait_until("the message reached the model", lambda: _firsts(swarm, "message"))
        wait_until(
            "delivered on the bus",
            lambda: _delivery(swarm, message_id, agent["id"])[0] is DeliveryState.DELIVERED,
        )
        daemon.ticks(2)  # a second delivery, if any, would come within a tick or two
    [request] = _firsts(swarm, "message")
    assert message_id in (request.prompt or "")
    assert any("Planned." in json.dumps(m) for m in request.messages)  # the same session
    resumed = agent_of(swarm, worker["session_id"])
    assert resumed["spawn_instance"] == agent["spawn_instance"] + 1

    # The first spawn's late "done" must not act on the session that replaced it.
    stale = {
        "LEGION_SESSION_ID": worker["session_id"],
        "LEGION_MODE": "plan",
        "LEGION_ISSUE_ID": "LEG-1",
        "LEGION_SPAWN_INSTANCE": str(agent["spawn_instance"]),
    }
    labels = swarm.json("issue", "show", "LEG-1")["labels"]
    proc = swarm.legion("complete", "planned", env=stale, check=False)
    assert proc.returncode != 0 and "ignored" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert swarm.json("issue", "show", "LEG-1")["labels"] == labels
    assert agent_of(swarm, worker["session_id"])["status"] != "complete"


def test_a_daemon_killed_after_typing_a_message_never_types_it_again(
    swarm: Swarm, tmp_path: Path
) -> None:
    with Daemon(swarm, mode="manual"):  # it hosts the session's start
        worker = _dispatch(swarm, [[text("Planned.")]])
    agent = agent_of(swarm, worker["session_id"])
    swarm.server.add_scenario("zebra-once", [[text("Noted once.")]], name="message")
    kill_log = tmp_path / "kills.log"
    armed = dict(
        LLM_MODE, LEGION_TEST_KILL_AT="after_message_typed", LEGION_TEST_KILL_LOG=str(kill_log)
    )
    daemon = Daemon(swarm, extra_env=armed).start()
    try:
        message_id = _say(swarm, agent["address"], "zebra-once: please")
        assert daemon.proc is not None
        daemon.proc.wait(30)  # killed at the point, by itself
    finally:
        daemon.stop()
    assert kill_log.read_text().startswith("after_message_typed ")
    state, attempts = _delivery(swarm, message_id, agent["id"])
    # Typed, not yet marked. Or marked, not typed again, by `legion say` itself: it tells the
    # daemon first and then looks whether a daemon runs, and by then the daemon may have typed
    # and died; `say` then finds the message in the transcript (the mark counts an attempt).
    assert (state, attempts) in ((DeliveryState.PENDING, 1), (DeliveryState.DELIVERED, 2))
    with Daemon(swarm, extra_env=LLM_MODE) as daemon:
        # Its model call goes through once a daemon is back.
        wait_until("the message reached the model", lambda: _firsts(swarm, "message"))
        wait_until(
            "delivered on the bus",
            lambda: _delivery(swarm, message_id, agent["id"])[0] is DeliveryState.DELIVERED,
        )
        daemon.ticks(3)  # a second typing, if any, would come within a tick or two
    # Counted in the transcript: the model may see the prompt twice, as the CLI retries the
    # request the killed daemon's model proxy dropped.
    assert _typed(Path(worker["transcript"]), message_id) == 1


def test_compact_in_a_legion_session_brings_back_its_plan_tasks_and_skill(swarm: Swarm) -> None:
    with Daemon(swarm, mode="manual"):  # it hosts the session
        worker = _dispatch(swarm, [[text("Planned.")]])
        agent = agent_of(swarm, worker["session_id"])
        channel = f"{agent['project']}/{agent['branch']}"
        swarm.legion(
            "task", "add", "Write the parser", "--channel", channel, "--assign", agent["address"]
        )
        swarm.legion("task", "add", "Write the docs", "--channel", channel)
        plans = Path(worker["workspace"]) / "docs" / "plans"
        plans.mkdir(parents=True)
        (plans / "parser.md").write_text("# Parser plan\n1. Tokens\n2. Grammar\n", encoding="utf-8")
        swarm.server.add_scenario(
            COMPACTION_PROMPT,
            [[text("<analysis>a</analysis>\n<summary>Summary of the work.</summary>")]],
            name="summary",
        )
        swarm.server.add_scenario("next step", [[text("Next step done.")]], name="next")
        window = window_id(swarm, worker["window"])
        _type(swarm, window, "/compact")
        wait_until("compacted", lambda: swarm.server.requests_for_scenario("summary"), timeout=30)
        _type(swarm, window, "next step")
        wait_until(
            "the next prompt", lambda: swarm.server.requests_for_scenario("next"), timeout=30
        )

        [request] = swarm.server.requests_for_scenario("next")
        context = [
            block
            for m in request.messages
            for block in _texts(m)
            if "SessionStart hook additional context" in block
        ]
        assert len(context) == 1, [m["role"] for m in request.messages]
        shown = context[0]
        assert f"You are @{agent['address']}, the plan worker" in shown
        assert (
            "## Active Plan\ndocs/plans/parser.md:\n# Parser plan\n1. Tokens\n2. Grammar" in shown
        )
        assert "- [ ] Task 1: Write the parser (yours)  <-- current" in shown, shown
        assert "- [ ] Task 2: Write the docs (pending)" in shown
        assert "## Current Skill\nYou are using `legion-worker` in plan mode for LEG-1" in shown
        bus = _bus(swarm)
        try:
            kinds = [e.kind.value for e in bus.events() if e.agent_id == agent["id"]]
            assert "compaction_start" in kinds
            assert bus.agent(agent["id"]).status is not AgentStatus.FAILED
        finally:
            bus.close()


def _texts(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"]
