"""Legion's neutral session-hooks API (`legion.bus.session_hooks`), which Claude Code's hooks
and Codex's turn loop both call: the same inbox, the same handover, the same wake-up context,
whatever the CLI; a CLI's own limit (Claude Code's Stop-block cap) is a gate it passes in."""

from __future__ import annotations

from pathlib import Path

from legion.bus import inbox as inbox_file
from legion.bus import open_bus, session_hooks
from legion.bus.inbox import Inbox
from legion.bus.model import AgentRole, Channel, EventKind
from legion.bus.session_hooks import HookedSession


def _session(tmp_path: Path, session_id: str = "s-1") -> HookedSession:
    return HookedSession(
        session_id=session_id,
        inbox=tmp_path / "inbox.json",
        context=tmp_path / "context.md",
        env={"XDG_STATE_HOME": str(tmp_path / "state"), "LEGION_MODE": "implement"},
        workspace=tmp_path,
    )


def test_a_turn_end_hands_over_the_queued_messages_once(tmp_path: Path) -> None:
    session = _session(tmp_path)
    assert session_hooks.turn_ended(session, via="turn_end") is None  # no inbox: no file made
    assert not (tmp_path / "inbox.json").exists()

    inbox_file.enqueue(tmp_path / "inbox.json", "m-1", "first")
    inbox_file.enqueue(tmp_path / "inbox.json", "m-2", "second")
    assert session_hooks.turn_ended(session, via="turn_end", now=2.0) == "first\n\nsecond"
    assert session_hooks.turn_ended(session, via="turn_end") is None
    assert inbox_file.peek_delivered(tmp_path / "inbox.json") == [
        {"id": "m-1", "via": "turn_end", "at": 2.0, "session_id": "s-1"},
        {"id": "m-2", "via": "turn_end", "at": 2.0, "session_id": "s-1"},
    ]


def test_a_gate_holds_the_messages_and_keeps_what_it_counted(tmp_path: Path) -> None:
    session = _session(tmp_path)
    inbox_file.enqueue(tmp_path / "inbox.json", "m-1", "first")

    def hold(current: Inbox) -> tuple[bool, Inbox | None]:
        return False, Inbox(current.messages, current.delivered, "p-1", 8, current.extra)

    assert session_hooks.turn_ended(session, via="Stop", gate=hold) is None
    kept = inbox_file.parse_inbox((tmp_path / "inbox.json").read_text(encoding="utf-8"))
    assert [m.id for m in kept.messages] == ["m-1"] and kept.stop_streak == 8
    assert session_hooks.prompt_submitted(session, via="UserPromptSubmit") == "first"


def test_compacting_records_the_event_and_keeps_the_context_for_the_start(
    tmp_path: Path,
) -> None:
    session = _session(tmp_path)
    bus = open_bus(session.env)
    try:
        agent = bus.register_agent(
            Channel("app", "legion/leg-1"),
            "implement",
            role=AgentRole.IMPLEMENT,
            runtime="codex",
            session_id="s-1",
        )
        session_hooks.compacting(session, trigger="auto")
        [event] = bus.event_log(agent_id=agent.id, kinds=[EventKind.COMPACTION_START])
        assert event.detail == "auto"
    finally:
        bus.close()
    kept = (tmp_path / "context.md").read_text(encoding="utf-8")
    assert kept.strip()
    started = session_hooks.session_started(session, "compact")
    assert started is not None and started.strip()
    assert session_hooks.session_started(session, "startup") is None


def test_a_session_the_bus_does_not_know_is_given_its_kept_context(tmp_path: Path) -> None:
    session = _session(tmp_path, session_id="not-on-the-bus")
    assert session_hooks.session_started(session, "resume") is None  # nothing kept either
    (tmp_path / "context.md").write_text("## Plan\nstep 3", encoding="utf-8")
    assert session_hooks.session_started(session, "resume") == "## Plan\nstep 3"
    (tmp_path / "context.md").write_text(" \n", encoding="utf-8")
    assert session_hooks.session_started(session, "resume") is None
