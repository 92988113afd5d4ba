"""With no daemon, whoever reads or posts watches (the real Claude Code CLI, real tmux, the
scripted model): `legion say` hands a message to an idle worker itself, once, and says when it
cannot (busy: at the turn's end; not running: at `legion start`); `legion agents` and `legion
kill` read the sessions, not a stale row; `legion stop --all` marks what it stopped; a worker
Legion retires after its mode is done is complete, never failed; an open TUI delivers and keeps
statuses true too.

A session starts only under a daemon, and reaches the model only through it: each worker here
is started under a daemon in manual mode, which is then stopped; where the model must answer a
message delivered meanwhile, a daemon is started again (the CLI retries until it is back)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from legion.bus import bus_path
from legion.bus.model import AgentStatus, Channel, DeliveryState, Event, EventKind
from legion.bus.stored import SqliteBus
from tests.fakes.model_server import RecordedRequest, bash, text
from tests.support.cli import LEGION_BIN
from tests.support.swarm import Daemon, Swarm, agent_of, runs_until, window_id
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]

LLM_MODE = {"LEGION_CONTROLLER_MODE": "llm"}  # no reconciler: nothing restarts what we stop
# A turn that lasts (Claude Code refuses a long `sleep`).
LONG_JOB = "python3 -c 'import time; time.sleep(45)'"


def _dispatch(swarm: Swarm, turns: list[list[Any]], *, idle: bool = True) -> dict[str, Any]:
    """LEG-1's planner, started under a daemon that is gone when this returns."""
    swarm.legion("issue", "create", "Talkative")
    swarm.server.add_scenario("plan mode for LEG-1", turns, name="plan")
    with _hosting(swarm):
        swarm.legion("dispatch", "LEG-1", "plan")
        if not idle:
            wait_until("the first turn", lambda: swarm.server.requests_for_scenario("plan"))
            found = swarm.worker("LEG-1")
            assert found is not None
            return found
        worker = wait_until(
            "idle", lambda: (w := swarm.worker("LEG-1")) and w["state"] == "idle" and w
        )
    assert isinstance(worker, dict)
    return worker


def _hosting(swarm: Swarm) -> Daemon:
    """A daemon that hosts the sessions and their model calls, and runs no reconcile pass."""
    return Daemon(swarm, mode="manual")


def _firsts(swarm: Swarm, scenario: str) -> list[RecordedRequest]:
    return [r for r in swarm.server.requests_for_scenario(scenario) if r.turn == 0]


def _bus(swarm: Swarm) -> SqliteBus:
    return SqliteBus(bus_path(swarm.env))


def _delivery(swarm: Swarm, message_id: str, agent_id: int) -> tuple[DeliveryState, int]:
    bus = _bus(swarm)
    try:
        (found,) = [d for d in bus.deliveries(message_id) if d.recipient_id == agent_id]
    finally:
        bus.close()
    return found.state, found.attempts


def _events_of(swarm: Swarm, agent_id: int) -> list[Event]:
    bus = _bus(swarm)
    try:
        return [e for e in bus.events() if e.agent_id == agent_id]
    finally:
        bus.close()


def _said_of(swarm: Swarm, agent: dict[str, Any]) -> str:
    """An agent's status now and every event of its, for a wait that timed out."""
    now = agent_of(swarm, agent["session_id"])["status"]
    events = _events_of(swarm, agent["id"])
    said = "; ".join(f"{e.created_at} {e.kind.value} {e.detail}" for e in events)
    return f"status {now}; {said}"


def _status_events(swarm: Swarm, agent_id: int) -> list[tuple[EventKind, str]]:
    return [(e.kind, e.detail) for e in _events_of(swarm, agent_id)]


def test_say_to_an_idle_worker_with_no_daemon_types_it_in_once(swarm: Swarm) -> None:
    worker = _dispatch(swarm, [[text("Planned.")]])
    agent = agent_of(swarm, worker["session_id"])
    swarm.server.add_scenario("PING-7", [[text("Pong.")]], name="message")
    assert swarm.json("status")["daemon"]["pid"] is None

    said = swarm.legion("say", "--json", f"@{agent['address']} PING-7")
    data = json.loads(said.stdout)
    assert data["delivery"] == {agent["address"]: "delivered"}, said.stderr
    message_id = data["message"]["id"]
    # Typed in and taken by the session before `say` returned.
    assert _delivery(swarm, message_id, agent["id"])[0] is DeliveryState.DELIVERED
    # Nothing typed twice: a daemon's ticks find it done. Its model call goes through once
    # the daemon is back.
    with _hosting(swarm) as daemon:
        wait_until("the message reached the model", lambda: _firsts(swarm, "message"))
        wait_until("idle again", lambda: agent_of(swarm, worker["session_id"])["status"] == "idle")
        daemon.ticks(3)  # a second delivery, if any, would come within a tick or two
    assert len(_firsts(swarm, "message")) == 1
    [request] = _firsts(swarm, "message")
    assert (request.prompt or "").startswith(f"Message {message_id} from @human on ")
    assert any("Planned." in json.dumps(m) for m in request.messages)  # the same session

    # In words: said, on the line after what was posted.
    swarm.server.add_scenario("PING-8", [[text("Pong again.")]], name="again")
    wait_until("idle again", lambda: swarm.worker("LEG-1")["state"] == "idle")  # type: ignore[index]
    lines = swarm.legion("say", f"@{agent['address']} PING-8").stdout.splitlines()
    assert lines[0].startswith("posted #") and lines[1:] == ["delivered to @legion/leg-1/plan"]
    with _hosting(swarm):
        wait_until("the second message reached the model", lambda: _firsts(swarm, "again"))


