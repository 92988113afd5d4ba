"""What the event bus holds: agents, messages, per-recipient deliveries, events and tasks. Pure.

A channel is a (project, branch) pair: every message is posted in one. An agent is known by
its address, `project/branch/name`; the human is one agent for the whole machine, `human`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from legion.errors import InputError

HUMAN_NAME = "human"
ORCHESTRATOR_NAME = "legion"


class AgentStatus(Enum):
    BUSY = "busy"
    IDLE = "idle"
    BLOCKED = "blocked"
    COMPLETE = "complete"
    FAILED = "failed"
    ARCHIVED = "archived"
    # Its session was ended by a clean stop (`legion stop --all`, the demo's end): not a
    # failure; it runs again when the swarm takes it up.
    STOPPED = "stopped"

    @classmethod
    def parse(cls, text: str) -> AgentStatus:
        try:
            return cls(text.strip().lower())
        except ValueError:
            known = ", ".join(s.value for s in cls)
            raise InputError(f"unknown agent status {text!r} (known: {known})") from None


class AgentRole(Enum):
    """What an agent is for: the orchestrator, a worker in one of its modes, or the human."""

    CONTROLLER = "controller"
    ARCHITECT = "architect"
    PLAN = "plan"
    IMPLEMENT = "implement"
    REVIEW = "review"
    RETRO = "retro"
    FINISH = "finish"
    HUMAN = "human"


class MessageKind(Enum):
    SAY = "say"
    ASK = "ask"
    ANSWER = "answer"
    COMPLETE = "complete"
    SYSTEM = "system"


class DeliveryState(Enum):
    PENDING = "pending"  # not yet handed to the recipient (or every attempt so far failed)
    DELIVERED = "delivered"  # handed over: typed in, injected by a hook, or in a resume prompt
    READ = "read"  # the recipient has seen it (`legion messages`)


class EventKind(Enum):
    MESSAGE_POSTED = "message_posted"
    AGENT_REGISTERED = "agent_registered"  # a session started (a new spawn instance)
    AGENT_BLOCKED = "agent_blocked"
    AGENT_COMPLETED = "agent_completed"
    AGENT_FAILED = "agent_failed"
    AGENT_ARCHIVED = "agent_archived"
    AGENT_STOPPED = "agent_stopped"
    COMPACTION_START = "compaction_start"

    @property
    def short_name(self) -> str:
        """The name people type and read: `blocked` for `agent_blocked`, `compaction`,
        `message` for `message_posted`."""
        if self is EventKind.MESSAGE_POSTED:
            return "message"
        return str(self.value).removeprefix("agent_").removesuffix("_start")


# The event a change of status stands for; the other statuses change silently.
STATUS_EVENTS: dict[AgentStatus, EventKind] = {
    AgentStatus.BLOCKED: EventKind.AGENT_BLOCKED,
    AgentStatus.COMPLETE: EventKind.AGENT_COMPLETED,
    AgentStatus.FAILED: EventKind.AGENT_FAILED,
    AgentStatus.ARCHIVED: EventKind.AGENT_ARCHIVED,
    AgentStatus.STOPPED: EventKind.AGENT_STOPPED,
}


class TaskState(Enum):
    PENDING = "pending"
    ASSIGNED = "assigned"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class Channel:
    """Where a message is posted: a project and one of its branches."""

    project: str
    branch: str

    def __str__(self) -> str:
        return f"{self.project}/{self.branch}"


@dataclass(frozen=True, slots=True)
class Agent:
    id: int
    project: str  # "" for the human, who belongs to no project
    branch: str
    name: str
    role: AgentRole
    runtime: str
    session_id: str | None
    status: AgentStatus
    spawn_instance: int  # bumped at each start of its session: stale signals can be told apart
    created_at: str
    updated_at: str

    @property
    def address(self) -> str:
        """The full address, which names this agent from anywhere."""
        if self.role is AgentRole.HUMAN:
            return self.name
        return f"{self.project}/{self.branch}/{self.name}"

    @property
    def channel(self) -> Channel:
        return Channel(self.project, self.branch)


@dataclass(frozen=True, slots=True)
class Message:
    id: str  # chosen by the poster (a retry with the same id posts nothing new)
    seq: int  # the bus's order: "since" cursors count in it
    project: str
    branch: str
    sender: str  # the sender's full address
    kind: MessageKind
    body: str
    mentions: tuple[str, ...]  # the full addresses of the agents it addresses
    created_at: str
    reply_to: str | None = None  # the id of the message it answers

    @property
    def channel(self) -> Channel:
        return Channel(self.project, self.branch)


@dataclass(frozen=True, slots=True)
class Delivery:
    message_id: str
    recipient_id: int
    state: DeliveryState
    attempts: int
    last_error: str | None
    updated_at: str


@dataclass(frozen=True, slots=True)
class PendingDelivery:
    """A delivery still to be made, with what the daemon needs to make it."""

    delivery: Delivery
    message: Message
    recipient: Agent


@dataclass(frozen=True, slots=True)
class Draft:
    """A message to post: who says what, where; its id if the poster chose one (to retry)."""

    sender_id: int
    channel: Channel
    body: str
    kind: MessageKind = MessageKind.SAY
    message_id: str | None = None
    reply_to: str | None = None  # the id of the message it answers
    to: tuple[int, ...] = ()  # agents addressed beside the body's mentions


@dataclass(frozen=True, slots=True)
class Posted:
    """What posting did: the message, and who it addresses (and so will wake)."""

    message: Message
    recipients: tuple[Agent, ...]
    created: bool  # False: the id was posted before, and that message is returned


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    kind: EventKind
    agent_id: int | None
    message_id: str | None
    detail: str
    created_at: str


@dataclass(frozen=True, slots=True)
class Task:
    id: int
    project: str
    branch: str
    parent_id: int | None
    title: str
    assigned_agent_id: int | None
    completed_at: str | None
    created_at: str

    @property
    def state(self) -> TaskState:
        """Derived, never stored: a task cannot be "done" and "pending" at once."""
        if self.completed_at is not None:
            return TaskState.DONE
        if self.assigned_agent_id is not None:
            return TaskState.ASSIGNED
        return TaskState.PENDING


@dataclass(frozen=True, slots=True)
class KnownProject:
    """A project the bus knows: by its name on the bus, where it lived when last seen (None:
    an older Legion wrote its agents or messages without recording it), its project id (None
    likewise) and how many agents it has."""

    name: str
    project_id: str | None
    root: Path | None
    agents: int


@dataclass(frozen=True, slots=True)
class ForgottenProject:
    """What forgetting a project took off the bus."""

    name: str
    agents: int
    messages: int
    tasks: int
