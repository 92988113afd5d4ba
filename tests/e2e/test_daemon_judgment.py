"""The judgment queue with the real daemon (`legion start --foreground`), the real Claude Code
CLI as the controller (scripted model), real tmux, git and SQLite.

Two wake-ups the controller used to miss: a review that finished without a pull request (the
daemon looked for action-log entries nothing wrote), and any judgment wake-up that came while
the controller was busy (marked handled before it was delivered, then dropped). And the queue
outlives the daemon.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from legion.demo.swarm_script import swarm_script
from tests.fakes.model_server import bash, text
from tests.support.swarm import Daemon, Swarm, controller_prompts, judgments, runs_until
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]
NO_PR = "the reviewer finished and no pull request was found"


def busy_controller_start(swarm: Swarm) -> Path:
    """The controller's start turn runs a tool until the returned file exists (it is mid-turn,
    busy, all that time, however loaded the machine). The controller is confined: the file is
    in the repository's git folder, which it sees."""
    release = swarm.repo / ".git" / "release-the-controller"
    swarm.server.add_scenario(
        r"<command-args>start \(",
        [[bash(runs_until(release))], [text("Started.")]],
        regex=True,
        name="start",
    )
    return release


def script(swarm: Swarm) -> None:
    swarm.server.script.scenarios.extend(swarm_script([]).scenarios)


def wakes_for(swarm: Swarm, key: str) -> list[str]:
    return [prompt for prompt in controller_prompts(swarm) if key in prompt]


def typings_missed(swarm: Swarm, key: str) -> list[str]:
    """The wake-ups for `key` the controller did not take when typed (the action log's)."""
    return [
        str(e["detail"])
        for e in swarm.json("log", "-n", "500")
        if e["action"] == "wake_controller" and e["outcome"] == "failed" and key in e["detail"]
    ]


def controller_state(swarm: Swarm) -> str:
    return str(swarm.json("status")["controller"]["state"])


def test_a_review_finished_without_a_pr_wakes_the_controller_once(swarm: Swarm) -> None:
    script(swarm)
    with Daemon(swarm) as daemon:
        wait_until("controller idle", lambda: controller_state(swarm) == "idle")
        swarm.legion(
            "issue", "create", "Lost PR", "--status", "Needs Review", "--label", "worker-done"
        )
        wait_until(
            "the controller woken for LEG-1:investigate_no_pr",
            lambda: wakes_for(swarm, "LEG-1:investigate_no_pr"),
        )
        (item,) = wait_until(
            "the item handled",
            lambda: [j for j in judgments(swarm) if j["state"] == "handled"],
        )
        assert (item["issue"], item["kind"]) == ("LEG-1", "investigate_no_pr")
        # The condition still holds (the scripted controller did nothing about it), and yet it
        # is not delivered again: one wake-up per occurrence.
        daemon.ticks(3)
        assert len(wakes_for(swarm, "LEG-1:investigate_no_pr")) == 1
        # Once someone has dealt with it (here: put on ice), the need is gone, the item closed.
        swarm.legion("issue", "move", "LEG-1", "Icebox")
        wait_until("the item closed", lambda: judgments(swarm) == [])
    log = swarm.json("log", "-n", "500")
    assert [(e["action"], e["detail"]) for e in log if "judgment" in e["action"]] == [
        (
            "queue_judgment",
            "investigate_no_pr: the reviewer finished and no pull request was found",
        ),
        ("close_judgment", "investigate_no_pr: resolved"),
    ]


def test_a_wake_for_a_busy_controller_is_delivered_when_it_is_idle(swarm: Swarm) -> None:
    release = busy_controller_start(swarm)
    script(swarm)
    with Daemon(swarm):
        wait_until("controller busy", lambda: controller_state(swarm) == "running")
        swarm.legion("issue", "create", "Route me", "--status", "Triage")
        (item,) = wait_until("LEG-1 queued", lambda: judgments(swarm))
        assert (item["issue"], item["kind"]) == ("LEG-1", "triage")
        # Queued while the controller is busy: it waits, undelivered, until its turn ends.
        assert item["state"] == "pending" and item["attempts"] == 0
        release.touch()
        wait_until(
            "the controller woken for LEG-1:triage",
            lambda: wakes_for(swarm, "LEG-1:triage"),
            timeout=60,
        )
        start, *_ = controller_prompts(swarm)
        assert "start (not running)" in start and "LEG-1" not in start  # queued after the start
        assert len(wakes_for(swarm, "LEG-1:triage")) == 1
        swarm.legion("issue", "move", "LEG-1", "Todo")  # routed: the need is gone
        wait_until("the item closed", lambda: judgments(swarm) == [])
    log = swarm.json("log", "-n", "500")
    closed = [e for e in log if e["action"] == "close_judgment"]
    assert [(e["issue"], e["detail"]) for e in closed] == [("LEG-1", "triage: resolved")]


def test_the_queue_outlives_a_killed_daemon(swarm: Swarm) -> None:
    release = busy_controller_start(swarm)
    script(swarm)
    first = Daemon(swarm).start()
    try:
        wait_until("controller busy", lambda: controller_state(swarm) == "running")
        swarm.legion("issue", "create", "Route me", "--status", "Triage")
        wait_until("LEG-1 queued", lambda: judgments(swarm))
        first.kill()  # SIGKILL: no chance to clean up
    finally:
        first.stop()
    assert wakes_for(swarm, "LEG-1:triage") == []
    status = swarm.legion("status").stdout
    assert "judgment queue:" in status and "LEG-1" in status and "triage" in status
    release.touch()  # the controller's turn ends
    with Daemon(swarm):
        wait_until(
            "the new daemon delivers LEG-1:triage",
            lambda: wakes_for(swarm, "LEG-1:triage"),
            timeout=60,
        )
        # The attempt is counted once the wake-up was typed and taken (a moment after the
        # model saw it): counted, and once. A loaded machine may have the CLI miss a typing
        # first (still ending its turn): that one counts too, and says so in the log.
        (item,) = wait_until(
            "the attempt counted",
            lambda: (found := judgments(swarm)) and found[0]["delivered_at"] and found,
        )
        assert item["attempts"] == 1 + len(typings_missed(swarm, "LEG-1:triage"))
        assert len(wakes_for(swarm, "LEG-1:triage")) == 1
    # The second daemon adopted the controller the first one started: one start in all.
    assert sum("<command-args>start (" in prompt for prompt in controller_prompts(swarm)) == 1