def test_say_says_when_a_message_waits_for_the_turns_end_or_for_legion_start(
    swarm: Swarm,
) -> None:
    # A turn that runs until `say` has come, however loaded the machine.
    release = swarm.workspace_root / "leg-1" / ".release-the-turn"  # where the worker can see
    worker = _dispatch(swarm, [[bash(runs_until(release))], [text("Planned.")]], idle=False)
    agent = agent_of(swarm, worker["session_id"])
    swarm.server.add_scenario("zebra-busy", [[text("Noted at the boundary.")]], name="message")

    busy = swarm.legion("say", f"@{agent['address']} zebra-busy")
    assert busy.stdout.splitlines()[1:] == [
        "@legion/leg-1/plan is busy: its session gets the message at the end of its turn"
    ], busy.stdout
    # Its own hooks hand it over at the turn boundary (the turn's model calls go through the
    # daemon, which only hosts here).
    with _hosting(swarm):
        release.touch()
        wait_until("the message reached the model", lambda: _firsts(swarm, "message"))
        wait_until("idle", lambda: swarm.worker("LEG-1")["state"] == "idle")  # type: ignore[index]
    assert (_firsts(swarm, "message")[0].prompt or "").startswith("Stop hook feedback:\nMessage ")
    swarm.tmux("kill-window", "-t", window_id(swarm, worker["window"]))
    dead = swarm.json("say", f"@{agent['address']} zebra-dead")
    assert dead["delivery"] == {agent["address"]: "waits_for_start"}
    words = swarm.legion("say", f"@{agent['address']} zebra-dead, again")
    assert words.stdout.splitlines()[1:] == [
        "@legion/leg-1/plan is not running: the message waits for `legion start`"
    ]
    assert _delivery(swarm, dead["message"]["id"], agent["id"]) == (DeliveryState.PENDING, 0)


def test_statuses_are_read_from_the_sessions_and_stop_all_marks_what_it_stopped(
    swarm: Swarm,
) -> None:
    worker = _dispatch(swarm, [[text("Planned.")]])
    agent = agent_of(swarm, worker["session_id"])
    # No daemon watches: `legion agents` looks at the session itself.
    assert agent["status"] == "idle"

    with Daemon(swarm, extra_env=LLM_MODE):
        controller = wait_until(
            "the orchestrator on the bus",
            lambda: [a for a in swarm.json("agents") if a["name"] == "legion"],
        )[0]
    swarm.server.add_scenario("long job", [[bash(LONG_JOB)], [text("Done.")]], name="long")
    swarm.tmux("send-keys", "-t", window_id(swarm, worker["window"]), "-l", "long job")
    swarm.tmux("send-keys", "-t", window_id(swarm, worker["window"]), "Enter")
    with _hosting(swarm):  # its model call, through the daemon
        wait_until("the long turn", lambda: swarm.server.requests_for_scenario("long"))
    # The CLI records the turn in its transcript on its own schedule, which under load can
    # come a moment after the request: busy once it is there (the job runs 45 s).
    wait_until(
        "busy", lambda: agent_of(swarm, worker["session_id"])["status"] == "busy", timeout=30
    )

    before = time.time()
    stopped = swarm.legion("stop", "--all")
    assert "Closed tmux session" in stopped.stdout, stopped.stderr
    for who in (agent, controller):
        status = agent_of(swarm, who["session_id"])["status"]
        events = _events_of(swarm, who["id"])
        began = datetime.fromtimestamp(before, UTC).isoformat()
        said = f"stop began at {began}; {stopped.stderr}; " + "; ".join(
            f"{e.created_at} {e.kind.value} {e.detail}" for e in events
        )
        assert status == "stopped", f"{who['address']}: {said}"
        stop_event = (EventKind.AGENT_STOPPED, "stopped by `legion stop --all`")
        assert stop_event in [(e.kind, e.detail) for e in events], said
    # It no longer runs, so it is not "busy (in the middle of a turn)": killed without -f.
    killed = swarm.json("kill", agent["address"])
    assert killed["status"] == "stopped"


