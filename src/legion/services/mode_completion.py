"""A session says its mode is done (`legion complete`): the one place the completion protocol
is written. A worker's issue gets the labels the decision table moves on (`worker-done`, and
loses `worker-active`), written first so a completion the tracker did not take is never
announced; then the completion is posted in the session's channel."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from legion.bus import actions
from legion.bus.model import Agent, AgentRole
from legion.core.decide import completion_labels
from legion.core.model import Mode
from legion.errors import InputError

if TYPE_CHECKING:
    from legion.bus import Bus
    from legion.bus.model import Posted
    from legion.sessions.identity import SessionVariables
    from legion.trackers.base import Tracker


@dataclass(frozen=True)
class Completion:
    """What a completion wrote: its message, and the labels it changed on the issue."""

    posted: Posted
    issue: str | None
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def complete(
    bus: Bus,
    agent: Agent,
    session: SessionVariables,
    summary: str | None,
    tracker: Callable[[], Tracker],
) -> Completion:
    """Complete `agent`'s mode. `tracker` is opened only for a worker with an issue (the
    controller's completion is its message alone)."""
    if agent.role is AgentRole.HUMAN:
        raise InputError("`legion complete` is an agent's: run it from a Legion session")
    changed: dict[str, list[str]] = {"added": [], "removed": []}

    def signal(current: Agent) -> None:
        if session.issue is None or current.role is AgentRole.CONTROLLER:
            return
        opened = tracker()
        status = opened.get_issue(session.issue).status
        # The mode it runs in: the session's variable, else its role (a retro keeps its own).
        add, remove = completion_labels(Mode.parse(session.mode or current.role.value), status)
        changed["added"] = [label.value for label in add]
        changed["removed"] = [label.value for label in remove]
        opened.update_labels(session.issue, add=changed["added"], remove=changed["removed"])

    posted = actions.complete(
        bus, agent, summary, spawn_instance=session.spawn_instance, signal=signal
    )
    return Completion(posted, session.issue, changed["added"], changed["removed"])
