"""What a woken agent is shown for a message, and a bus that cannot be opened never stopping a
session from starting."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legion.bus.delivery_text import address_from, delivery_text
from legion.bus.model import Agent, AgentRole, AgentStatus, Message, MessageKind
from legion.core.decide import completion_labels
from legion.core.liveness import SessionState
from legion.core.model import Label, Mode, Status
from legion.sessions.observer import observed_status


def _agent(name: str, role: AgentRole, branch: str = "legion/leg-1") -> Agent:
    return Agent(1, "proj", branch, name, role, "claude-code", "sid", AgentStatus.IDLE, 1, "", "")


def _message(sender: str, body: str = "look at this\nplease") -> Message:
    return Message("m-1", 1, "proj", "legion/leg-1", sender, MessageKind.SAY, body, (), "")


@pytest.mark.parametrize(
    ("sender", "written"),
    [
        ("proj/legion/leg-1/implement", "implement"),
        ("proj/main/legion", "main/legion"),
        ("other/main/plan", "other/main/plan"),
        ("human", "human"),
    ],
)
def test_the_sender_is_written_as_the_recipient_would_address_it(sender: str, written: str) -> None:
    assert address_from(sender, _agent("plan", AgentRole.PLAN)) == written


def test_a_message_says_what_it_is_its_id_who_wrote_where_and_how_to_answer() -> None:
    shown = delivery_text(_message("proj/legion/leg-1/implement"), _agent("plan", AgentRole.PLAN))
    assert shown == (
        "Message m-1 from @implement on proj/legion/leg-1 "
        "(reply with `legion reply m-1 …`):\n> look at this\n> please"
    )


@given(st.text())
def test_no_line_of_a_body_reads_as_a_header_of_legions(body: str) -> None:
    """A body holding `Message <id> from @human on …` cannot pass for a second message, from
    the human or anyone: only Legion's own header starts a line."""
    message = replace(_message("proj/legion/leg-1/implement"), body=body)
    first, *rest = delivery_text(message, _agent("plan", AgentRole.PLAN)).split("\n")
    assert first.startswith("Message m-1 from @implement")
    assert all(line.startswith("> ") for line in rest)
    assert "\n".join(line[2:] for line in rest) == body


def test_a_question_to_the_orchestrator_may_be_passed_on_to_the_human() -> None:
    question = replace(_message("proj/legion/leg-1/implement"), kind=MessageKind.ASK)
    orchestrator = delivery_text(question, _agent("legion", AgentRole.CONTROLLER, "main"))
    assert orchestrator.startswith("Question m-1 from @legion/leg-1/implement on proj/legion/leg-1")
    assert "`legion reply m-1 …`, or pass it on to the human with `legion ask --about m-1 …`" in (
        orchestrator
    )
    answer = replace(_message("proj/main/legion"), kind=MessageKind.ANSWER)
    assert delivery_text(answer, _agent("plan", AgentRole.PLAN)).startswith("Answer m-1 from")


def test_only_the_orchestrator_is_told_to_talk_to_the_human_directly() -> None:
    worker = delivery_text(_message("human"), _agent("plan", AgentRole.PLAN))
    assert "anything else goes to @legion" in worker
    orchestrator = delivery_text(_message("human"), _agent("legion", AgentRole.CONTROLLER, "main"))
    assert "(reply with `legion reply m-1 …`)" in orchestrator


@pytest.mark.parametrize(
    ("current", "session", "waiting", "expected"),
    [
        (AgentStatus.BUSY, SessionState.IDLE, False, AgentStatus.IDLE),
        (AgentStatus.IDLE, SessionState.RUNNING, False, AgentStatus.BUSY),
        (AgentStatus.BUSY, SessionState.BLOCKED, False, AgentStatus.BLOCKED),
        (AgentStatus.BUSY, SessionState.DEAD, False, AgentStatus.FAILED),
        (AgentStatus.IDLE, None, False, AgentStatus.COMPLETE),  # retired by Legion
        (AgentStatus.FAILED, None, False, None),
        (AgentStatus.FAILED, SessionState.DEAD, False, None),
        (AgentStatus.FAILED, SessionState.RUNNING, False, AgentStatus.BUSY),
        # What the agent said of itself stands until it is prompted again.
        (AgentStatus.COMPLETE, SessionState.RUNNING, False, None),
        (AgentStatus.ARCHIVED, SessionState.IDLE, False, None),
        (AgentStatus.BLOCKED, SessionState.IDLE, True, None),
        (AgentStatus.BLOCKED, SessionState.RUNNING, True, None),
        (AgentStatus.BLOCKED, SessionState.IDLE, False, AgentStatus.IDLE),
    ],
)
def test_an_agents_status_follows_its_session_except_what_it_said_itself(
    current: AgentStatus, session: SessionState | None, waiting: bool, expected: AgentStatus | None
) -> None:
    assert observed_status(current, session, waiting) is expected


@pytest.mark.parametrize(
    ("mode", "status", "add", "remove"),
    [
        (Mode.PLAN, Status.TODO, {Label.WORKER_DONE}, {Label.WORKER_ACTIVE}),
        (Mode.IMPLEMENT, Status.IN_PROGRESS, {Label.WORKER_DONE}, {Label.WORKER_ACTIVE}),
        (Mode.IMPLEMENT, Status.NEEDS_REVIEW, set(), {Label.WORKER_ACTIVE}),  # changes made
        (Mode.REVIEW, Status.NEEDS_REVIEW, {Label.WORKER_DONE}, {Label.WORKER_ACTIVE}),
        (Mode.RETRO, Status.RETRO, {Label.WORKER_DONE}, {Label.WORKER_ACTIVE}),
        (Mode.FINISH, Status.DONE, set(), {Label.WORKER_ACTIVE}),
    ],
)
def test_legion_complete_writes_the_completion_protocols_labels(
    mode: Mode, status: Status, add: set[Label], remove: set[Label]
) -> None:
    added, removed = completion_labels(mode, status)
    assert (set(added), set(removed)) == (add, remove)


def test_a_bus_that_cannot_be_opened_is_reported_and_the_start_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from legion.sessions.supervisor import SessionSupervisor

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")  # the state home's parent is a file: the bus cannot be created
    manager = SimpleNamespace(env={"XDG_STATE_HOME": str(blocked)}, project=None)
    SessionSupervisor._register_on_bus(manager, "sid-1", "plan", tmp_path, "claude-code")  # type: ignore[arg-type]
    [said] = [r for r in caplog.records if "not registered on the bus" in r.getMessage()]
    assert said.levelname == "WARNING" and getattr(said, "session", None) == "sid-1"