def test_a_worker_retired_after_its_mode_is_done_is_complete_never_failed(
    swarm: Swarm, tmp_path: Path
) -> None:
    worker = _dispatch(swarm, [[text("Planned.")]])
    agent = agent_of(swarm, worker["session_id"])
    assert agent["status"] == "idle"
    # The worker is done (as a scripted worker says it: the labels), and the reconciler
    # retires it; killed after closing its window, before its record is retired: the moment an
    # observer saw "dead" and called a finished worker failed.
    swarm.legion("issue", "label", "LEG-1", "--remove", "worker-active")
    kill_log = tmp_path / "kills.log"
    armed = {"LEGION_TEST_KILL_AT": "worker_window_closed", "LEGION_TEST_KILL_LOG": str(kill_log)}
    swarm.legion("reconcile", env=armed, check=False)
    assert kill_log.read_text().startswith("worker_window_closed ")
    assert swarm.worker("LEG-1")["state"] == "dead"  # type: ignore[index]
    done = agent_of(swarm, worker["session_id"])
    assert done["status"] == "complete"
    events = _status_events(swarm, agent["id"])  # each with its detail: who said it, and why
    assert [kind for kind, _ in events] == [
        EventKind.AGENT_REGISTERED,
        EventKind.AGENT_COMPLETED,
    ], events


def _tui_screen(swarm: Swarm) -> str:
    return swarm.tmux("capture-pane", "-p", "-t", "=tui:")


def test_an_open_tui_with_no_daemon_delivers_to_an_idle_worker_and_shows_its_status(
    swarm: Swarm,
) -> None:
    worker = _dispatch(swarm, [[text("Planned.")]])
    agent = agent_of(swarm, worker["session_id"])
    swarm.server.add_scenario("zebra-tui", [[text("Noted, from the TUI.")]], name="message")
    variables = [arg for key, value in swarm.env.items() for arg in ("-e", f"{key}={value}")]
    swarm.tmux(
        "new-session", "-d", "-s", "tui", "-x", "120", "-y", "32", "-c", str(swarm.repo),
        *variables, str(LEGION_BIN), "tui",
    )  # fmt: skip
    wait_until("the TUI", lambda: "F2 Chat" in _tui_screen(swarm))
    # A message nobody delivered (posted on the bus, not by `legion say`): the TUI watches.
    bus = _bus(swarm)
    try:
        channel = Channel(agent["project"], "main")
        posted = bus.post(bus.human().id, channel, f"@{agent['address']} zebra-tui")
    finally:
        bus.close()
    wait_until(
        "delivered on the bus",
        lambda: _delivery(swarm, posted.message.id, agent["id"])[0] is DeliveryState.DELIVERED,
    )
    with _hosting(swarm):  # its model call, through the daemon
        wait_until("the message reached the model", lambda: _firsts(swarm, "message"))
        wait_until("its turn over", lambda: swarm.worker("LEG-1")["state"] == "idle")  # type: ignore[index]
    assert (_firsts(swarm, "message")[0].prompt or "").startswith(
        f"Message {posted.message.id} from @human"
    )
    # The worker's status, as the TUI keeps it on the bus, follows its session: busy, then idle.
    bus = _bus(swarm)
    try:
        wait_until(
            "idle again on the bus",
            lambda: bus.agent(agent["id"]).status is AgentStatus.IDLE,
        )
    finally:
        bus.close()
    swarm.tmux("kill-session", "-t", "=tui")
    assert len(_firsts(swarm, "message")) == 1


def test_kill_force_ends_a_busy_worker_and_the_tracker_says_what_runs_next(
    swarm: Swarm,
) -> None:
    """`legion kill -f` against a live session in the middle of a turn (its tool call runs
    until released, which never comes): refused without -f, ended with it, its process gone,
    the agent failed; and what starts again is the tracker's to say (issue 41)."""
    release = swarm.workspace_root / "leg-1" / ".never"
    worker = _dispatch(swarm, [[bash(runs_until(release))], [text("Planned.")]], idle=False)
    agent = agent_of(swarm, worker["session_id"])
    wait_until(
        "busy",
        lambda: agent_of(swarm, worker["session_id"])["status"] == "busy",
        timeout=30,
        explain=lambda: _said_of(swarm, agent),
    )
    refused = swarm.legion("kill", agent["address"], check=False)
    assert refused.returncode == 1 and "is busy" in refused.stderr, refused.stderr
    killed = swarm.json("kill", agent["address"], "-f")
    assert killed["status"] == "failed"
    # Its process is gone: the session's window shows it dead (no process runs it).
    wait_until("dead", lambda: swarm.worker("LEG-1")["state"] == "dead", timeout=30)  # type: ignore[index]
    assert agent_of(swarm, worker["session_id"])["status"] == "failed"
    # The tracker still says a worker is on it (`worker-active`): a pass starts it again
    # (row 22) in the same session. Moved out of the active statuses, nothing starts.
    state = swarm.json("state")["issues"]["LEG-1"]
    assert (state["row"], state["suggested_action"]) == (
        22,
        "remove_worker_active_and_redispatch",
    )
    swarm.legion("issue", "move", "LEG-1", "Icebox")
    assert swarm.json("state")["issues"]["LEG-1"]["suggested_action"] == "skip"
