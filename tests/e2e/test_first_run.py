"""A first real run that never silently does nothing (issue 37), on the real Claude Code and Codex
CLIs: a session whose CLI cannot reach the model (a login that does not work, a key refused) is
recognised at once, stopped, marked failed with what its CLI said, and counted toward the
dispatch pause, which `legion status` shows with how to fix it; nothing sits at its login screen
looking busy until `stale_after`."""

from __future__ import annotations

import pytest

from legion.core.ids import controller_session_id
from tests.fakes.responses_server import FakeResponsesServer
from tests.support.swarm import Daemon, Swarm, agent_of, project_id
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]

NOT_LOGGED_IN = "Not logged in · Please run /login"
REFUSED = "unexpected status 401 Unauthorized"  # Codex's words for a key the server refused


def test_sessions_whose_cli_cannot_reach_the_model_are_failed_and_dispatch_paused(
    swarm: Swarm,
) -> None:
    # No key for the daemon to hold, and a login file the CLI cannot use (an expired or broken
    # login): `legion start` finds a login, the CLI finds none.
    swarm.env.pop("ANTHROPIC_API_KEY")
    (swarm.config_dir / ".credentials.json").write_text("{}")
    swarm.legion("issue", "create", "Feature", "--body", "Add it.")
    with Daemon(swarm):
        log = wait_until(
            "the controller and the planner failed",
            lambda: (
                (log := swarm.json("log", "-n", "100"))
                and {"controller_health", "worker_start"}
                <= {e["action"] for e in log if e["outcome"] == "failed"}
                and log
            ),
            timeout=100,
        )
        paused = swarm.json("status")["dispatch_paused"]
        status = swarm.legion("status").stdout
    # Each failed on what its CLI said, and that paused dispatch at once (a login does not
    # mend itself), with how to fix it: no other planner was started.
    starts = [e["detail"] for e in log if e["action"] == "worker_start"]
    assert starts == [f"leg-1-plan could not reach the model: {NOT_LOGGED_IN}"], starts
    health = [e["detail"] for e in log if e["action"] == "controller_health"]
    assert any(f"the controller could not reach the model: {NOT_LOGGED_IN}" in d for d in health)
    assert NOT_LOGGED_IN in paused["reason"], paused
    assert "your CLI's login: `legion doctor`" in paused["reason"], paused
    assert "dispatch paused" in status and NOT_LOGGED_IN in status, status
    # Stopped, and failed on the bus, not busy.
    controller = agent_of(swarm, controller_session_id(project_id(swarm)))
    assert controller["status"] == "failed"
    assert swarm.worker("LEG-1")["state"] == "dead"  # type: ignore[index]
    assert not swarm.server.requests_for_scenario("plan")  # nothing reached the model


def test_codex_sessions_whose_key_is_refused_are_failed_and_dispatch_paused(
    swarm: Swarm, codex_server: FakeResponsesServer
) -> None:
    """The same on Codex: the model's server refuses the key (401) at each session's first
    turn; Codex's turn loop keeps the session, whose rollout says why, and Legion reads it."""
    swarm.env["LEGION_RUNTIME"] = "codex"  # the controller and every worker
    codex_server.refuse_next(401, 100)
    swarm.legion("issue", "create", "Feature", "--body", "Add it.")
    with Daemon(swarm):
        log = wait_until(
            "the controller failed and dispatch paused",
            lambda: (
                (log := swarm.json("log", "-n", "100"))
                and any(
                    e["action"] == "controller_health" and e["outcome"] == "failed" for e in log
                )
                and any(e["action"] == "pause_dispatch" for e in log)
                and log
            ),
            timeout=100,
        )
        paused = swarm.json("status")["dispatch_paused"]
    health = [e["detail"] for e in log if e["action"] == "controller_health"]
    assert any(f"the controller could not reach the model: {REFUSED}" in d for d in health)
    assert REFUSED in paused["reason"] and "legion start" in paused["reason"], paused
    assert "scripted 401" not in paused["reason"]  # Codex's words, not the server's
    # A planner started meanwhile failed the same way; none reached a scripted turn.
    starts = [e["detail"] for e in log if e["action"] == "worker_start"]
    assert all(d == f"leg-1-plan could not reach the model: {REFUSED}" for d in starts), starts
    controller = agent_of(swarm, controller_session_id(project_id(swarm)))
    assert controller["status"] == "failed"
    assert all(r.kind == "refused" for r in codex_server.response_requests())
