"""What a woken agent is shown for a message, and a bus that cannot be opened never stopping a
session from starting."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from legion.bus.delivery import address_from, delivery_text
from legion.bus.model import Agent, AgentRole, AgentStatus, Message, MessageKind


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


def test_a_message_says_who_wrote_where_and_how_to_answer() -> None:
    shown = delivery_text(_message("proj/legion/leg-1/implement"), _agent("plan", AgentRole.PLAN))
    assert shown == (
        "Message from @implement on proj/legion/leg-1 "
        "(answer with `legion say @implement …`):\nlook at this\nplease"
    )


def test_only_the_orchestrator_is_told_to_answer_the_human_directly() -> None:
    worker = delivery_text(_message("human"), _agent("plan", AgentRole.PLAN))
    assert "`legion say @legion …`, who passes it on to the human" in worker
    orchestrator = delivery_text(_message("human"), _agent("legion", AgentRole.CONTROLLER, "main"))
    assert "(answer with `legion say @human …`)" in orchestrator


def test_a_bus_that_cannot_be_opened_is_reported_and_the_start_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from legion.runtime.workers import WorkerManager

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")  # the state home's parent is a file: the bus cannot be created
    manager = SimpleNamespace(env={"XDG_STATE_HOME": str(blocked)}, project=None)
    WorkerManager._register_on_bus(manager, "sid-1", "plan", tmp_path)  # type: ignore[arg-type]
    assert "session sid-1 not registered on the bus" in capsys.readouterr().err
