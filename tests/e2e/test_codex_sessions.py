"""A Codex worker's session, with the real Codex CLI, real tmux, a real daemon and the scripted
Responses-API server: a prompt typed into its window is its next turn (newlines kept); the
daemon types a bus message into the idle session, queues one for the busy session's turn
boundary, and resumes the dead session (the same Codex session) with one; after Codex compacts
the conversation, the next turn brings back the session's wake-up context."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from legion.bus import bus_path
from legion.bus.model import DeliveryState
from legion.bus.stored import SqliteBus
from legion.runtime.codex.runtime import codex_session_id, session_link
from tests.fakes.responses_server import (
    API_KEY_ENV,
    FakeResponsesServer,
    RecordedRequest,
    codex_config_toml,
    exec_command,
    pause,
    text,
)
from tests.support.cli import LEGION_BIN
from tests.support.swarm import Daemon, Swarm, agent_of, screen, window_id
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]

WAITING = "waiting for a message"
PLAN_ON_CODEX = {"LEGION_RUNTIMES": "plan=codex"}


@contextmanager
def hosted(swarm: Swarm) -> Iterator[Daemon]:
    """The daemon the test's sessions run under, in manual mode: no reconciler (it would
    recover the worker these tests stop on purpose), and a quick tick for deliveries."""
    swarm.env |= PLAN_ON_CODEX
    with Daemon(swarm, tick=0.5, mode="manual") as daemon:
        yield daemon


def _dispatch(swarm: Swarm, server: FakeResponsesServer, turns: list[list[Any]]) -> dict[str, Any]:
    swarm.legion("issue", "create", "Talkative")
    server.add_scenario("$legion-worker plan mode for LEG-1", turns, name="plan")
    swarm.legion("dispatch", "LEG-1", "plan")
    worker = wait_until("idle", lambda: (w := swarm.worker("LEG-1")) and w["state"] == "idle" and w)
    assert isinstance(worker, dict)
    return worker


def _type(swarm: Swarm, window: str, prompt: str) -> None:
    """As the daemon types: the text literally, then Enter."""
    wait_until("the idle line", lambda: WAITING in screen(swarm, window).split("\n> ")[-1])
    swarm.tmux("send-keys", "-t", window, "-l", prompt)
    swarm.tmux("send-keys", "-t", window, "Enter")


def _firsts(server: FakeResponsesServer, scenario: str) -> list[RecordedRequest]:
    return [r for r in server.requests_for_scenario(scenario) if r.turn == 0]


def _link(swarm: Swarm, sid: str) -> Path:
    """Legion's link to the session's rollout, in the session's own CODEX_HOME."""
    return session_link({"CODEX_HOME": str(swarm.cli_home(sid))}, sid)


def _codex_id(swarm: Swarm, worker: dict[str, Any]) -> str:
    found = codex_session_id(_link(swarm, worker["session_id"]))
    assert found is not None
    return found


def _delivered(swarm: Swarm, message_id: str, agent_id: int) -> bool:
    bus = SqliteBus(bus_path(swarm.env))
    try:
        (found,) = [d for d in bus.deliveries(message_id) if d.recipient_id == agent_id]
        return found.state is DeliveryState.DELIVERED
    finally:
        bus.close()


def test_a_typed_prompt_is_the_next_turn_of_the_same_codex_session(
    swarm: Swarm, codex_server: FakeResponsesServer
) -> None:
    with hosted(swarm):
        worker = _dispatch(
            swarm, codex_server, [[exec_command("env > env.txt")], [text("Planned.")]]
        )
        assert worker["runtime"] == "codex"
        # Codex found Legion's skill in the session's own home (`$CODEX_HOME/skills`) and
        # inlined its body for the `$legion-worker` mention.
        sent = json.dumps(_firsts(codex_server, "plan")[0].body)
        assert "<name>legion-worker</name>" in sent
        assert "You are an autonomous worker in a Legion swarm." in sent
        # the model's commands see Legion's variables, and no credential: not even the model key
        seen = (Path(worker["workspace"]) / "env.txt").read_text()
        assert f"LEGION_SESSION_ID={worker['session_id']}" in seen
        assert API_KEY_ENV in swarm.env and API_KEY_ENV not in seen
        codex_server.add_scenario("two lines", [[text("Both read.")]], name="typed")
        _type(swarm, window_id(swarm, worker["window"]), "two lines\nand the second")

        wait_until("the typed turn", lambda: _firsts(codex_server, "typed"), timeout=30)
        [request] = _firsts(codex_server, "typed")
        assert request.prompt == "two lines\nand the second"  # one prompt, its newline kept
        assert request.session_id == _codex_id(swarm, worker)
        wait_until("idle again", lambda: swarm.worker("LEG-1")["state"] == "idle")  # type: ignore[index]


