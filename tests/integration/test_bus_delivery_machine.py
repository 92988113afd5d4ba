"""Message delivery's state machine (`legion.bus.delivery`) on a real bus and real inbox and
transcript files, with the sessions behind a scripted `SessionDoor`: the machine needs no tmux
and no agent runtime, and every way a message is handed over is counted once."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from legion.bus import inbox as inbox_file
from legion.bus.delivery import Delivery, Handed, Handover, Reach, SessionAt
from legion.bus.model import Agent, AgentRole, AgentStatus, Channel, DeliveryState
from legion.bus.stored import SqliteBus
from legion.errors import LegionError

CHANNEL = Channel("app", "legion/leg-1")


@dataclass
class ScriptedDoor:
    """One session, as the test says it is; records what delivery asked of it."""

    folder: Path
    reach: Reach = Reach.IDLE
    last_activity: float | None = 0.0
    takes_prompt: bool = True
    resumable: str | None = None
    typed: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)

    @property
    def transcript(self) -> Path:
        return self.folder / "transcript.jsonl"

    @property
    def inbox(self) -> Path:
        return self.folder / "inbox.json"

    def look(self, agent: Agent) -> SessionAt:
        return SessionAt(self.reach, self.transcript, self.inbox, self.last_activity)

    def type_confirmed(self, session_id: str, text: str) -> bool:
        self.typed.append(text)
        if self.takes_prompt:
            with self.transcript.open("a", encoding="utf-8") as out:
                out.write(text + "\n")
        return self.takes_prompt

    def why_not_resumed(self, session_id: str) -> str | None:
        return self.resumable

    def resume_with(self, session_id: str, text: str) -> None:
        self.resumed.append(text)


@pytest.fixture
def worker(bus: SqliteBus) -> Agent:
    return bus.register_agent(
        CHANNEL, "implement", role=AgentRole.IMPLEMENT, runtime="claude-code", session_id="s-1"
    )


def _post(bus: SqliteBus, worker: Agent, body: str = "hello") -> str:
    return bus.post(bus.human().id, CHANNEL, f"@implement {body}").message.id


def _state(bus: SqliteBus, message_id: str, worker: Agent) -> DeliveryState:
    [delivery] = [d for d in bus.deliveries(message_id) if d.recipient_id == worker.id]
    return delivery.state


def test_an_idle_session_is_typed_its_messages_once_as_one_prompt(
    bus: SqliteBus, worker: Agent, tmp_path: Path
) -> None:
    door = ScriptedDoor(tmp_path)
    first, second = _post(bus, worker, "one"), _post(bus, worker, "two")
    noted: list[Handover] = []
    delivery = Delivery(bus, door, resume=False, journal=noted.append)

    assert delivery.deliver([worker]) == {worker.id: Handed.DELIVERED}
    assert len(door.typed) == 1 and first in door.typed[0] and second in door.typed[0]
    assert {_state(bus, m, worker) for m in (first, second)} == {DeliveryState.DELIVERED}
    assert [(h.count, h.resumed) for h in noted] == [(2, False)]
    assert delivery.deliver([worker]) == {}  # nothing pending: nothing typed again
    assert len(door.typed) == 1


def test_a_session_whose_turn_just_ended_is_come_back_to(
    bus: SqliteBus, worker: Agent, tmp_path: Path
) -> None:
    door = ScriptedDoor(tmp_path, last_activity=time.time())
    message = _post(bus, worker)
    delivery = Delivery(bus, door, resume=False)

    assert delivery.deliver([worker]) == {worker.id: Handed.SETTLING}
    assert delivery.retry_in is not None and door.typed == []
    assert _state(bus, message, worker) is DeliveryState.PENDING


def test_a_prompt_not_taken_stays_pending_with_the_attempt_counted(
    bus: SqliteBus, worker: Agent, tmp_path: Path
) -> None:
    door = ScriptedDoor(tmp_path, takes_prompt=False)
    message = _post(bus, worker)

    assert Delivery(bus, door, resume=False).deliver([worker]) == {worker.id: Handed.NOT_TAKEN}
    [delivery] = bus.deliveries(message)
    assert delivery.state is DeliveryState.PENDING and delivery.attempts == 2
    assert delivery.last_error == "typed into the idle session, but not taken"


def test_an_attempt_found_in_the_transcript_is_marked_not_typed_again(
    bus: SqliteBus, worker: Agent, tmp_path: Path
) -> None:
    door = ScriptedDoor(tmp_path)
    message = _post(bus, worker)
    # A watcher counted its attempt and typed the message, then died before marking it.
    bus.record_failed_attempt(message, worker.id, "typed into the idle session; not yet confirmed")
    door.transcript.write_text(f"... Message {message} from @human ...\n", encoding="utf-8")

    assert Delivery(bus, door, resume=False).deliver([worker]) == {worker.id: Handed.DELIVERED}
    assert door.typed == []
    assert _state(bus, message, worker) is DeliveryState.DELIVERED


def test_a_busy_session_gets_its_messages_through_its_hooks_marked_before_forgotten(
    bus: SqliteBus, worker: Agent, tmp_path: Path
) -> None:
    door = ScriptedDoor(tmp_path, reach=Reach.BUSY)
    message = _post(bus, worker)
    bus.update_agent(worker.id, status=AgentStatus.IDLE)
    delivery = Delivery(bus, door, resume=False)

    assert delivery.deliver([worker]) == {worker.id: Handed.AT_TURN_END}
    queued = inbox_file.parse_inbox(door.inbox.read_text(encoding="utf-8"))
    assert [m.id for m in queued.messages] == [message] and door.typed == []
    assert delivery.deliver([worker]) == {worker.id: Handed.AT_TURN_END}  # queued once
    assert len(inbox_file.parse_inbox(door.inbox.read_text(encoding="utf-8")).messages) == 1

    # The session's turn ends: its hook hands the message over, and the next pass marks it.
    inbox_file.update_inbox(
        door.inbox,
        lambda current: inbox_file.hand_over(current, via="Stop", session_id="s-1", now=1.0),
    )
    assert delivery.deliver([worker]) == {worker.id: Handed.DELIVERED}
    assert _state(bus, message, worker) is DeliveryState.DELIVERED
    assert bus.agent(worker.id).status is AgentStatus.BUSY  # prompted again
    assert inbox_file.peek_delivered(door.inbox) == []


def test_a_session_not_running_is_resumed_only_by_a_watcher_that_may(
    bus: SqliteBus, worker: Agent, tmp_path: Path
) -> None:
    door = ScriptedDoor(tmp_path, reach=Reach.DOWN)
    message = _post(bus, worker)

    assert Delivery(bus, door, resume=False).deliver([worker]) == {worker.id: Handed.NOT_RUNNING}
    assert door.resumed == [] and bus.deliveries(message)[0].attempts == 0

    door.resumable = "not resumed while dispatch is paused: a test"
    assert Delivery(bus, door, resume=True).deliver([worker]) == {worker.id: Handed.NOT_RUNNING}
    assert bus.deliveries(message)[0].last_error == door.resumable and door.resumed == []

    door.resumable = None
    noted: list[Handover] = []
    delivery = Delivery(bus, door, resume=True, journal=noted.append)
    assert delivery.deliver([worker]) == {worker.id: Handed.DELIVERED}
    assert len(door.resumed) == 1 and message in door.resumed[0]
    assert [(h.count, h.resumed) for h in noted] == [(1, True)]


def test_typing_that_fails_is_recorded_and_raised(
    bus: SqliteBus, worker: Agent, tmp_path: Path
) -> None:
    class Broken(ScriptedDoor):
        def type_confirmed(self, session_id: str, text: str) -> bool:
            raise LegionError("no such window")

    message = _post(bus, worker)
    with pytest.raises(LegionError):
        Delivery(bus, Broken(tmp_path), resume=False).deliver([worker])
    [delivery] = bus.deliveries(message)
    assert delivery.state is DeliveryState.PENDING
    assert delivery.last_error == "typing failed: no such window"
