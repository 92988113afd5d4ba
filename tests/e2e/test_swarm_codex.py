"""The swarm on Codex: the same full cycle as tests/e2e/test_swarm.py, with every session on the
real Codex CLI (pinned, `legion.runtime.codex.binary`) and its scripted Responses-API server, and
mixed (a Codex implementer beside Claude Code's other roles). The same issue reaches Done with
the same decisions, and the implementer's one Codex session is resumed for the changes and the
retro."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from legion.demo.swarm_script import swarm_script
from legion.runtime.codex.runtime import codex_session_id, session_link
from tests.fakes.responses_server import FakeResponsesServer
from tests.support.swarm import Swarm, assert_full_cycle, run_full_cycle

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def _script(server: Any, flavor: str) -> None:
    server.script.scenarios.extend(swarm_script(["LEG-1"], flavor=flavor).scenarios)


def _session(swarm: Swarm, key: str) -> str:
    project_id = swarm.json("config")["settings"]["project_id"]["value"]
    return str(uuid.uuid5(uuid.UUID(project_id), key))


def _codex_prompts_by_session(server: FakeResponsesServer) -> dict[str, list[str]]:
    """Each Codex session's human prompts (first request of each turn), in order."""
    found: dict[str, list[str]] = {}
    for request in server.response_requests():
        if request.turn == 0 and request.prompt and request.session_id:
            found.setdefault(request.session_id, []).append(request.prompt)
    return found


def _assert_implementer_resumed_on_codex(swarm: Swarm, server: FakeResponsesServer) -> None:
    """One Codex session ran the implementer's three turns: implement, the changes, the retro;
    Legion's id of it links to that session's one rollout."""
    sid = _session(swarm, "LEG-1:implement")
    home = swarm.cli_home(sid)  # its own CODEX_HOME
    link = session_link({"CODEX_HOME": str(home)}, sid)
    codex_id = codex_session_id(link)
    assert codex_id is not None and link.resolve().name.endswith(f"{codex_id}.jsonl")
    prompts = _codex_prompts_by_session(server)[codex_id]
    assert "$legion-worker implement mode for LEG-1" in prompts[0]
    assert any("requested changes" in p for p in prompts)
    assert any("$legion-worker retro mode for LEG-1" in p for p in prompts)
    rollouts = list((home / "sessions").rglob(f"*{codex_id}.jsonl"))
    assert rollouts == [link.resolve()]


def test_full_cycle_with_every_session_on_codex(
    swarm: Swarm, codex_server: FakeResponsesServer
) -> None:
    swarm.env["LEGION_RUNTIME"] = "codex"  # the controller too
    _script(codex_server, "codex")

    daemon, seen = run_full_cycle(swarm)

    assert_full_cycle(swarm, daemon, seen)
    _assert_implementer_resumed_on_codex(swarm, codex_server)
    assert swarm.server.message_requests() == []  # no Claude Code session ran
    assert swarm.json("status")["controller"]["runtime"] == "codex"
    # each role had its own Codex session, the controller included
    sessions = _codex_prompts_by_session(codex_server)
    firsts = sorted(prompts[0].split(" mode for")[0] for prompts in sessions.values())
    assert firsts[0].startswith("$legion-controller"), firsts
    assert [f.removeprefix("$legion-worker ") for f in firsts[1:]] == [
        "finish",
        "implement",
        "plan",
        "review",
    ]
    # tokens come from Codex's rollouts, per phase
    usage = swarm.json("issue", "show", "LEG-1")["usage"]
    for phase in ("plan", "implement", "review", "retro", "finish"):
        assert usage["phases"][phase]["input"] > 0, usage
        assert usage["phases"][phase]["output"] > 0, usage


def test_full_cycle_mixed_codex_implementer_claude_reviewer(
    swarm: Swarm, codex_server: FakeResponsesServer
) -> None:
    swarm.env["LEGION_RUNTIMES"] = "implement=codex"
    _script(codex_server, "codex")
    _script(swarm.server, "claude-code")

    daemon, seen = run_full_cycle(swarm)

    assert_full_cycle(swarm, daemon, seen)
    _assert_implementer_resumed_on_codex(swarm, codex_server)
    assert _modes(codex_server.response_requests()) == {"implement", "changes", "retro"}
    assert _modes(swarm.server.message_requests()) == {"controller", "plan", "review", "finish"}
    # the bus, and `legion workers`, know which CLI each session runs on
    runtimes = {a["name"]: a["runtime"] for a in swarm.json("agents", "--all")}
    assert sorted(runtimes.values()).count("codex") == 1, runtimes


def _modes(requests: Any) -> set[str]:
    """The scenarios played (`LEG-1:review` → `review`)."""
    return {r.scenario.split(":")[-1] for r in requests if r.scenario}
