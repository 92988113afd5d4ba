"""A Backlog nobody opted in costs nothing, and the architect counts against the WIP limit
(issue 19 item 3): `legion reconcile` with real tmux and the real Claude Code CLI (scripted
model) starts one architect for the one Backlog issue labelled `legion`, none for the others,
and that architect holds the only WIP slot."""

from __future__ import annotations

import json

import pytest

from tests.fakes.model_server import pause, text
from tests.support.swarm import Swarm
from tests.support.waits import wait_until

# Its reconcile passes, run by hand, start workers under a daemon in manual mode (`host`).
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("host")]


def windows(swarm: Swarm) -> list[str]:
    listed = swarm.tmux("list-windows", "-a", "-F", "#{window_name}")
    return [name for name in listed.split() if name.startswith("leg-")]


def test_one_architect_for_the_opted_in_issue_and_it_holds_the_wip_slot(swarm: Swarm) -> None:
    # The architect thinks for a while: it is live (and holds its slot) for the whole test.
    swarm.server.add_scenario(
        r"<command-args>architect mode for LEG-6\b",
        [[pause(60), text("Design posted.")]],
        regex=True,
        name="architect",
    )
    env = {"LEGION_WIP_LIMIT": "1"}
    for n in range(1, 6):
        swarm.legion("issue", "create", f"Someday {n}", "--status", "Backlog")
    swarm.legion("issue", "create", "Design it", "--status", "Backlog", "--label", "legion")
    outcomes = swarm.legion("reconcile", "--json", env=env).stdout
    acted = [(o["issue"], o["action"], o["outcome"]) for o in json.loads(outcomes)]
    assert [a for a in acted if a[0] != "-"] == [("LEG-6", "dispatch_architect", "done")], acted
    wait_until("the architect's window", lambda: windows(swarm) == ["leg-6-architect"])
    # A Todo issue now waits: the live architect holds the one slot.
    swarm.legion("issue", "create", "Fix the typo")
    again = json.loads(swarm.legion("reconcile", "--json", env=env).stdout)
    planner = [o for o in again if o["issue"] == "LEG-7"]
    assert [(o["action"], o["outcome"]) for o in planner] == [("dispatch_planner", "deferred")]
    assert "WIP limit 1 reached" in planner[0]["detail"]
    assert not [o for o in again if o["issue"] in {f"LEG-{n}" for n in range(1, 6)}], again
    assert windows(swarm) == ["leg-6-architect"]
