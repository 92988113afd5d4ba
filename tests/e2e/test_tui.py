"""The TUI as a person uses it: `legion tui` in a terminal (tmux) beside a running daemon and a
real Claude Code worker on the scripted model. What is typed into its chat line reaches the
worker's model through the daemon, and what the worker says comes back on screen."""

from __future__ import annotations

import re

import pytest

from legion.bus.address import project_name_for_folder
from tests.fakes.model_server import bash, text
from tests.support.cli import LEGION_BIN
from tests.support.swarm import Daemon, Swarm
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]


def _screen(swarm: Swarm) -> str:
    return swarm.tmux("capture-pane", "-p", "-t", "=tui:")


def test_a_message_typed_in_the_tui_wakes_a_worker_whose_answer_shows_on_screen(
    swarm: Swarm,
) -> None:
    project = project_name_for_folder(swarm.repo.name)
    swarm.legion("issue", "create", "Talkative")
    swarm.server.add_scenario("plan mode for LEG-1", [[text("Planned.")]], name="plan")
    swarm.server.add_scenario(
        "zebra-tui",
        [[bash(f'legion say --channel {project}/main "zebra seen by plan"')], [text("Said.")]],
        name="message",
    )
    with Daemon(swarm, extra_env={"LEGION_CONTROLLER_MODE": "llm"}):
        swarm.legion("dispatch", "LEG-1", "plan")
        wait_until("idle", lambda: (w := swarm.worker("LEG-1")) and w["state"] == "idle")
        variables = [arg for key, value in swarm.env.items() for arg in ("-e", f"{key}={value}")]
        swarm.tmux(
            "new-session", "-d", "-s", "tui", "-x", "120", "-y", "32", "-c", str(swarm.repo),
            *variables, str(LEGION_BIN),
        )  # fmt: skip
        wait_until("the TUI", lambda: "F2 Chat" in _screen(swarm))
        wait_until("the worker in the sidebar", lambda: "@plan" in _screen(swarm))
        assert f"{project}/legion/leg-1" in _screen(swarm)

        line = f"@{project}/legion/leg-1/plan zebra-tui, say something"
        # To the chat line (focus starts in the sidebar), typing once it has the focus.
        swarm.tmux("send-keys", "-t", "=tui:", "F2")
        wait_until("the chat line focused", lambda: "Message (@ completes" in _screen(swarm))
        swarm.tmux("send-keys", "-t", "=tui:", "-l", line)
        swarm.tmux("send-keys", "-t", "=tui:", "Enter")
        wait_until(
            "the message reached the model", lambda: swarm.server.requests_for_scenario("message")
        )
        request = swarm.server.requests_for_scenario("message")[0]
        assert "zebra-tui, say something" in (request.prompt or "")
        assert re.search(r"from @human on \S+/main", request.prompt or "")
        shown = wait_until(
            "the worker's answer on screen",
            lambda: (screen := _screen(swarm)) and "zebra seen by plan" in screen and screen,
            timeout=30,
        )
        assert "@legion/leg-1/plan zebra seen by plan" in shown
        swarm.tmux("send-keys", "-t", "=tui:", "C-q")
        wait_until("the TUI closed", lambda: "tui" not in swarm.tmux("list-sessions"))
    # Closing the TUI stopped nothing: the worker is still there.
    worker = swarm.worker("LEG-1")
    assert worker is not None and worker["state"] in ("idle", "running")
