"""Message delivery's state machine: each pending delivery is handed to its addressee's session
once, whoever watches the project (`legion.services.agent_watch` wires it to the sessions).

A delivery's states, kept on the bus:

    pending --attempt counted--> attempting --taken--> delivered (--shown--> read)
                                     |
                                     +--not taken / failed--> pending (the error kept)

"Attempting" is a pending delivery whose attempt is counted and whose last error says "not yet
confirmed"; `legion messages` marks a delivered one read. Making a delivery takes one of three
ways, by what the session is doing:

- idle (at its prompt): typed in as its next prompt, counted once the session took it;
- busy (in a turn, or waiting on a question, which typing would answer): queued in the
  session's inbox (`legion.bus.inbox`) for its hooks, which hand it over at the turn boundary;
  the next pass marks it delivered on the bus *before* the inbox forgets it;
- not running: its session resumed with it as the prompt, when this watcher may resume and
  the session can be.

**Never twice.** Each attempt is counted on the bus before it is made (`attempting`), and a
delivery with an earlier attempt first looks for its message id in the session's transcript:
a watcher killed half-way (`after_delivery_attempt`, `after_message_typed`) never hands a
message over again. The session itself is reached through a `SessionDoor`, which the shell
opens with tmux and the agent runtimes: this module imports neither.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

from legion.bus import inbox as inbox_file
from legion.bus.delivery_text import delivery_text
from legion.bus.inbox import TYPED
from legion.bus.model import Agent, AgentStatus, PendingDelivery
from legion.bus.protocol import Bus
from legion.core.liveness import SETTLE_S
from legion.diagnostics.faults import fault_point
from legion.errors import LegionError, NotFoundError

# How long a session must have been idle before a delivery types into it is a liveness rule
# (`legion.core.liveness.SETTLE_S`); typing itself is the door's (the session supervisor's).
# Said in a delivery's last error while Legion cannot yet resume a session to deliver to it.
NO_LIVE_SESSION = "the session is not running (delivery to a dead session waits for its resume)"


class Handed(Enum):
    """What became of an agent's pending messages in one delivery pass."""

    DELIVERED = "delivered"  # typed in and taken, found in its transcript, or resumed with
    AT_TURN_END = "at_turn_end"  # queued for its hooks: busy, or waiting on a question
    SETTLING = "settling"  # its turn has only just ended: try again in a moment
    NOT_TAKEN = "not_taken"  # typed, not taken (or typing failed): pending, tried again
    NOT_RUNNING = "not_running"  # its session is not running and is not resumed now


class Reach(Enum):
    """How a session can be handed a message now."""

    IDLE = "idle"  # at its prompt, in a live window: typed in
    BUSY = "busy"  # in a turn, or waiting on a question: queued for its hooks
    DOWN = "down"  # not running (or no window): resumed with it, when allowed


@dataclass(frozen=True)
class SessionAt:
    """A session as the watcher's look saw it: how it can be reached, its transcript, its
    inbox, and when it was last active (its transcript's time)."""

    reach: Reach
    transcript: Path
    inbox: Path
    last_activity: float | None


class SessionDoor(Protocol):
    """How delivery reaches the sessions; the shell (`legion.services.agent_watch`) opens it with
    tmux and the agent runtimes."""

    def look(self, agent: Agent) -> SessionAt:
        """The agent's session, as the watcher's look saw it."""
        ...

    def type_confirmed(self, session_id: str, text: str) -> bool:
        """Type `text` into the idle session as its next prompt. True once the session took
        it (its transcript grew); False: not taken, and its input left empty. A LegionError
        when typing failed."""
        ...

    def why_not_resumed(self, session_id: str) -> str | None:
        """Why the session, not running, cannot be resumed now (None: it can)."""
        ...

    def resume_with(self, session_id: str, text: str) -> None:
        """Resume the session, same id, with `text` as its prompt (a LegionError when that
        failed)."""
        ...


@dataclass(frozen=True)
class Handover:
    """Messages handed to an agent by typing them in or resuming its session (for the action
    log; what its hooks hand over is not announced)."""

    agent: Agent
    count: int
    resumed: bool


