"""The bus meets the sessions, with the real Claude Code CLI and the scripted model: every session
Legion starts is an agent on the bus with Legion's hooks installed, and the daemon hands a message
to an idle agent as its next prompt, once."""

from __future__ import annotations

import json
import time

import pytest

from tests.fakes.model_server import text
from tests.support.processes import cmdline
from tests.support.swarm import Daemon, Swarm, actions, live_pid, plan_worker_idle
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]


def test_a_dispatched_worker_is_an_agent_with_legions_hooks(swarm: Swarm) -> None:
    with Daemon(swarm, mode="manual"):  # it hosts the session
        worker = plan_worker_idle(swarm)
        # Its status follows its session (the daemon looks each tick).
        agent = wait_until(
            "idle on the bus",
            lambda: [
                a
                for a in swarm.json("agents")
                if a["session_id"] == worker["session_id"] and a["status"] == "idle"
            ],
        )[0]
        assert agent["name"] == "plan" and agent["role"] == "plan"
        assert agent["branch"] == "legion/leg-1"
        # The CLI runs with one --settings holding Legion's hooks for this session's inbox.
        pid = live_pid(swarm, "leg-1-plan")
        assert pid is not None
        argv = cmdline(pid)
        assert argv.count("--settings") == 1
        settings = json.loads(argv[argv.index("--settings") + 1])
        assert settings["skipDangerousModePermissionPrompt"] is True
        stop_command = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
        assert f"{worker['session_id']}/inbox.json" in stop_command
        # What its turn cost, from the session's own transcript (the scripted model's usage).
        usage = swarm.json("issue", "show", "LEG-1")["usage"]
        assert list(usage["phases"]) == ["plan"] and usage["total"]["output"] > 0
        assert swarm.json("status")["usage"]["LEG-1"] == usage


def test_an_idle_worker_gets_a_message_as_its_next_prompt_once(swarm: Swarm) -> None:
    # A slow tick: `legion say` must wake the daemon.
    with Daemon(swarm, tick=30, mode="manual") as daemon:
        worker = plan_worker_idle(swarm)
        swarm.server.add_scenario("zebra-42", [[text("Noted, zebra.")]], name="message")
        (agent,) = [a for a in swarm.json("agents") if a["session_id"] == worker["session_id"]]
        daemon.wait_between_ticks()  # past the daemon's first tick
        said = time.monotonic()
        swarm.legion("say", f"@{agent['address']} please look at zebra-42\nand the second line")
        wait_until(
            "the message reached the model", lambda: swarm.server.requests_for_scenario("message")
        )
        took = time.monotonic() - said
        wait_until(
            "delivered on the bus",
            lambda: actions(swarm, "deliver_messages"),
        )
        wait_until("its turn over", lambda: (w := swarm.worker("LEG-1")) and w["state"] == "idle")
        daemon.passes(2)  # a second delivery, if any, would come within a pass or two
    firsts = [r for r in swarm.server.requests_for_scenario("message") if r.turn == 0]
    assert len(firsts) == 1, [r.prompt for r in firsts]
    prompt = firsts[0].prompt or ""
    [message] = [m for m in swarm.json("messages", "--channel", f"{agent['project']}/main")]
    assert prompt.startswith(f"Message {message['id']} from @human on {agent['project']}/main")
    assert f"`legion reply {message['id']} …`" in prompt
    # Each line of the body quoted: no line of it could pass for a header of Legion's.
    assert "please look at zebra-42\n> and the second line" in prompt
    assert took < 15, f"delivered {took:.1f} s after `legion say`: the daemon was not woken"