def test_the_daemon_delivers_to_an_idle_a_busy_and_a_dead_codex_session(
    swarm: Swarm, codex_server: FakeResponsesServer
) -> None:
    with hosted(swarm):
        worker = _dispatch(swarm, codex_server, [[text("Planned.")]])
        agent = agent_of(swarm, worker["session_id"])
        codex_id = _codex_id(swarm, worker)
        # The last first: a resumed session's prompt starts with its context, which quotes the
        # channel's earlier messages, and the first scenario that matches plays.
        codex_server.add_scenario("dead hello", [[text("Back again.")]], name="dead")
        codex_server.add_scenario("busy hello", [[text("Got it after my turn.")]], name="busy")
        codex_server.add_scenario("idle hello", [[pause(4), text("Working on it.")]], name="idle")
        say = ["say", "--channel", f"{agent['project']}/{agent['branch']}"]

        # idle: typed in as the next prompt
        first = swarm.json(*say, f"@{agent['address']} idle hello")["message"]["id"]
        wait_until("typed", lambda: _firsts(codex_server, "idle"), timeout=30)
        wait_until("marked", lambda: _delivered(swarm, first, agent["id"]), timeout=30)
        # busy (the turn above pauses): queued, and handed over at the turn boundary
        second = swarm.json(*say, f"@{agent['address']} busy hello")["message"]["id"]
        wait_until("handed over", lambda: _firsts(codex_server, "busy"), timeout=30)
        wait_until("marked", lambda: _delivered(swarm, second, agent["id"]), timeout=30)
        [busy] = _firsts(codex_server, "busy")
        [idle] = _firsts(codex_server, "idle")
        assert busy.seq > idle.seq
        # dead: its window closed, the session is resumed with the message
        wait_until("idle", lambda: swarm.worker("LEG-1")["state"] == "idle")  # type: ignore[index]
        swarm.tmux("kill-window", "-t", window_id(swarm, worker["window"]))
        third = swarm.json(*say, f"@{agent['address']} dead hello")["message"]["id"]
        wait_until("resumed", lambda: _firsts(codex_server, "dead"), timeout=45)
        wait_until("marked", lambda: _delivered(swarm, third, agent["id"]), timeout=30)

        sessions = {r.session_id for r in codex_server.response_requests()}
        assert sessions == {codex_id}  # one Codex session throughout
        for request in (idle, busy):
            assert request.prompt is not None and request.prompt.count("hello") == 1
        [dead] = _firsts(codex_server, "dead")
        assert dead.prompt is not None and dead.prompt.endswith("dead hello")
        assert f"You are @{agent['address']}, the plan worker" in dead.prompt  # resumed: context


def test_after_codex_compacts_the_next_turn_brings_back_the_wake_up_context(
    swarm: Swarm, codex_server: FakeResponsesServer
) -> None:
    # Codex compacts before a turn when the last response used more tokens than the limit:
    # with a limit of 1, before every resumed turn (docs/codex-cli.md, "Compaction").
    home = Path(swarm.env["CODEX_HOME"])
    config = codex_config_toml(codex_server.base_url, extra="model_auto_compact_token_limit = 1")
    (home / "config.toml").write_text(config)
    with hosted(swarm):
        worker = _dispatch(swarm, codex_server, [[text("Planned.")]])
        agent = agent_of(swarm, worker["session_id"])
        plans = Path(worker["workspace"]) / "docs" / "plans"
        plans.mkdir(parents=True)
        (plans / "parser.md").write_text("# Parser plan\n1. Tokens\n", encoding="utf-8")
        codex_server.add_scenario("first note", [[text("Noted.")]], name="first")
        codex_server.add_scenario("second note", [[text("Noted again.")]], name="second")
        window = window_id(swarm, worker["window"])

        _type(swarm, window, "first note")
        wait_until("the first note", lambda: _firsts(codex_server, "first"), timeout=30)
        compactions = [r for r in codex_server.response_requests() if r.side_reason == "compaction"]
        assert compactions, [r.side_reason for r in codex_server.response_requests()]
        _type(swarm, window, "second note")
        wait_until("the second note", lambda: _firsts(codex_server, "second"), timeout=30)

        [request] = _firsts(codex_server, "second")
        prompt = request.prompt or ""
        assert prompt.endswith("second note")
        assert f"You are @{agent['address']}, the plan worker" in prompt
        assert "docs/plans/parser.md:\n# Parser plan\n1. Tokens" in prompt
        assert "You are using `legion-worker` in plan mode for LEG-1" in prompt
        [first] = _firsts(codex_server, "first")
        assert "You are @" not in (first.prompt or "")  # once, after the compaction
        rollout = _link(swarm, worker["session_id"]).read_text()
        assert '"type":"compacted"' in rollout
        bus = SqliteBus(bus_path(swarm.env))
        try:
            kinds = [e.kind.value for e in bus.events() if e.agent_id == agent["id"]]
        finally:
            bus.close()
        assert "compaction_start" in kinds


def test_a_codex_session_that_cannot_start_fails_its_dispatch_with_codexs_reason(
    swarm: Swarm, codex_server: FakeResponsesServer
) -> None:
    swarm.legion("issue", "create", "Doomed")
    unkeyed = {name: value for name, value in swarm.env.items() if name != API_KEY_ENV}
    # The provider's key missing where `legion start` runs: the swarm is refused, in one line.
    refused = subprocess.run(
        [str(LEGION_BIN), "start", "--mode", "manual"], cwd=swarm.repo,
        env=unkeyed | PLAN_ON_CODEX, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    assert "Codex sessions would reach no model" in refused.stderr
    assert f"set {API_KEY_ENV}" in refused.stderr
    # A daemon whose roles run on Claude Code starts without it; a Codex worker started by
    # hand then (its daemon holds no key for it: Codex reaches its provider itself) fails its
    # first request, and the dispatch says so with Codex's reason.
    swarm.env = unkeyed
    with Daemon(swarm, tick=0.5, mode="manual"):
        swarm.env = unkeyed | PLAN_ON_CODEX
        result = swarm.legion("dispatch", "LEG-1", "plan", check=False)
    assert result.returncode != 0
    [line] = result.stderr.strip().splitlines()
    assert "codex could not start the session" in line and API_KEY_ENV in line, line
    assert "Traceback" not in result.stderr
    assert codex_server.response_requests() == []