class Delivery:
    """One pass over the pending deliveries of some agents (`deliver`). `resume`: a session
    that is not running is resumed with its messages (the daemon's to do; without a daemon,
    a dead session's messages wait for `legion start`). `journal`: told of each handover."""

    def __init__(
        self,
        bus: Bus,
        door: SessionDoor,
        *,
        resume: bool,
        journal: Callable[[Handover], None] = lambda handover: None,
    ) -> None:
        self.bus = bus
        self.door = door
        self.resume = resume
        self.journal = journal
        # When the last pass wants to be run again soon (a turn that just ended).
        self.retry_in: float | None = None

    def deliver(self, agents: Iterable[Agent]) -> dict[int, Handed]:
        """Hand each of these agents (each with a session) its pending messages; what became
        of them, by agent id (an agent with nothing pending is not in it)."""
        self.retry_in = None
        listed = list(agents)
        pending = {a.id: self.bus.pending_deliveries(recipient_id=a.id) for a in listed}
        handed: dict[int, Handed] = {}
        for agent in listed:
            if pending[agent.id]:
                handed[agent.id] = self._deliver_to(agent, pending[agent.id])
        return handed

    def _deliver_to(self, agent: Agent, due: list[PendingDelivery]) -> Handed:
        session_id = agent.session_id
        assert session_id is not None
        at = self.door.look(agent)
        if at.reach is Reach.IDLE:
            quiet = time.time() - (at.last_activity or 0.0)
            if quiet < SETTLE_S:  # its turn has only just ended: come back in a moment
                self.retry_in = SETTLE_S
                return Handed.SETTLING
            # Taken out of the hooks' reach first: the prompt typed below would otherwise have
            # its UserPromptSubmit hook hand the same messages over a second time.
            inbox_file.take_queued(at.inbox, TYPED, session_id)
        handed = self._note_hook_deliveries(agent, at.inbox)
        due = [item for item in due if item.message.id not in handed]
        # An earlier attempt may have got through just before its watcher died: the transcript
        # says so (the message's id is in what was typed).
        landed = [item for item in due if item.delivery.attempts and seen_in(at.transcript, item)]
        if landed:
            self._delivered(agent, [item.message.id for item in landed])
        due = [item for item in due if item not in landed]
        if not due:
            return Handed.DELIVERED
        texts = [(item.message.id, delivery_text(item.message, agent)) for item in due]
        if at.reach is Reach.DOWN:
            if not self.resume:
                return Handed.NOT_RUNNING
            return self._resume_with(agent, texts)
        if at.reach is Reach.BUSY:
            # The Stop hook (or the turn loop) hands the messages over at its turn boundary,
            # never in the middle of a turn.
            for message_id, text in texts:
                inbox_file.enqueue(at.inbox, message_id, text)
            return Handed.AT_TURN_END
        return self._type_messages(agent, texts)

    def _delivered(self, agent: Agent, message_ids: list[str]) -> None:
        """Mark the deliveries made; the agent, prompted again, is busy (and so un-archived,
        no longer complete, or no longer waiting for the answer it just got)."""
        for message_id in message_ids:
            with contextlib.suppress(NotFoundError):  # a message the bus does not know
                self.bus.mark_delivered(message_id, agent.id)
        current = self.bus.agent(agent.id)
        if current.status is not AgentStatus.BUSY:
            self.bus.update_agent(agent.id, status=AgentStatus.BUSY, detail="prompted")

    def _attempting(self, agent: Agent, message_ids: list[str], how: str) -> None:
        """Count the attempt before making it: if the watcher dies half-way, the next one
        knows to look in the transcript before handing the message over again."""
        for message_id in message_ids:
            self.bus.record_failed_attempt(message_id, agent.id, f"{how}; not yet confirmed")

    def _failed(self, agent: Agent, message_ids: list[str], error: str) -> None:
        for message_id in message_ids:
            self.bus.record_failed_attempt(message_id, agent.id, error)

    def _resume_with(self, agent: Agent, texts: list[tuple[str, str]]) -> Handed:
        """A dead agent is resumed, same session, with its messages as the prompt (the
        controller is restarted by its own health check, and gets them once it is idle)."""
        assert agent.session_id is not None
        ids = [message_id for message_id, _ in texts]
        why = self.door.why_not_resumed(agent.session_id)
        if why is not None:
            self._failed(agent, ids, why)
            return Handed.NOT_RUNNING
        prompt = "\n\n".join(text for _, text in texts)
        self._attempting(agent, ids, "resuming the session with it")
        try:
            self.door.resume_with(agent.session_id, prompt)
        except LegionError as exc:
            self._failed(agent, ids, f"resume failed: {exc}")
            return Handed.NOT_RUNNING
        self._delivered(agent, ids)
        self.journal(Handover(agent, len(ids), resumed=True))
        return Handed.DELIVERED

    def _note_hook_deliveries(self, agent: Agent, inbox: Path) -> set[str]:
        """Mark delivered what the session's hooks handed to the model; their ids. Marked on
        the bus before the inbox forgets them, so a crash in between loses nothing."""
        if not inbox.exists():
            return set()
        entries = inbox_file.peek_delivered(inbox)
        handed = {
            str(entry.get("id"))
            for entry in entries
            if entry.get("via") != TYPED  # typed ones are marked when typed
        }
        if handed:
            self._delivered(agent, sorted(handed))
        if entries:
            inbox_file.forget_delivered(inbox, {str(entry.get("id")) for entry in entries})
        return handed

    def _type_messages(self, agent: Agent, texts: list[tuple[str, str]]) -> Handed:
        """Type the messages into the idle session as one prompt; delivered once its
        transcript has recorded it."""
        assert agent.session_id is not None
        ids = [message_id for message_id, _ in texts]
        prompt = "\n\n".join(text for _, text in texts)
        self._attempting(agent, ids, "typed into the idle session")
        fault_point("after_delivery_attempt")
        try:
            accepted = self.door.type_confirmed(agent.session_id, prompt)
        except LegionError as exc:
            self._failed(agent, ids, f"typing failed: {exc}")
            raise
        if not accepted:
            self._failed(agent, ids, "typed into the idle session, but not taken")
            return Handed.NOT_TAKEN
        fault_point("after_message_typed")
        self._delivered(agent, ids)
        self.journal(Handover(agent, len(ids), resumed=False))
        return Handed.DELIVERED


# -- the transcript checks -------------------------------------------------------------------------


def seen_in(transcript: Path, item: PendingDelivery) -> bool:
    """Whether the session's transcript holds the message's id: a prompt with it was taken."""
    from legion.files.worker_written import read_transcript

    try:  # the session's file: no link followed, at most its last WHOLE_BYTES
        return item.message.id.encode() in read_transcript(transcript)
    except OSError:
        return False
