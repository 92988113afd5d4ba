"""The `Bus` protocol: what Legion's commands, the daemon, the TUI and the hooks need from the
event bus, in the records of `legion.bus.model`.

Callers hold a `Bus` (from `legion.bus.open_bus`), never an implementation, so a second one
(a server-backed bus) is a sibling of `legion.bus.stored`, not an edit of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from legion.bus.model import (
    Agent,
    AgentRole,
    AgentStatus,
    Channel,
    Delivery,
    Draft,
    Event,
    EventKind,
    ForgottenProject,
    KnownProject,
    Message,
    MessageKind,
    PendingDelivery,
    Posted,
    Task,
)


class Bus(Protocol):
    """What Legion's commands, the daemon and the hooks need from the event bus."""

    # -- agents
    def register_agent(
        self,
        channel: Channel,
        name: str,
        *,
        role: AgentRole,
        runtime: str,
        session_id: str | None,
    ) -> Agent:
        """A session started: the agent (created on first sight), busy, with a new spawn
        instance, un-archived."""
        ...

    def update_agent(
        self,
        agent_id: int,
        *,
        status: AgentStatus | None = None,
        session_id: str | None = None,
        detail: str = "",
    ) -> Agent:
        """Change what is given; a move to blocked, complete, failed or archived is an event."""
        ...

    def agent(self, agent_id: int) -> Agent: ...

    def agent_by_session(self, session_id: str) -> Agent | None: ...

    def human(self) -> Agent: ...

    def agents(self, *, include_archived: bool = False) -> list[Agent]:
        """Every agent but the human, by address."""
        ...

    def resolve_agent(self, address: str, here: Channel) -> Agent:
        """The agent `address` names when written in `here` (see `legion.bus.address`)."""
        ...

    def claim_project(self, project_id: str, name: str, root: Path) -> str:
        """The name on the bus of the project `project_id`, which lives at `root`: the one it
        was given, else `name` (its folder's), with a suffix (`app-2`) when another project
        has it; a project an older Legion recorded at `root` is claimed with its name."""
        ...

    def projects(self) -> dict[str, Path]:
        """Every project the bus has seen, by name: where it lives."""
        ...

    def known_projects(self) -> list[KnownProject]:
        """Every project the bus has a record or an agent of, by name."""
        ...

    def forget_project(self, name: str) -> ForgottenProject | None:
        """Take the project `name` off the bus, all of it at once (what belongs to a project:
        `legion.bus.stored.projects`); None when the bus knows no such project."""
        ...

    def replaced(self) -> bool:
        """Whether the database file on disk is no longer the one this bus has open (restored
        from a copy, moved aside): a long-lived holder reopens it."""
        ...

    # -- messages and deliveries
    def post(
        self,
        sender_id: int,
        channel: Channel,
        body: str,
        *,
        kind: MessageKind = MessageKind.SAY,
        message_id: str | None = None,
        reply_to: str | None = None,
        to: Sequence[int] = (),
    ) -> Posted:
        """Post `body` in `channel`: its mentions resolved, one pending delivery per addressee
        (the mentioned agents, then the agents `to` names, each once) and a `message_posted`
        event, all or nothing. `reply_to`: the id of the message this answers (it must exist).
        Posting an id again posts nothing and returns the first message (a different message
        under a used id is refused)."""
        ...

    def post_many(self, drafts: Sequence[Draft]) -> list[Posted]:
        """Post each draft as `post` does, all in one transaction: all of them, or none."""
        ...

    def message(self, message_id: str) -> Message: ...

    def messages(
        self,
        *,
        channel: Channel | None = None,
        since: int = 0,
        unread_for: int | None = None,
        last: int | None = None,
    ) -> list[Message]:
        """Messages after `since` (a `seq`), oldest first: of one channel or all, only those
        addressed to `unread_for` it has not read, only the `last` few."""
        ...

    def channels(self) -> list[Channel]:
        """Every channel a message was posted in."""
        ...

    def open_questions(self, recipient_id: int) -> list[Message]:
        """The questions (`ask`) addressed to `recipient_id` that no answer replies to yet,
        oldest first."""
        ...

    def replies(self, message_id: str) -> list[Message]:
        """The messages that reply to `message_id`, oldest first."""
        ...

    def unanswered_asks(self, sender_id: int) -> list[Message]:
        """The questions `sender_id` asked that no answer replies to yet, oldest first (an
        answer to a question that passed one on counts for both)."""
        ...

    def deliveries(self, message_id: str) -> list[Delivery]: ...

    def pending_deliveries(
        self, *, recipient_id: int | None = None, limit: int = 100
    ) -> list[PendingDelivery]:
        """Deliveries not yet made, oldest message first (what the daemon hands over)."""
        ...

    def mark_delivered(self, message_id: str, recipient_id: int) -> Delivery:
        """Counted as an attempt; a delivery already delivered or read stays as it is."""
        ...

    def mark_read(self, recipient_id: int, message_ids: Iterable[str]) -> int:
        """The recipient saw these messages; returns how many deliveries changed."""
        ...

    def record_failed_attempt(self, message_id: str, recipient_id: int, error: str) -> Delivery:
        """An attempt failed: counted, its error kept, the delivery still pending."""
        ...

    # -- events
    def record_event(
        self,
        kind: EventKind,
        *,
        agent_id: int | None = None,
        message_id: str | None = None,
        detail: str = "",
    ) -> Event: ...

    def events(self, *, since: int = 0, limit: int | None = None) -> list[Event]: ...

    def event_log(
        self,
        *,
        since: int = 0,
        agent_id: int | None = None,
        kinds: Iterable[EventKind] | None = None,
        last: int | None = None,
    ) -> list[Event]:
        """Events after `since`, oldest first: only `agent_id`'s, only of `kinds` (None: all),
        only the newest `last`."""
        ...

    # -- tasks
    def add_task(
        self,
        channel: Channel,
        title: str,
        *,
        parent_id: int | None = None,
        assigned_agent_id: int | None = None,
    ) -> Task: ...

    def tasks(self, channel: Channel) -> list[Task]: ...

    def complete_task(self, task_id: int) -> Task:
        """Done (idempotent: a done task keeps when it was completed)."""
        ...

    def close(self) -> None: ...
